//go:build linux && arm64 && mvmtesthooks

package vmm

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mvm-dev/mvm/vcpu"
)

// TestHookEnv names the system call a test build of mvm (tag mvmtesthooks,
// never a release) makes from vCPU 0's thread right after the seccomp
// filter is installed. The filter must kill mvm on each of them; if the
// call returns instead, mvm stops with an error saying so.
const TestHookEnv = "MVM_TESTHOOK_AFTER_SECCOMP"

// forbiddenCalls are what a compromised VMM would try first.
func forbiddenCalls() map[string]func() error {
	return map[string]func() error{
		// A new program: the filter's main point.
		"execve": func() error {
			// The raw call: syscall.Exec would first call prlimit64,
			// which the filter refuses as well.
			path, err := unix.BytePtrFromString("/bin/true")
			if err != nil {
				return err
			}
			argv := []*byte{path, nil}
			envv := []*byte{nil}
			_, _, errno := unix.Syscall(unix.SYS_EXECVE, uintptr(unsafe.Pointer(path)),
				uintptr(unsafe.Pointer(&argv[0])), uintptr(unsafe.Pointer(&envv[0])))
			return errno
		},
		// A network connection: mvm opens no socket after setup.
		"socket": func() error { _, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0); return err },
		// Executable memory: an allowed call with a refused argument.
		"mmap-exec": func() error {
			_, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_EXEC, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
			return err
		},
		// A signal to another process (init; signal 0 only checks).
		"kill-other": func() error { return unix.Kill(1, 0) },
		// An ioctl outside the list: TIOCSTI would type into the user's
		// terminal.
		"ioctl-tiocsti": func() error {
			c := byte('x')
			return unix.IoctlSetPointerInt(0, unix.TIOCSTI, int(c))
		},
	}
}

func (m *VM) afterSandboxHook() error {
	name := os.Getenv(TestHookEnv)
	if name == "" {
		return nil
	}
	call, ok := forbiddenCalls()[name]
	if !ok {
		return fmt.Errorf("%s=%s: no such test call", TestHookEnv, name)
	}
	done := make(chan error, 1)
	m.cpus[0].runs <- runCmd{done: done, fn: func(*vcpu.VCPU) error { return call() }}
	err := <-done
	return fmt.Errorf("test hook: %s from vCPU 0's thread returned (error %v): the seccomp filter did not stop it", name, err)
}
