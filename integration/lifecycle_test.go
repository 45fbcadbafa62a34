//go:build linux && arm64

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRebootTwice: with --on-reset reboot the payload resets twice and
// powers off on its third boot, all in one mvm process.
func TestRebootTwice(t *testing.T) {
	r := mvm(t, time.Minute, "run", "--kernel", payload(t, "reboot.bin"), "--on-reset", "reboot")
	if r.code != 0 {
		t.Fatalf("exit status %d\nstderr:\n%s", r.code, r.stderr)
	}
	if want := "boot 1\nboot 2\nboot 3\n"; r.stdout != want {
		t.Errorf("console %q, want %q", r.stdout, want)
	}
}

// TestResetExits: by default a guest reset ends mvm with status 0.
func TestResetExits(t *testing.T) {
	r := mvm(t, time.Minute, "run", "--kernel", payload(t, "reboot.bin"))
	if r.code != 0 {
		t.Fatalf("exit status %d\nstderr:\n%s", r.code, r.stderr)
	}
	if r.stdout != "boot 1\n" {
		t.Errorf("console %q, want one boot", r.stdout)
	}
}

// TestSignalStopsSpinningGuest: SIGINT/SIGTERM stop a guest that spins
// with interrupts masked within a second: spin.bin never exits to mvm by
// itself; mmiospin.bin exits to mvm on every iteration, and mvm re-enters
// after an MMIO exit without polling its stop channel (vcpu runGuest), so
// its stop and state dump depend on the kick's immediate_exit.
func TestSignalStopsSpinningGuest(t *testing.T) {
	for _, c := range []struct {
		guest string
		sig   syscall.Signal
		code  int
	}{{"spin.bin", syscall.SIGINT, 130}, {"spin.bin", syscall.SIGTERM, 143}, {"mmiospin.bin", syscall.SIGINT, 130}, {"mmiospin.bin", syscall.SIGTERM, 143}} {
		name := c.sig.String()
		if c.guest != "spin.bin" {
			name = strings.TrimSuffix(c.guest, ".bin") + "/" + name
		}
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(env(t, "MVM_BIN"), "run", "--kernel", payload(t, c.guest), "--cpus", "2")
			var out, errb lockedBuffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Wait until the guest runs its loop.
			deadline := time.Now().Add(30 * time.Second)
			for !strings.Contains(out.String(), "spinning") && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			time.Sleep(200 * time.Millisecond)
			if c.guest == "mmiospin.bin" {
				checkRawTimer(t, cmd.Process.Pid)
			}
			if c.sig == syscall.SIGTERM {
				checkStateDump(t, cmd, &errb)
			}
			sent := time.Now()
			cmd.Process.Signal(c.sig)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("mvm did not stop within 10 s of %v", c.sig)
			}
			took := time.Since(sent)
			t.Logf("stopped %v after %v", c.sig, took)
			if took > time.Second {
				t.Errorf("mvm took %v to stop after %v, want under 1 s", took, c.sig)
			}
			if got := cmd.ProcessState.ExitCode(); got != c.code {
				t.Errorf("exit status %d, want %d (stderr %q)", got, c.code, errb.String())
			}
		})
	}
}

// checkRawTimer: a vCPU re-entering its guest after MMIO exits does so
// with raw KVM_RUNs, each stretch bounded by a POSIX timer that signals
// the vCPU's own thread with SIGURG (vcpu's rawTimer). The timer exists
// only if timer_create got through mvm's seccomp filter; without it the
// loop silently keeps to plain system calls.
func checkRawTimer(t *testing.T, pid int) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/timers", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	// fs/proc/base.c show_timer: "notify: signal/tid.N" for SIGEV_THREAD_ID.
	m := regexp.MustCompile(`(?m)^signal: (\d+)/[0-9a-f]+\nnotify: signal/tid\.(\d+)$`).FindAllStringSubmatch(s, -1)
	for _, g := range m {
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/comm", pid, g[2]))
		if g[1] == fmt.Sprint(int(syscall.SIGURG)) && strings.TrimSpace(string(comm)) == "mvm-vcpu-0" {
			return
		}
	}
	t.Errorf("no SIGURG timer aimed at vCPU 0's thread in /proc/%d/timers while the guest makes MMIO exits:\n%s", pid, s)
}

