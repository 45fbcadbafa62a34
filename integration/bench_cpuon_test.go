//go:build linux && arm64

package integration

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/mvm-dev/mvm/internal/labclock"
)

var cpuonwRe = regexp.MustCompile(`(?m)^cpuonw (0x[0-9a-f]+) (0x[0-9a-f]+)$`)

// cpuOnWFI runs guest/payloads/cpuonwfi.s on cpus vCPUs with PSCI in mode
// and returns its samples: CPU_ON to the target's first instruction, ns of
// the guest's virtual counter (from just before the caller's HVC), one per
// round, the caller asleep in WFI meanwhile.
func cpuOnWFI(b *testing.B, cpus int, mode string) []float64 {
	b.Helper()
	r := mvm(b, 3*time.Minute, "run", "--kernel", payload(b, "cpuonwfi.bin"), "--cpus", strconv.Itoa(cpus), "--psci", mode)
	if r.code != 0 {
		b.Fatalf("psci=%s: exit %d: %s", mode, r.code, r.stderr)
	}
	fm := cntfrqRe.FindStringSubmatch(r.stdout)
	if fm == nil {
		b.Fatalf("psci=%s: no cntfrq line in %q", mode, r.stdout)
	}
	freq, _ := strconv.ParseUint(fm[1], 0, 64)
	var ns []float64
	for _, m := range cpuonwRe.FindAllStringSubmatch(r.stdout, -1) {
		k, _ := strconv.ParseUint(m[1], 0, 64)
		ticks, _ := strconv.ParseUint(m[2], 0, 64)
		if k < 1 || int(k) >= cpus {
			b.Fatalf("psci=%s: sample for vCPU %d of %d", mode, k, cpus)
		}
		ns = append(ns, float64(ticks)*1e9/float64(freq))
	}
	if len(ns) != cpuOnWFIRounds {
		b.Fatalf("psci=%s: %d samples, want %d:\n%s", mode, len(ns), cpuOnWFIRounds, r.stdout)
	}
	return ns
}

// cpuOnWFIRounds is ROUNDS in guest/payloads/cpuonwfi.s.
const cpuOnWFIRounds = 200

// BenchmarkCPUOnFew: PSCI CPU_ON to the target's first guest instruction,
// 200 times per run on 2 vCPUs (and on 4, cycling over the secondaries),
// with PSCI in mvm (user) and in KVM (kernel), runs interleaved, the caller
// asleep in WFI until the target's SGI wakes it (guest/payloads/cpuonwfi.s
// says why not a spin). Few vCPUs keep the lab's scheduling of many threads
// on its 2 CPUs out of the figure, and in the instruction-time lab
// (LAB_TIME=insn) a sample is the instructions the lab machine executed
// from the caller's HVC to the target's first instruction. It reports
// p10/p50/p90 of each mode and their user/kernel ratios. Aim: p50 <= 0.9,
// p90 <= 1.0. With MVM_BIN_BASE (make bench BENCH_BASE=PATH) a third side,
// base, is PSCI in mvm run by that other build, interleaved with the two
// others: an A/B of two builds in one run (user/base, base/kernel).
func BenchmarkCPUOnFew(b *testing.B) {
	clock := labclock.Name()
	for _, cpus := range []int{2, 4} {
		b.Run(fmt.Sprintf("cpus=%d", cpus), func(b *testing.B) {
			got := map[string][]float64{}
			for i := 0; i < b.N; i++ {
				for _, side := range psciSides(i) {
					side.run(func() { got[side.name] = append(got[side.name], cpuOnWFI(b, cpus, side.mode)...) })
				}
			}
			user, kernel, base := got["user"], got["kernel"], got["base"]
			w := os.Stderr
			fmt.Fprintf(w, "CPU_ON -> first instruction, cpus=%d, µs of %s (%d samples a side):\n", cpus, labclock.Describe(clock), len(user))
			fmt.Fprintf(w, "  %-8s %7s %7s %7s %7s %7s %7s %7s\n", "", "min", "p10", "p25", "median", "p75", "p90", "max")
			fmt.Fprintf(w, "  %-8s%s\n", "user", distribution(user))
			fmt.Fprintf(w, "  %-8s%s\n", "kernel", distribution(kernel))
			if base != nil {
				fmt.Fprintf(w, "  %-8s%s\n", "base", distribution(base))
			}
			for _, q := range []struct {
				name string
				q    float64
			}{{"p10", 0.1}, {"p50", 0.5}, {"p90", 0.9}} {
				u, k := quantile(user, q.q), quantile(kernel, q.q)
				fmt.Fprintf(w, "  user/kernel %s %.3f\n", q.name, u/k)
				b.ReportMetric(u/1e3, "user-"+q.name+"-us")
				b.ReportMetric(k/1e3, "kernel-"+q.name+"-us")
				b.ReportMetric(u/k, "user/kernel-"+q.name)
				if base != nil {
					ba := quantile(base, q.q)
					fmt.Fprintf(w, "  user/base %s %.3f, base/kernel %s %.3f\n", q.name, u/ba, q.name, ba/k)
					b.ReportMetric(ba/1e3, "base-"+q.name+"-us")
					b.ReportMetric(u/ba, "user/base-"+q.name)
					b.ReportMetric(ba/k, "base/kernel-"+q.name)
				}
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

// pairOrder is the order of the two PSCI modes in iteration i: alternating,
// so neither always runs first.
func pairOrder(i int) []string {
	if i%2 == 1 {
		return []string{"kernel", "user"}
	}
	return []string{"user", "kernel"}
}

// psciSide is one side of a PSCI A/B: a name, the --psci mode, and the
// mvm build that runs it.
type psciSide struct {
	name, mode string
	// bin, if not empty, replaces MVM_BIN while the side runs.
	bin string
}

// run calls f with MVM_BIN set to the side's build.
func (s psciSide) run(f func()) {
	if s.bin == "" {
		f()
		return
	}
	old := os.Getenv("MVM_BIN")
	os.Setenv("MVM_BIN", s.bin)
	defer os.Setenv("MVM_BIN", old)
	f()
}

// psciSides is iteration i's sides in order: user and kernel (pairOrder),
// and with MVM_BIN_BASE set also base (PSCI in mvm by that build); the
// order rotates with i, so no side always runs first or last.
func psciSides(i int) []psciSide {
	var sides []psciSide
	for _, m := range pairOrder(i) {
		sides = append(sides, psciSide{name: m, mode: m})
	}
	base := os.Getenv("MVM_BIN_BASE")
	if base == "" {
		return sides
	}
	sides = append(sides, psciSide{name: "base", mode: "user", bin: base})
	r := (i / 2) % len(sides)
	return append(sides[r:], sides[:r]...)
}
