//go:build linux

package seccomp

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Install attaches prog to every thread of the process. It sets
// no_new_privs first (seccomp(2) requires it without CAP_SYS_ADMIN; TSYNC
// copies it to the other threads). There is no way back: the filter stays
// for the life of the process, and filters only ever add up.
func Install(prog []unix.SockFilter) error {
	if len(prog) == 0 {
		return errors.New("seccomp: empty filter")
	}
	// prctl and seccomp act on the calling thread; TSYNC then applies the
	// filter to the others.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("seccomp: set no_new_privs: %w", err)
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	switch {
	case errno != 0:
		return fmt.Errorf("seccomp: install the filter: %w", errno)
	case r != 0:
		// With TSYNC a positive result is the thread that could not be
		// synchronised (it has a filter of its own).
		return fmt.Errorf("seccomp: thread %d could not take the filter", r)
	}
	return nil
}

// Thread is one thread's seccomp state from /proc/PID/task/TID/status.
type Thread struct {
	Mode    int // "Seccomp:": 0 off, 1 strict, 2 filter
	Filters int // "Seccomp_filters:": filters attached (Linux 5.9+)
}

// Threads reads the seccomp state of every thread of process pid, by
// thread id: for tests and diagnostics ("is every thread filtered?").
func Threads(pid int) (map[int]Thread, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	threads := map[int]Thread{}
	for _, e := range ents {
		var tid int
		if _, err := fmt.Sscan(e.Name(), &tid); err != nil {
			continue
		}
		b, err := os.ReadFile(dir + "/" + e.Name() + "/status")
		if err != nil {
			continue // the thread ended
		}
		th := Thread{Mode: -1, Filters: -1}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Seccomp:"); ok {
				fmt.Sscan(strings.TrimSpace(v), &th.Mode)
			}
			if v, ok := strings.CutPrefix(line, "Seccomp_filters:"); ok {
				fmt.Sscan(strings.TrimSpace(v), &th.Filters)
			}
		}
		threads[tid] = th
	}
	return threads, nil
}
