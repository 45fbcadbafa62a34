//go:build linux

package vcpu

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawTimerChild marks TestRawTimerEndsRawCall's child process.
const rawTimerChild = "MVM_TEST_RAWTIMER_CHILD"

// waitRaw blocks in a raw ppoll on no descriptors for at most d and returns its errno and how long it took: the stand-in
// for a raw KVM_RUN, which a signal also ends with EINTR.
func waitRaw(d time.Duration) (unix.Errno, time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	t0 := time.Now()
	_, _, e := unix.RawSyscall6(unix.SYS_PPOLL, 0, 0, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
	return e, time.Since(t0)
}

// TestRawTimerEndsRawCall: an armed rawTimer ends a raw blocking call on
// its thread with EINTR after about rawBound, and again every rawBound
// (a signal that lands between two calls ends neither); a disarmed one
// does not.
//
// It runs in a child process with GODEBUG=asyncpreemptoff=1, as mvm runs:
// otherwise the runtime's own preemption signal (SIGURG, after 10 ms on a
// P) would end the raw call too, timer or not.
func TestRawTimerEndsRawCall(t *testing.T) {
	if os.Getenv(rawTimerChild) != "1" {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestRawTimerEndsRawCall$", "-test.count", "1", "-test.v")
		cmd.Env = append(os.Environ(), rawTimerChild+"=1", "GODEBUG=asyncpreemptoff=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestRawTimerEndsRawCall") {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var tm rawTimer
	defer tm.close()
	if !tm.arm() {
		t.Fatal("no timer: timer_create or timer_settime failed")
	}
	for i := 0; i < 3; i++ {
		if e, took := waitRaw(time.Second); e != unix.EINTR {
			t.Fatalf("call %d: errno %v after %v, want EINTR after about %v", i, e, took, rawBound)
		}
	}
	tm.disarm()
	// Refresh the goroutine's time slice so that the runtime's own
	// preemption signal (10 ms) cannot land in the wait below.
	runtime.Gosched()
	if e, took := waitRaw(2 * rawBound); e != 0 {
		t.Fatalf("disarmed timer: the wait ended with %v after %v, want its own timeout of %v", e, took, 2*rawBound)
	}
}
