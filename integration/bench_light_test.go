//go:build linux && arm64

package integration

import (
	"path/filepath"
	"testing"
)

// BenchmarkExitFloorLight is BenchmarkExitFloor for --profile=light: the
// sysregs payload's 50,000 trapped register reads timed from the first
// KVM_RUN to the VM's exit, plain and with the light profile (its window
// attaches and detaches included, as they fall in the run), and with the
// exact sources alone (userspace and KVM stats, no tracepoints: what the
// light mode costs before any window), interleaved. Issue 20's goal for
// the always-on mode: light/plain <= 1.02 averaged over a run. Also
// reported: the share of the exits the windows saw, from the last light
// run's report.
func BenchmarkExitFloorLight(b *testing.B) {
	out := filepath.Join(b.TempDir(), "profile.json")
	light := []string{"--profile=light", "--profile-format", "json", "--profile-out", out}
	interleaved(b, func(args ...string) float64 { return sysregsRun(b, args...) },
		benchVariant{name: "light", args: light},
		benchVariant{name: "exact-sources", args: []string{"--profile", "--profile-sources", "userspace,kvm_stats", "--profile-format", "json", "--profile-out", filepath.Join(b.TempDir(), "p.json")}},
	)
	rep := readReport(b, out)
	if s := rep.Sampling; s != nil && s.ExactExits > 0 {
		b.ReportMetric(100*float64(s.SampledExits)/float64(s.ExactExits), "light-sampled-%")
		b.ReportMetric(float64(s.Windows), "light-windows")
		b.ReportMetric(float64(s.SwitchNS)/1e6, "light-switch-ms")
		b.ReportMetric(float64(s.AttachNS)/1e6, "light-attach-ms")
		b.ReportMetric(float64(s.DetachNS)/1e6, "light-detach-ms")
	} else {
		b.Errorf("the light run's report has no sampling section")
	}
}
