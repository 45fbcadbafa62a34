//go:build linux && arm64

package integration

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mvm-dev/mvm/internal/seccomp"
)

// waitFiltered waits until mvm's main thread has its seccomp filter (setup
// is done) and returns the seccomp state of all its threads.
func waitFiltered(t *testing.T, pid int, want int) map[int]seccomp.Thread {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		threads, err := seccomp.Threads(pid)
		if err != nil {
			t.Fatalf("read mvm's threads: %v", err)
		}
		if threads[pid].Mode == want {
			return threads
		}
		if time.Now().After(deadline) {
			t.Fatalf("mvm's main thread has seccomp mode %d after 30 s, want %d", threads[pid].Mode, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSeccompEveryThread: once setup is done every thread of a running mvm
// (vCPUs, Go runtime, metrics server, profiler) is in seccomp mode 2
// ("filter") with one filter, also after the metrics server has served a
// scrape; the profile is still written at the end. With --seccomp=false
// no thread is filtered.
func TestSeccompEveryThread(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("seccomp=%v", on), func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			ln.Close()
			prof := filepath.Join(t.TempDir(), "profile.json")
			cmd := exec.Command(env(t, "MVM_BIN"), "run", "--kernel", payload(t, "spin.bin"), "--cpus", "2",
				"--console", "none", "--metrics-addr", addr, "--profile", "--profile-format", "json",
				"--profile-out", prof, fmt.Sprintf("--seccomp=%v", on))
			var errb strings.Builder
			cmd.Stderr = &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			want := 0
			if on {
				want = 2
			}
			// The metrics server answers once setup is done.
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				if _, _, err := scrape("http://" + addr + "/metrics"); err == nil {
					break
				} else if time.Now().After(deadline) {
					t.Fatalf("no metrics after 30 s: %v\n%s", err, errb.String())
				}
			}
			before := waitFiltered(t, cmd.Process.Pid, want)
			if _, _, err := scrape("http://" + addr + "/metrics"); err != nil {
				t.Errorf("scrape: %v", err)
			}
			after := waitFiltered(t, cmd.Process.Pid, want)
			t.Logf("%d threads before the scrape, %d after", len(before), len(after))
			if len(after) < 4 { // main, 2 vCPUs, at least one runtime thread
				t.Errorf("only %d threads", len(after))
			}
			for _, threads := range []map[int]seccomp.Thread{before, after} {
				for tid, th := range threads {
					if th.Mode != want || (on && th.Filters != 1) {
						t.Errorf("thread %d: seccomp mode %d with %d filters, want mode %d", tid, th.Mode, th.Filters, want)
					}
				}
			}
			cmd.Process.Signal(syscall.SIGTERM)
			err = cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 143 {
				t.Errorf("mvm after SIGTERM: %v, want exit status 143\n%s", err, errb.String())
			}
			if p := readProfile(t, prof); p.count("userspace", "total", "MMIO/uart") == 0 {
				t.Errorf("the profile written under the filter counts no UART exits")
			}
		})
	}
}

// TestSeccompRefusesForbiddenCalls: the test build of mvm (tag
// mvmtesthooks) makes one forbidden call from vCPU 0's thread right after
// the filter is installed, before the guest boots: a new program, a
// socket, executable memory, a signal to another process, an ioctl
// outside the list. Each kills mvm with SIGSYS at once: the call never
// returns (the hook would say so and exit 1), the guest never prints.
func TestSeccompRefusesForbiddenCalls(t *testing.T) {
	bin := env(t, "MVM_TESTHOOKS_BIN")
	for _, call := range []string{"execve", "socket", "mmap-exec", "kill-other", "ioctl-tiocsti"} {
		t.Run(call, func(t *testing.T) {
			cmd := exec.Command(bin, "run", "--kernel", payload(t, "hello.bin"))
			cmd.Env = append(os.Environ(), "MVM_TESTHOOK_AFTER_SECCOMP="+call)
			var out, errb strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &errb
			done := make(chan error, 1)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			go func() { done <- cmd.Wait() }()
			var err error
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				t.Fatal("mvm did not end in 30 s")
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("mvm ended with %v, want killed by SIGSYS\nstderr: %s", err, errb.String())
			}
			if ws := ee.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGSYS {
				t.Errorf("mvm ended with %v, want killed by SIGSYS\nstderr: %s", err, errb.String())
			}
			if out.Len() != 0 || errb.Len() != 0 {
				t.Errorf("mvm printed before it was killed:\nstdout %q\nstderr %q", out.String(), errb.String())
			}
		})
	}
	// The kernel's audit record names the call when auditing is on.
	if b, err := exec.Command("dmesg").Output(); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, "type=1326") {
				t.Logf("dmesg: %s", l)
			}
		}
	}
}
