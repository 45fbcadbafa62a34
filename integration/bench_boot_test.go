//go:build linux && arm64

package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"
)

// Benchmarks of issue "mvm run" and "exit profiling", run by 'make bench'
// in the lab. Absolute times under emulation mean little; each benchmark
// reports ratios against a baseline measured in the same run.

// runSummary is the part of --result-json the benchmarks read.
type runSummary struct {
	Exit     string           `json:"exit"`
	PhasesNS map[string]int64 `json:"phases_ns"`
	Memory   struct {
		RSS           uint64 `json:"rss_bytes"`
		GuestResident uint64 `json:"guest_resident_bytes"`
		Overhead      uint64 `json:"overhead_bytes"`
		Private       uint64 `json:"private_overhead_bytes"`
	} `json:"memory"`
}

func bootLinux(b *testing.B, cpus int, memory string, extra ...string) runSummary {
	b.Helper()
	out := filepath.Join(b.TempDir(), "result.json")
	args := append([]string{"run", "--kernel", env(b, "MVM_LINUX"), "--initrd", testInitrdB(b),
		"--cpus", strconv.Itoa(cpus), "--memory", memory, "--append", "quiet", "--console", "none",
		"--result-json", out}, extra...)
	r := mvm(b, 5*time.Minute, args...)
	if r.code != 0 {
		b.Fatalf("exit status %d\n%s", r.code, r.stderr)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		b.Fatal(err)
	}
	var s runSummary
	if err := json.Unmarshal(data, &s); err != nil {
		b.Fatal(err)
	}
	return s
}

func testInitrdB(b *testing.B) string {
	p, err := linuxInitrd()
	if err != nil {
		b.Fatal(err)
	}
	return p
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// BenchmarkLinuxBoot: time from the first KVM_RUN to the userspace marker,
// and mvm's own memory (resident set minus resident guest RAM), for 1 and
// 8 vCPUs. The 8-vCPU boot is reported relative to the 1-vCPU one of the
// same run.
func BenchmarkLinuxBoot(b *testing.B) {
	var one, eight, overhead, private []float64
	for i := 0; i < b.N; i++ {
		s1 := bootLinux(b, 1, "128M")
		s8 := bootLinux(b, 8, "512M")
		one = append(one, float64(s1.PhasesNS["kernel_to_user"]))
		eight = append(eight, float64(s8.PhasesNS["kernel_to_user"]))
		overhead = append(overhead, float64(s1.Memory.Overhead))
		private = append(private, float64(s1.Memory.Private))
	}
	b.ReportMetric(median(one)/1e6, "cpus=1-ms-to-init")
	b.ReportMetric(median(eight)/1e6, "cpus=8-ms-to-init")
	b.ReportMetric(median(eight)/median(one), "cpus=8/cpus=1")
	b.ReportMetric(median(overhead)/(1<<20), "vmm-MiB(1cpu,128M)")
	b.ReportMetric(median(private)/(1<<20), "vmm-private-MiB")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkProfileOverhead: boot to power-off of an 8-vCPU guest with
// --profile (every source), with --profile limited to the cheap sources
// (userspace and KVM stats), and without, interleaved. Aim: ratio <= 1.05.
func BenchmarkProfileOverhead(b *testing.B) {
	var plain, prof, cheap []float64
	for i := 0; i < b.N; i++ {
		out := filepath.Join(b.TempDir(), "profile.json")
		plain = append(plain, float64(bootLinux(b, 8, "512M").PhasesNS["total"]))
		prof = append(prof, float64(bootLinux(b, 8, "512M", "--profile", "--profile-format", "json", "--profile-out", out).PhasesNS["total"]))
		cheap = append(cheap, float64(bootLinux(b, 8, "512M", "--profile", "--profile-sources", "userspace,kvm_stats", "--profile-format", "json", "--profile-out", out).PhasesNS["total"]))
	}
	b.ReportMetric(median(plain)/1e6, "plain-ms")
	b.ReportMetric(median(prof)/median(plain), "profile/plain")
	b.ReportMetric(median(cheap)/median(plain), "profile-no-trace/plain")
	b.ReportMetric(0, "ns/op")
}

var cpuonRe = regexp.MustCompile(`(?m)^cpuon (0x[0-9a-f]+) (0x[0-9a-f]+)$`)
var cntfrqRe = regexp.MustCompile(`(?m)^cntfrq (0x[0-9a-f]+)$`)

// cpuOnLatencies runs guest/payloads/cpuon.s, which times each CPU_ON from
// inside the guest with the virtual counter: from just before the boot
// CPU's HVC to the secondary's first instruction.
func cpuOnLatencies(b *testing.B, cpus int, mode string) []float64 {
	r := mvm(b, 2*time.Minute, "run", "--kernel", payload(b, "cpuon.bin"), "--cpus", strconv.Itoa(cpus), "--psci", mode)
	if r.code != 0 {
		b.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	fm := cntfrqRe.FindStringSubmatch(r.stdout)
	if fm == nil {
		b.Fatalf("no cntfrq line in %q", r.stdout)
	}
	freq, _ := strconv.ParseUint(fm[1], 0, 64)
	var ns []float64
	for _, m := range cpuonRe.FindAllStringSubmatch(r.stdout, -1) {
		ticks, _ := strconv.ParseUint(m[2], 0, 64)
		ns = append(ns, float64(ticks)*1e9/float64(freq))
	}
	if len(ns) != cpus-1 {
		b.Fatalf("%d CPU_ON samples for %d vCPUs:\n%s", len(ns), cpus, r.stdout)
	}
	return ns
}

// BenchmarkCPUOn: PSCI CPU_ON to the secondary's first guest instruction,
// median over secondaries, with PSCI in mvm (user) and in KVM (kernel),
// interleaved. Aim: user/kernel <= 1.2.
func BenchmarkCPUOn(b *testing.B) {
	const cpus = 8
	var user, kernel []float64
	for i := 0; i < b.N; i++ {
		user = append(user, cpuOnLatencies(b, cpus, "user")...)
		kernel = append(kernel, cpuOnLatencies(b, cpus, "kernel")...)
	}
	b.ReportMetric(median(user)/1e3, "user-us")
	b.ReportMetric(median(kernel)/1e3, "kernel-us")
	b.ReportMetric(median(user)/median(kernel), "user/kernel")
	b.ReportMetric(0, "ns/op")
	fmt.Fprintf(os.Stderr, "CPU_ON samples: user %d, kernel %d\n", len(user), len(kernel))
}
