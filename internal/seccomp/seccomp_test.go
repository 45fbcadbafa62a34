//go:build linux && (amd64 || arm64)

package seccomp

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// childEnv makes this test binary the child that installs a filter and
// then makes the call its value names.
const childEnv = "SECCOMP_TEST_CALL"

func TestMain(m *testing.M) {
	if call := os.Getenv(childEnv); call != "" {
		os.Exit(child(call))
	}
	os.Exit(m.Run())
}

func testArch() uint32 {
	if runtime.GOARCH == "arm64" {
		return unix.AUDIT_ARCH_AARCH64
	}
	return unix.AUDIT_ARCH_X86_64
}

// testRules admit every call number below 512 except getppid, with mvm's
// argument checks on mmap (no PROT_EXEC) and kill (this process only):
// enough for any Go program, and three ways to be refused.
func testRules(pid int) []Rule {
	var rules []Rule
	for nr := uintptr(0); nr < 512; nr++ {
		switch nr {
		case unix.SYS_GETPPID:
		case unix.SYS_MMAP:
			rules = append(rules, AllowIf("mmap", nr, 2, unix.PROT_EXEC, 0))
		case unix.SYS_KILL:
			rules = append(rules, AllowIf("kill", nr, 0, ^uint32(0), uint32(pid)))
		default:
			rules = append(rules, Allow(fmt.Sprint(nr), nr))
		}
	}
	return rules
}

// child runs threads, installs the filter from another thread, reports the
// seccomp state of every thread (and of one started afterwards), then
// makes the call named by call on yet another thread.
func child(call string) int {
	ppid := os.Getppid() // before getppid is refused
	park := make(chan struct{})
	locked := make(chan struct{})
	for range 4 {
		go func() {
			runtime.LockOSThread()
			locked <- struct{}{}
			<-park
		}()
	}
	// Each parked goroutine holds a thread of its own before Install, so
	// the filter must reach threads that already exist (TSYNC); without
	// this wait a goroutine might not have run yet and the test counted
	// too few threads.
	for range 4 {
		<-locked
	}
	prog, err := Assemble(testArch(), testRules(os.Getpid()))
	if err == nil {
		err = Install(prog)
	}
	if err != nil {
		fmt.Println("install:", err)
		return 1
	}
	late := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		close(late)
		<-park
	}()
	<-late
	threads, err := Threads(os.Getpid())
	if err != nil {
		fmt.Println("threads:", err)
		return 1
	}
	for tid, th := range threads {
		fmt.Printf("thread %d: mode %d filters %d\n", tid, th.Mode, th.Filters)
	}
	res := make(chan error)
	go func() {
		runtime.LockOSThread() // a thread of its own, like a vCPU's
		var err error
		switch call {
		case "getppid":
			_, _, errno := unix.RawSyscall(unix.SYS_GETPPID, 0, 0, 0)
			err = errnoErr(errno)
		case "mmap-exec":
			_, err = unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_EXEC, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		case "kill-other":
			err = unix.Kill(ppid, 0)
		case "allowed":
			var m []byte
			if m, err = unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS); err == nil {
				unix.Munmap(m)
				err = unix.Kill(os.Getpid(), 0)
			}
		default:
			err = fmt.Errorf("unknown call %q", call)
		}
		res <- err
	}()
	fmt.Printf("survived %s: %v\n", call, <-res)
	return 0
}

func errnoErr(e syscall.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

// TestInstallKillsOnRefusedCall: on the host's real kernel, the filter
// reaches threads that existed before Install and one started after, an
// allowed call works, and a refused call — a number outside the list, or
// an allowed call with a refused argument — made on another thread kills
// the whole process with SIGSYS before the call returns.
func TestInstallKillsOnRefusedCall(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		call    string
		refused bool
	}{
		{"allowed", false},
		{"getppid", true},
		{"mmap-exec", true},
		{"kill-other", true},
	} {
		t.Run(c.call, func(t *testing.T) {
			cmd := exec.Command(exe, "-test.run=^$")
			cmd.Env = append(os.Environ(), childEnv+"="+c.call)
			out, err := cmd.Output()
			t.Logf("child output:\n%s", out)
			if strings.HasPrefix(string(out), "install:") {
				t.Fatalf("the kernel refused the filter: %s", out)
			}
			var ee *exec.ExitError
			switch {
			case c.refused && errors.As(err, &ee):
				ws := ee.Sys().(syscall.WaitStatus)
				if !ws.Signaled() || ws.Signal() != syscall.SIGSYS {
					t.Errorf("child ended with %v, want killed by SIGSYS", err)
				}
			case c.refused:
				t.Errorf("child survived %s", c.call)
			case err != nil:
				t.Errorf("child: %v", err)
			}
			if strings.Contains(string(out), "survived") != !c.refused {
				t.Errorf("survived = %v, want %v", strings.Contains(string(out), "survived"), !c.refused)
			}
			n := strings.Count(string(out), "thread ")
			if n < 6 { // main, the 4 parked threads, the late one
				t.Errorf("%d threads reported, want at least 6", n)
			}
			if f := strings.Count(string(out), "mode 2 filters 1\n"); f != n {
				t.Errorf("%d of %d threads have exactly one filter (mode 2)", f, n)
			}
		})
	}
}

func TestAssembleRejects(t *testing.T) {
	many := make([]uint32, 200)
	for i := range many {
		many[i] = uint32(i)
	}
	for _, c := range []struct {
		name  string
		rules []Rule
		want  string
	}{
		{"twice", []Rule{Allow("read", 63), Allow("read again", 63)}, "twice"},
		{"argument 6", []Rule{AllowIf("ioctl", 29, 6, 1, 1)}, "bad argument check"},
		{"no values", []Rule{AllowIf("ioctl", 29, 1, 1)}, "bad argument check"},
		{"too many values", []Rule{AllowIf("ioctl", 29, 1, ^uint32(0), many...)}, "more than one BPF jump"},
	} {
		if _, err := Assemble(unix.AUDIT_ARCH_AARCH64, c.rules); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
}
