//go:build linux && arm64

package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mvm-dev/mvm/vmm"
)

func readSummary(t *testing.T, path string) vmm.Summary {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("--result-json: %v", err)
	}
	var s vmm.Summary
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("--result-json: %v", err)
	}
	return s
}

// TestHostileGuest runs guest/payloads/hostile.s on 2 vCPUs: an MMIO storm
// over 256 unmapped addresses, 25 unimplemented SMCCC function IDs by HVC
// and SMC, and CPU_ON with a nonexistent MPIDR, entry points outside RAM
// and misaligned, and the caller as target. mvm answers each as the
// payload expects, logs at most 16 addresses and 16 function IDs (and one
// line each saying it stops), counts every access and every call it
// answered NOT_SUPPORTED, and the guest powers off (exit 0).
func TestHostileGuest(t *testing.T) {
	res := filepath.Join(t.TempDir(), "result.json")
	r := mvm(t, time.Minute, "run", "--kernel", payload(t, "hostile.bin"), "--cpus", "2", "--memory", "64M", "--result-json", res)
	if r.code != 0 {
		t.Fatalf("exit status %d, want 0\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, name := range []string{"mmio-storm", "unknown-fids", "cpu-on-no-such-mpidr", "cpu-on-entry-outside-ram",
		"cpu-on-entry-beyond-ram", "cpu-on-entry-misaligned", "cpu-on-self"} {
		if !strings.Contains(r.stdout, "ok "+name+"\n") {
			t.Errorf("guest check %s did not pass", name)
		}
	}
	if strings.Contains(r.stdout, "FAIL") {
		t.Errorf("guest:\n%s", r.stdout)
	}
	s := readSummary(t, res)
	if s.Exit != vmm.ExitPowerOff {
		t.Errorf("result exit %q, want %q", s.Exit, vmm.ExitPowerOff)
	}
	if s.Unmapped != 2*256 {
		t.Errorf("unmapped_accesses %d, want %d (a read and a write at 256 addresses)", s.Unmapped, 2*256)
	}
	// 20 IDs in the PSCI ranges reach mvm, by HVC and by SMC; KVM answers
	// the 5 outside them.
	if s.UnknownSMCCC != 2*20 {
		t.Errorf("unknown_smccc_calls %d, want %d", s.UnknownSMCCC, 2*20)
	}
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	count := func(s string) (n int) {
		for _, l := range lines {
			if strings.Contains(l, s) {
				n++
			}
		}
		return n
	}
	if n := count("guest accessed an unmapped address"); n != 16 {
		t.Errorf("%d unmapped addresses logged, want 16", n)
	}
	if n := count("guest made an SMCCC call mvm does not implement"); n != 16 {
		t.Errorf("%d unknown function IDs logged, want 16", n)
	}
	if n := count("further ones are counted"); n != 2 {
		t.Errorf("%d 'further ones' lines, want 2 (addresses, function IDs)", n)
	}
	if len(lines) != 16+16+2 || strings.Contains(r.stderr, "panic") {
		t.Errorf("stderr has %d lines, want 34:\n%s", len(lines), r.stderr)
	}
}

// procUse is what /proc says a process holds.
type procUse struct {
	fds, threads int
	rssKB        int
}

func readProcUse(t *testing.T, pid int) procUse {
	t.Helper()
	var u procUse
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	u.fds, u.threads = len(fds), len(tasks)
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &u.rssKB)
		}
	}
	return u
}

// TestRebootStorm: guest/payloads/reboots.s resets the machine 100 times
// with --on-reset reboot on 2 vCPUs, then powers off. Watched from outside
// through /proc at boot 30 and at boot 101, mvm's fds and threads grow by
// at most the runtime's own one-offs (2), its RSS by less than 4 MiB; it exits 0 and reports 100
// reboots.
func TestRebootStorm(t *testing.T) {
	res := filepath.Join(t.TempDir(), "result.json")
	cmd := exec.Command(env(t, "MVM_BIN"), "run", "--kernel", payload(t, "reboots.bin"), "--cpus", "2",
		"--memory", "64M", "--on-reset", "reboot", "--result-json", res)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var early, late procUse
	sc := bufio.NewScanner(out)
	boots := 0
	for sc.Scan() {
		boots++
		switch sc.Text() {
		case "boot 30": // past the runtime's own warm-up
			early = readProcUse(t, cmd.Process.Pid)
		case "boot 101": // the last boot powers off
			late = readProcUse(t, cmd.Process.Pid)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("mvm: %v\n%s", err, errb.String())
	}
	t.Logf("%d boots; at boot 30 %+v, at boot 101 %+v", boots, early, late)
	if boots != 101 || early.fds == 0 || late.fds == 0 {
		t.Fatalf("%d boots seen (want 101), samples %+v %+v", boots, early, late)
	}
	// The Go runtime creates an fd (its poller) or a thread when it first
	// needs one, and its heap settles; a leak per reboot would show 71
	// times over, so the bounds leave room for the one-offs only.
	if late.fds > early.fds+2 || late.threads > early.threads+2 {
		t.Errorf("fds %d -> %d, threads %d -> %d over 71 reboots: want no growth", early.fds, late.fds, early.threads, late.threads)
	}
	if late.rssKB-early.rssKB >= 4096 {
		t.Errorf("RSS grew by %d KiB over 71 reboots", late.rssKB-early.rssKB)
	}
	if s := readSummary(t, res); s.Reboots != 100 || s.Exit != vmm.ExitPowerOff {
		t.Errorf("result: %d reboots, exit %q; want 100, %q", s.Reboots, s.Exit, vmm.ExitPowerOff)
	}
	if errb.Len() != 0 {
		t.Errorf("stderr: %s", errb.String())
	}
}
