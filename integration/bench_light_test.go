//go:build linux && arm64

package integration

import (
	"fmt"
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
// run's report. hold2 is what a cheaper attach would cost: a disabled perf
// event on kvm_exit and kvm_entry keeps both tracepoints registered, so
// that a window's attach and detach no longer switch their static keys
// (text patching and an IPI to every CPU, which take milliseconds in the
// lab), but a registered tracepoint costs on every exit of the run
// (docs/profile.md).
func BenchmarkExitFloorLight(b *testing.B) {
	out := filepath.Join(b.TempDir(), "profile.json")
	light := []string{"--profile=light", "--profile-format", "json", "--profile-out", out}
	interleaved(b, func(args ...string) float64 { return sysregsRun(b, args...) },
		benchVariant{name: "light", args: light},
		benchVariant{name: "exact-sources", args: []string{"--profile", "--profile-sources", "userspace,kvm_stats", "--profile-format", "json", "--profile-out", filepath.Join(b.TempDir(), "p.json")}},
		benchVariant{name: "hold2", around: func() func() { return holdEvents(b, "kvm_exit", "kvm_entry") }},
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

// BenchmarkBootLight is BenchmarkProfileOverhead's light variant alone:
// the 8-vCPU Linux boot plain and with --profile=light, interleaved, with
// each light boot's windows printed (their number, the exits they saw,
// the time their attach and detach calls took), so that the mode's cost
// on a boot can be split into what the windows see and what switching
// them costs. Issue 20's goal: the light boots within the plain boots'
// spread.
func BenchmarkBootLight(b *testing.B) {
	out := filepath.Join(b.TempDir(), "profile.json")
	light := []string{"--profile=light", "--profile-format", "json", "--profile-out", out}
	var sampled, windows, attach []float64
	interleaved(b, func(args ...string) float64 {
		total := float64(bootLinux(b, 8, "512M", args...).PhasesNS["total"])
		if len(args) == 0 {
			return total
		}
		s := readReport(b, out).Sampling
		if s == nil || s.ExactExits == 0 || s.Windows == 0 {
			b.Fatalf("the light boot's report has no sampling section")
		}
		fmt.Printf("light boot %.0f ms: %d windows, %d of %d exits sampled (%.2f%%), attached %.1f ms, attach calls %.1f ms (%.2f ms a window), detach calls %.1f ms, switching %.1f ms\n",
			total/1e6, s.Windows, s.SampledExits, s.ExactExits, 100*float64(s.SampledExits)/float64(s.ExactExits),
			float64(s.AttachedNS)/1e6, float64(s.AttachNS)/1e6, float64(s.AttachNS)/1e6/float64(s.Windows), float64(s.DetachNS)/1e6, float64(s.SwitchNS)/1e6)
		sampled = append(sampled, 100*float64(s.SampledExits)/float64(s.ExactExits))
		windows = append(windows, float64(s.Windows))
		attach = append(attach, float64(s.AttachNS)/1e6/float64(s.Windows))
		return total
	}, benchVariant{name: "light", args: light})
	b.ReportMetric(median(sampled), "light-sampled-%")
	b.ReportMetric(median(windows), "light-windows")
	b.ReportMetric(median(attach), "light-attach-ms/window")
}
