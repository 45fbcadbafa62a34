//go:build linux && arm64

package integration

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/mvm-dev/mvm/exits"
)

// TestProfileLight boots the same 4-vCPU Linux guest twice, with the exact
// profile and the sampled one (--profile=light), and checks the light one
// against the exact one, which it never reads. The exact profile is
// --profile --profile-plain --profile-via bpf: the same two BPF programs
// the light mode attaches, on every exit instead of in windows. With the
// breakdown's programs (plain --profile) the exact profile's own work
// lands inside the times it measures: in the instruction-time lab a SYS64
// exit's mean guest time read 3051 ns with them and 1425 with the light
// mode's programs (53% apart), its handling time 4427 and 3342, with
// counts 1.2% apart — the difference is the breakdown's observer cost,
// not the sampling's error.
//
//   - what the light profile takes from the KVM stats fd is exact within
//     its own run: per vCPU its tracepoint rows add up to the stats fd's
//     exits, WFx is wfi_exit_stat + wfe_exit_stat and HVC64 hvc_exit_stat,
//     and mmio_exit_user equals the MMIO exits mvm itself counted;
//   - every reason above 5% of the exact profile's exits has, in the light
//     one, a count within 10% of the exact profile's (issue 20's tolerance
//     for the always-on mode). This is asserted in the instruction-time
//     lab only (MVM_LAB_TIME=insn, make lab-test LAB_TIME=insn), where
//     issue 20 states the goal; in the wall-clock lab the two boots differ
//     in what the host's load does to them (the timer's IRQ exits, which
//     follow a boot's wall duration, came out 7446 against 13651), so it
//     would compare boots, not the estimate with the truth;
//   - the rows say what is estimated; the exact profile's say nothing and
//     have no sampling section.
//
// Mean guest and handling times are logged, not asserted: issue 20's 10%
// does not hold for them and no tolerance does. In four instruction-time
// runs SYS64's sampled mean guest time was 3.9%, 0.2%, 651% and 26% (2
// vCPUs) from the exact boot's: guest times are heavy-tailed (a vCPU
// thread descheduled while in the guest, a long stretch without exits), a
// 2% sample catches a rare long interval or misses it, and one caught
// weighs 1/fraction times what it does in the exact mean. Handling means
// differ as much between two exact boots (3012, 3635, 4627 ns). What
// would hold is left undone: means from the windows' histograms with the
// tail trimmed, or a larger fraction for times than for counts.
func TestProfileLight(t *testing.T) {
	dir := t.TempDir()
	boot := func(mode string, extra ...string) *exits.Report {
		t.Helper()
		out := filepath.Join(dir, mode+".json")
		r := mvm(t, 6*time.Minute, append([]string{"run", "--kernel", env(t, "MVM_LINUX"), "--initrd", testInitrd(t),
			"--cpus", "4", "--append", "quiet " + noCryptoTests, "--console", "none",
			"--profile=" + mode, "--profile-format", "json", "--profile-out", out}, extra...)...)
		if r.code != 0 {
			t.Fatalf("--profile=%s: exit status %d\nstderr:\n%s", mode, r.code, r.stderr)
		}
		return readReport(t, out)
	}
	exact := boot("true", "--profile-plain", "--profile-via", "bpf")
	light := boot("light")

	for _, rep := range []*exits.Report{exact, light} {
		for _, s := range rep.Sources {
			if !s.Used {
				t.Fatalf("source %s not used: %s", s.Name, s.Reason)
			}
		}
	}
	if exact.Sampling != nil {
		t.Errorf("the exact profile has a sampling section: %+v", exact.Sampling)
	}
	for _, row := range exact.Rows {
		if row.Estimate != "" {
			t.Errorf("the exact profile marks %s/%s as estimated", row.VCPU, row.Reason)
		}
	}
	s := light.Sampling
	if s == nil {
		t.Fatal("the light profile has no sampling section")
	}
	t.Logf("light: %d windows, attached %v, switching %v, %d of %d exits sampled (%.2f%%, target %.0f%%)",
		s.Windows, time.Duration(s.AttachedNS), time.Duration(s.SwitchNS), s.SampledExits, s.ExactExits,
		100*float64(s.SampledExits)/float64(s.ExactExits), 100*s.Target)
	if s.Windows < 2 || s.SampledExits == 0 || s.SampledExits >= s.ExactExits {
		t.Errorf("sampling %+v: want several windows seeing some but not all exits", s)
	}

	// Exact counts from the stats fd, within the light run.
	stat := func(vcpu, name string) uint64 {
		for _, r := range light.KVMStats {
			if r.VCPU == vcpu && r.Name == name {
				return r.Delta
			}
		}
		t.Fatalf("vCPU %s: no stat %s", vcpu, name)
		return 0
	}
	var statExits, mmioUser uint64
	for v := 0; v < 4; v++ {
		id := strconv.Itoa(v)
		var sum uint64
		rows := map[string]exits.Row{}
		for _, r := range light.RowsOf(exits.SourceTracepoint, id) {
			sum += r.Count
			rows[r.Reason] = r
		}
		all := stat(id, "exits")
		statExits += all
		mmioUser += stat(id, "mmio_exit_user")
		if sum != all {
			t.Errorf("vCPU %d: light tracepoint rows add up to %d, stats fd exits %d", v, sum, all)
		}
		if w, want := rows["WFx"].Count, stat(id, "wfi_exit_stat")+stat(id, "wfe_exit_stat"); w != want {
			t.Errorf("vCPU %d: light WFx %d, stats fd wfi+wfe %d", v, w, want)
		}
		if h, want := rows["HVC64"].Count, stat(id, "hvc_exit_stat"); h != want {
			t.Errorf("vCPU %d: light HVC64 %d, stats fd hvc %d", v, h, want)
		}
		for name, r := range rows {
			want := exits.EstimateCountTimes
			if name == "WFx" || name == "HVC64" {
				want = exits.EstimateTimes
			}
			if r.Estimate != want {
				t.Errorf("vCPU %d %s: estimate %q, want %q", v, name, r.Estimate, want)
			}
		}
	}
	if statExits != s.ExactExits {
		t.Errorf("sampling's exact exits %d, the stats fd's %d", s.ExactExits, statExits)
	}
	var userMMIO uint64
	for _, r := range light.RowsOf(exits.SourceUserspace, exits.TotalVCPU) {
		if r.Kind == "MMIO" {
			userMMIO += r.Count
		}
	}
	if userMMIO != mmioUser || userMMIO == 0 {
		t.Errorf("userspace MMIO exits %d, stats fd mmio_exit_user %d: want equal and non-zero", userMMIO, mmioUser)
	}

	// The estimate against the exact profile of the other boot.
	var total uint64
	for _, r := range exact.RowsOf(exits.SourceTracepoint, exits.TotalVCPU) {
		total += r.Count
	}
	lightRows := map[string]exits.Row{}
	var lightTotal uint64
	for _, r := range light.RowsOf(exits.SourceTracepoint, exits.TotalVCPU) {
		lightRows[r.Reason] = r
		lightTotal += r.Count
	}
	t.Logf("exits: exact boot %d, light boot %d", total, lightTotal)
	const tol = 0.10
	insnTime := os.Getenv("MVM_LAB_TIME") == "insn"
	if !insnTime {
		t.Logf("MVM_LAB_TIME %q, not insn: the two boots are compared in the log only", os.Getenv("MVM_LAB_TIME"))
	}
	checked := 0
	for _, e := range exact.RowsOf(exits.SourceTracepoint, exits.TotalVCPU) {
		l, ok := lightRows[e.Reason]
		share := float64(e.Count) / float64(total)
		t.Logf("%-10s exact %7d (%5.2f%%) guest mean %8d handle mean %8d | light %7d guest mean %8d handle mean %8d (%s)",
			e.Reason, e.Count, 100*share, e.TimeMeanNS, e.HandleMeanNS, l.Count, l.TimeMeanNS, l.HandleMeanNS, l.Estimate)
		if share <= 0.05 {
			continue
		}
		checked++
		if !ok {
			t.Errorf("%s: %.1f%% of the exact profile's exits, missing from the light one", e.Reason, 100*share)
			continue
		}
		for _, c := range []struct {
			what       string
			got, exact uint64
			tol        float64
		}{{"count", l.Count, e.Count, tol}, {"mean guest time", l.TimeMeanNS, e.TimeMeanNS, tol}, {"mean handling time", l.HandleMeanNS, e.HandleMeanNS, tol}} {
			d := relDiff(c.got, c.exact)
			t.Logf("%s %s: light %d, exact %d, %.1f%% apart", e.Reason, c.what, c.got, c.exact, 100*d)
			// A count the light mode takes from the stats fd (WFx,
			// HVC64: EstimateTimes) is checked against
			// the same boot's stats above; against the other boot it
			// only says how alike the two boots were (WFx, the idle
			// loop's, moved from 979 to 5494 between boots of one
			// build), so it is logged, not asserted.
			if c.what == "count" && d > c.tol && insnTime && l.Estimate == exits.EstimateCountTimes {
				t.Errorf("%s %s: light %d, exact %d: off by %.1f%%, more than %.0f%%", e.Reason, c.what, c.got, c.exact, 100*d, 100*c.tol)
			}
		}
	}
	if checked == 0 && insnTime {
		t.Error("no reason above 5% of the exits: nothing compared")
	}
}

// relDiff is |got - want| / want (infinite for want 0 and got not).
func relDiff(got, want uint64) float64 {
	if want == 0 {
		if got == 0 {
			return 0
		}
		return math.Inf(1)
	}
	return math.Abs(float64(got)-float64(want)) / float64(want)
}
