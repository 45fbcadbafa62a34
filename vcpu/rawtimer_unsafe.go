//go:build linux

package vcpu

import (
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawBound is the longest a raw KVM_RUN (runGuest: the re-entry after an
// MMIO exit) may hold its P: a POSIX timer aimed at the vCPU's thread
// then ends it with EINTR. Go's garbage collector stops the world by
// waiting for every P; mvm runs without preemption signals
// (asyncpreemptoff=1, docs/footprint.md), so without the bound a vCPU
// idle in WFI inside a raw KVM_RUN would hold up a collection for as long
// as its guest sleeps.
const rawBound = 4 * time.Millisecond

// sigevNotifyThreadID is SIGEV_THREAD_ID (include/uapi/asm-generic/siginfo.h):
// the timer's signal goes to one thread, not to the process.
const sigevNotifyThreadID = 4

// sigevent is struct sigevent as the kernel reads it
// (include/uapi/asm-generic/siginfo.h): sigev_value, sigev_signo,
// sigev_notify, then a 48-byte union whose first int is the thread id for
// SIGEV_THREAD_ID; 64 bytes in all (SIGEV_MAX_SIZE).
type sigevent struct {
	value  uint64
	signo  int32
	notify int32
	tid    int32
	_      [44]byte
}

// rawTimer is the vCPU thread's bound on raw KVM_RUNs: a periodic POSIX
// timer (timer_create(2), CLOCK_MONOTONIC) that sends SIGURG to that
// thread, the signal Kick uses, which the Go runtime's handler ignores and
// which makes KVM_RUN return EINTR. Created on first use, on the vCPU's
// thread; owned by it.
type rawTimer struct {
	id      int32
	created bool
	// broken: the timer could not be made (a kernel without POSIX
	// timers, a seccomp filter of someone else's): no raw KVM_RUN then.
	broken bool
}

// arm starts the timer, firing every rawBound (periodic: a signal that
// lands while the thread is between two KVM_RUNs ends neither, and the
// next one must still be bounded). False when there is no timer: the
// caller must not make a raw KVM_RUN then.
func (t *rawTimer) arm() bool {
	if t.broken {
		return false
	}
	if !t.created {
		ev := sigevent{signo: int32(unix.SIGURG), notify: sigevNotifyThreadID, tid: int32(unix.Gettid())}
		var id int32
		if _, _, e := unix.RawSyscall(unix.SYS_TIMER_CREATE, uintptr(unix.CLOCK_MONOTONIC), uintptr(unsafe.Pointer(&ev)), uintptr(unsafe.Pointer(&id))); e != 0 {
			t.broken = true
			return false
		}
		t.id, t.created = id, true
	}
	return t.set(rawBound) == nil
}

// disarm stops the timer (a signal already sent stays pending).
func (t *rawTimer) disarm() {
	if t.created {
		_ = t.set(0)
	}
}

// set arms the timer to fire every d (0: disarms it). timer_settime never
// blocks: a raw call.
func (t *rawTimer) set(d time.Duration) error {
	its := unix.ItimerSpec{Interval: unix.NsecToTimespec(int64(d)), Value: unix.NsecToTimespec(int64(d))}
	if _, _, e := unix.RawSyscall6(unix.SYS_TIMER_SETTIME, uintptr(t.id), 0, uintptr(unsafe.Pointer(&its)), 0, 0, 0); e != 0 {
		t.broken = true
		return e
	}
	return nil
}

// close deletes the timer.
func (t *rawTimer) close() {
	if t.created {
		unix.RawSyscall(unix.SYS_TIMER_DELETE, uintptr(t.id), 0, 0)
		t.created = false
	}
}
