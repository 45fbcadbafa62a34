//go:build linux

package vcpu

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// futex(2) operations (include/uapi/linux/futex.h). PRIVATE: the word is
// only shared between threads of this process.
const (
	futexWaitPrivate = 0 | 128 // FUTEX_WAIT | FUTEX_PRIVATE_FLAG
	futexWakePrivate = 1 | 128 // FUTEX_WAKE | FUTEX_PRIVATE_FLAG
)

// futexWait sleeps while *w == val, until a futexWake on w or a signal.
// Spurious returns are fine: callers re-check their condition.
func futexWait(w *atomic.Uint32, val uint32) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWaitPrivate, uintptr(val), 0, 0, 0)
}

// futexWake wakes one thread sleeping on w. FUTEX_WAKE never blocks, so it
// is a raw system call, without the Go runtime's entersyscall/exitsyscall:
// on the CPU_ON path the caller, a vCPU thread in the middle of its
// hypercall exit, posts and wakes the target, and those transitions were a
// share of that post. (futexWait blocks and stays an ordinary Syscall,
// so that the runtime can take its P while it sleeps.)
func futexWake(w *atomic.Uint32) {
	unix.RawSyscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWakePrivate, 1, 0, 0, 0)
}
