//go:build linux && arm64

package integration

import (
	"os/exec"
	"slices"
	"testing"
	"time"
)

// qemuBoot runs QEMU with the Linux test guest to power-off, optionally
// under mvm profile with profileArgs, and returns the wall time.
func qemuBoot(b *testing.B, profileArgs ...string) float64 {
	b.Helper()
	q := qemuArgsB(b)
	var c *exec.Cmd
	if profileArgs == nil {
		c = exec.Command(q[0], q[1:]...)
	} else {
		args := append(append([]string{"profile"}, profileArgs...), "--")
		c = exec.Command(env(b, "MVM_BIN"), append(args, q...)...)
	}
	start := time.Now()
	if out, err := c.CombinedOutput(); err != nil {
		b.Fatalf("%v: %v\n%s", c.Args, err, out)
	}
	return float64(time.Since(start))
}

func qemuArgsB(b *testing.B) []string {
	return []string{env(b, "MVM_QEMU"),
		"-machine", "virt,gic-version=3", "-accel", "kvm", "-cpu", "host",
		"-smp", "2", "-m", "256", "-nographic", "-nic", "none", "-no-reboot",
		"-kernel", env(b, "MVM_LINUX"), "-initrd", testInitrdB(b),
		"-append", "console=ttyAMA0 quiet panic=-1"}
}

// BenchmarkQEMUProfile: a QEMU boot of Linux on 2 vCPUs to power-off,
// plain, under mvm profile with every source (tracepoints through perf
// rings) and under mvm profile with the KVM stats only, interleaved.
// Ratios of medians against the plain boots of the same run, with the
// min..max of the per-round ratios.
func BenchmarkQEMUProfile(b *testing.B) {
	var plain, all, stats, rAll, rStats []float64
	for i := 0; i < b.N; i++ {
		p := qemuBoot(b)
		a := qemuBoot(b, "--format", "json", "--out", "/dev/null")
		s := qemuBoot(b, "--sources", "kvm_stats", "--format", "json", "--out", "/dev/null")
		plain, all, stats = append(plain, p), append(all, a), append(stats, s)
		rAll, rStats = append(rAll, a/p), append(rStats, s/p)
	}
	b.ReportMetric(median(plain)/1e6, "plain-ms")
	b.ReportMetric(median(all)/median(plain), "all/plain")
	b.ReportMetric(slices.Min(rAll), "all/plain-min")
	b.ReportMetric(slices.Max(rAll), "all/plain-max")
	b.ReportMetric(median(stats)/median(plain), "stats/plain")
	b.ReportMetric(slices.Min(rStats), "stats/plain-min")
	b.ReportMetric(slices.Max(rStats), "stats/plain-max")
	b.ReportMetric(0, "ns/op")
}
