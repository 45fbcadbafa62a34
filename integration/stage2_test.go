//go:build linux && arm64

package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCPUOffKeepsGuestMapped: a vCPU the guest powers off with PSCI in mvm
// is readied for its next CPU_ON without KVM_ARM_VCPU_INIT, which on a host
// without FEAT_S2FWB unmaps the whole VM's stage 2 (vcpu.rearm). cpuon.bin
// starts each secondary, which powers itself off at once, so with a re-init
// per CPU_OFF the boot CPU faults its code back in after each one: one
// stage-2 instruction abort (IABT_LOW) per secondary more than with KVM's
// in-kernel PSCI, which resets without unmapping. The counts must match.
//
// On a host with FWB a re-init unmaps nothing and the check cannot fail;
// make test also runs this test in a lab without FWB (lab-test-nofwb,
// -cpu neoverse-n1), where MVM_LAB_NO_FWB=1 makes it check that it is.
func TestCPUOffKeepsGuestMapped(t *testing.T) {
	const cpus = 16
	fwb := hostHasFWB(t)
	if os.Getenv("MVM_LAB_NO_FWB") == "1" && fwb {
		t.Fatal("MVM_LAB_NO_FWB=1, but this host's kernel log reports Stage-2 Force Write-Back")
	}
	t.Logf("host has FEAT_S2FWB: %v", fwb)
	iabt := map[string]uint64{}
	for _, mode := range []string{"user", "kernel"} {
		out := filepath.Join(t.TempDir(), "profile.json")
		r := mvm(t, 2*time.Minute, "run", "--kernel", payload(t, "cpuon.bin"), "--cpus", strconv.Itoa(cpus), "--psci", mode,
			"--profile", "--profile-format", "json", "--profile-out", out)
		if r.code != 0 {
			t.Fatalf("%s: exit status %d\n%s", mode, r.code, r.stderr)
		}
		if n := strings.Count(r.stdout, "cpuon "); n != cpus-1 {
			t.Fatalf("%s: %d secondaries started, want %d\n%s", mode, n, cpus-1, r.stdout)
		}
		p := readProfile(t, out)
		if used, why := p.used("tracepoint"); !used {
			t.Fatalf("%s: tracepoint source not used: %s", mode, why)
		}
		iabt[mode] = p.count("tracepoint", "total", "IABT_LOW")
	}
	t.Logf("IABT_LOW exits: PSCI in mvm %d, in KVM %d", iabt["user"], iabt["kernel"])
	// A little slack for a fault that timing moves between the runs; a
	// re-init per CPU_OFF adds cpus-1.
	if iabt["user"] > iabt["kernel"]+2 {
		t.Errorf("PSCI in mvm: %d stage-2 instruction aborts, PSCI in KVM: %d: powering off a vCPU unmapped the guest", iabt["user"], iabt["kernel"])
	}
}

// hostHasFWB reports whether the host kernel detected FEAT_S2FWB (its
// boot log's "CPU features: detected: Stage-2 Force Write-Back").
func hostHasFWB(t *testing.T) bool {
	t.Helper()
	out, err := exec.Command("dmesg").Output()
	if err != nil {
		t.Fatalf("dmesg: %v", err)
	}
	if !strings.Contains(string(out), "CPU features: detected:") {
		t.Fatal("dmesg no longer has the boot log's CPU feature lines")
	}
	return strings.Contains(string(out), "Stage-2 Force Write-Back")
}
