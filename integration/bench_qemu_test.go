//go:build linux && arm64

package integration

import (
	"os/exec"
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
	return qemuBase(b, 2, "256", testInitrdB(b), qemuConsoleCmdline)
}

// BenchmarkQEMUProfile: a QEMU boot of Linux on 2 vCPUs to power-off,
// plain and under mvm profile with every source (tracepoints counted by
// BPF, the default where allowed), with every source on the perf rings
// (--tracepoint-via perf), and with the KVM stats only, interleaved.
// Ratios of medians against the plain boots of the same run, with the
// min..max of the per-round ratios.
func BenchmarkQEMUProfile(b *testing.B) {
	out := []string{"--format", "json", "--out", "/dev/null"}
	interleaved(b, func(args ...string) float64 { return qemuBoot(b, args...) },
		benchVariant{name: "bpf", args: append([]string{"--tracepoint-via", "bpf"}, out...)},
		benchVariant{name: "perf", args: append([]string{"--tracepoint-via", "perf"}, out...)},
		benchVariant{name: "stats", args: append([]string{"--sources", "kvm_stats"}, out...)},
	)
}