// checkStateDump: kill -USR1 makes mvm print each vCPU's state and lets the
// guest run on. spin.bin and mmiospin.bin spin on vCPU 0 in their first
// page of RAM at EL1 and never start vCPU 1, which stays parked (PSCI OFF
// with PSCI in mvm).
func checkStateDump(t *testing.T, cmd *exec.Cmd, errb *lockedBuffer) {
	t.Helper()
	cmd.Process.Signal(syscall.SIGUSR1)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(errb.String(), "vCPU 1:") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	dump := errb.String()
	t.Logf("state dump:\n%s", dump)
	v0 := regexp.MustCompile(`vCPU 0: running, PSCI ON, \d+ exits to mvm, last exit \S+ ago, pc (0x[0-9a-f]+), EL1h`).FindStringSubmatch(dump)
	if v0 == nil {
		t.Fatalf("no running line with a PC for vCPU 0 in the dump")
	}
	if pc, _ := strconv.ParseUint(v0[1], 0, 64); pc < 0x40000000 || pc >= 0x40001000 {
		t.Errorf("vCPU 0 at pc %#x, want the payload's loop in the first page of RAM (0x40000000)", pc)
	}
	if !regexp.MustCompile(`vCPU 1: (created|off), PSCI OFF, 0 exits to mvm, parked`).MatchString(dump) {
		t.Errorf("vCPU 1 is not reported parked and off")
	}
	if cmd.ProcessState != nil {
		t.Fatalf("mvm exited after SIGUSR1")
	}
}

func TestBadInputRun(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.img")
	f, _ := os.Create(big)
	f.Truncate(64 << 20) // larger than --memory 32M
	f.Close()
	unreadable := filepath.Join(dir, "secret.img")
	os.WriteFile(unreadable, []byte("x"), 0o000)
	hello := payload(t, "hello.bin")
	kernel := env(t, "MVM_LINUX")
	cases := []struct {
		name  string
		args  []string
		code  int
		want  string
		asUID int
	}{
		{"initrd larger than memory", []string{"run", "--kernel", hello, "--initrd", big, "--memory", "32M"}, 2, "give more --memory", 0},
		{"kernel plus initrd too big", []string{"run", "--kernel", kernel, "--initrd", big, "--memory", "80M"}, 2, "--memory", 0},
		{"cpus above host max", []string{"run", "--kernel", hello, "--cpus", "100000"}, 2, "--cpus", 0},
		{"unknown psci", []string{"run", "--kernel", hello, "--psci", "firmware"}, 2, "--psci", 0},
		{"missing initrd", []string{"run", "--kernel", hello, "--initrd", filepath.Join(dir, "none")}, 2, "does not exist", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			oneLineError(t, mvm(t, 30*time.Second, c.args...), c.code, c.want)
		})
	}
	// Root reads any file, so prove the unreadable case as an unprivileged
	// user (the test starts as root in the lab).
	t.Run("unreadable initrd", func(t *testing.T) {
		if os.Getuid() != 0 {
			oneLineError(t, mvm(t, 30*time.Second, "run", "--kernel", hello, "--initrd", unreadable), 2, "permission denied")
			return
		}
		k := publicCopy(t, hello)
		secret := filepath.Join(filepath.Dir(k), "secret.img")
		os.WriteFile(secret, []byte("x"), 0o000)
		r := mvmCmd(t, 30*time.Second, asNobody, "run", "--kernel", k, "--initrd", secret)
		oneLineError(t, r, 2, "permission denied")
	})
}

// TestGuestFaultReported: a guest access KVM cannot emulate stops mvm with
// status 1 and one line naming the vCPU, its PC and PSTATE.
func TestGuestFaultReported(t *testing.T) {
	r := mvm(t, time.Minute, "run", "--kernel", payload(t, "badmmio.bin"))
	oneLineError(t, r, 1, "vCPU 0")
	// The ldp is the payload's second instruction.
	for _, want := range []string{"PC 0x40000004", "PSTATE 0x3c5", "cannot emulate"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr %q lacks %q", r.stderr, want)
		}
	}
}
