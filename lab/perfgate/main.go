// Command perfgate is make test's performance gate: it reads the output of
// the instruction-time lab's gate benchmarks (make perf-gate) and fails
// when a ratio measured in that run is past its bound. The bounds are
// ratios within one run (mvm against a bare KVM_RUN loop, PSCI in mvm
// against PSCI in KVM), judged only in instruction time (lab-clock: insn),
// where they repeat to about 1% whatever the host does; each bound is the
// worst value seen over repeated runs plus that spread. Wall-clock figures
// never pass or fail anything here.
//
//	go run ./lab/perfgate out/perf-gate.txt
package main

import (
	"fmt"
	"io"
	"os"
	"slices"

	"golang.org/x/perf/benchfmt"
)

// A bound is one metric's limit. Change one only in a commit that says why,
// with the runs that justify it (docs/boot-phases.md, "The performance
// gate").
type bound struct {
	bench, unit string
	max         float64
	why         string
}

// measuredOn is what the bounds were measured with; a lab kernel, QEMU or Go
// that differs is named in the report, since path lengths move with them.
const measuredOn = "lab kernel 6.12.117+deb13-cloud-arm64, QEMU 7.2 (Debian bookworm qemu-system-arm), go1.26.8"

func bounds() []bound {
	return []bound{
		{"BenchmarkMMIOExit", "mvm/bare", 1.05,
			"an MMIO exit through mvm's loop and bus per exit of a bare KVM_RUN loop, median of 3 counts: with the raw re-entry bounded by the vCPU thread's timer and the written-out bus look-up, single counts 1.021-1.032 (2026-12-03, three counts of 3 rounds in an A/B run against main, docs/boot-phases.md), + 0.02 for the runs' moves seen before; the same loop with a plain Syscall re-entry gave 1.054-1.071 (2026-12-02/03), the loop before that (a stop poll, clock arithmetic per exit) 1.107-1.126, the build before the counter clock 1.142-1.148"},
		{"BenchmarkCPUOnFew/cpus=2", "user/kernel-p50", 1.25,
			"CPU_ON to first instruction, PSCI in mvm over PSCI in KVM: 0.811 or 1.084 by run (where the lab's scheduler puts the two vCPU threads: the target on the caller's lab CPU, preempting it, or on the other one, docs/boot-phases.md; 2026-12-03, two make perf-gate runs, and 1.083 in one on 2026-12-03 before the raw MMIO re-entry), +0.15: catches a path that got much longer; was 1.45 when the two modes gave 0.85-0.87 and 1.20-1.29"},
	}
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: perfgate BENCH-OUTPUT: judge the instruction-time gate benchmarks' output")
		os.Exit(2)
	}
	f, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "perfgate:", err)
		os.Exit(2)
	}
	defer f.Close()
	clock, got, err := parse(f, os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "perfgate:", err)
		os.Exit(2)
	}
	os.Exit(judge(os.Stdout, clock, got, bounds()))
}

// parse reads benchmark output: the lab-clock configuration and every
// value, keyed by benchmark name (without the GOMAXPROCS suffix; a
// sub-benchmark also under its parent's name) and unit.
func parse(in io.Reader, name string) (clock string, got map[string][]float64, err error) {
	got = map[string][]float64{}
	r := benchfmt.NewReader(in, name)
	for r.Scan() {
		res, ok := r.Result().(*benchfmt.Result)
		if !ok {
			continue
		}
		clock = res.GetConfig("lab-clock")
		names := []string{"Benchmark" + string(res.Name.Base())}
		if full := stripProcs("Benchmark" + string(res.Name.Full())); full != names[0] {
			names = append(names, full)
		}
		for _, v := range res.Values {
			for _, n := range names {
				got[n+"\x00"+v.Unit] = append(got[n+"\x00"+v.Unit], v.Value)
			}
		}
	}
	return clock, got, r.Err()
}

// median of vs (not empty): the gate judges the middle of a run's
// repeats, so one slow repeat does not fail it and a regression that moves
// them all does.
func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// stripProcs drops the -GOMAXPROCS suffix Go adds to a benchmark name
// (benchfmt's Full keeps it as "/gomaxprocs=N" or "-N").
func stripProcs(name string) string {
	for i := len(name) - 1; i > 0; i-- {
		if name[i] == '-' {
			return name[:i]
		}
		if name[i] < '0' || name[i] > '9' {
			break
		}
	}
	return name
}

// judge prints one line per bound and returns the exit status: 0 when every
// bound holds, 1 when one is past its bound, 2 when the output cannot be
// judged (another clock, a benchmark missing).
func judge(w io.Writer, clock string, got map[string][]float64, bs []bound) int {
	if clock != "insn" {
		fmt.Fprintf(w, "perfgate: the benchmarks ran with lab-clock %q; the gate judges instruction time only (LAB_TIME=insn)\n", clock)
		return 2
	}
	fmt.Fprintf(w, "perfgate: instruction-time lab; bounds measured with %s\n", measuredOn)
	status := 0
	for _, b := range bs {
		vs := got[b.bench+"\x00"+b.unit]
		if len(vs) == 0 {
			fmt.Fprintf(w, "  MISSING %s %s: no result (did the benchmark run?)\n", b.bench, b.unit)
			status = max(status, 2)
			continue
		}
		m := median(vs)
		verdict := "ok"
		if m > b.max {
			verdict = "REGRESSED"
			status = max(status, 1)
		}
		fmt.Fprintf(w, "  %-9s %s %s: %v (median %.3f, bound %.3f: %s)\n", verdict, b.bench, b.unit, vs, m, b.max, b.why)
	}
	return status
}
