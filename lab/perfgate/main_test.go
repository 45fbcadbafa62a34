package main

import (
	"bytes"
	"strings"
	"testing"
)

func read(t *testing.T, out string) (string, map[string][]float64) {
	t.Helper()
	clock, got, err := parse(strings.NewReader(out), "test")
	if err != nil {
		t.Fatal(err)
	}
	return clock, got
}

const gateOut = `lab-clock: insn
goos: linux
BenchmarkMMIOExit-2   	       3	      6523 bare-ns/exit	      6678 mvm-ns/exit	         %s mvm/bare
BenchmarkCPUOnFew/cpus=2-2         	       1	        29.20 kernel-p50-us	        25.38 user-p50-us	         %s user/kernel-p50
`

func TestGate(t *testing.T) {
	for _, c := range []struct {
		name, mmio, cpuon string
		want              int
		says              string
	}{
		{"within bounds", "1.030", "0.869", 0, "ok"},
		{"MMIO exit regressed", "1.200", "0.869", 1, "REGRESSED BenchmarkMMIOExit mvm/bare"},
		{"MMIO exit at the old clock's cost", "1.145", "0.869", 1, "REGRESSED BenchmarkMMIOExit mvm/bare"},
		{"MMIO exit re-entered through the runtime's system call again", "1.060", "0.869", 1, "REGRESSED BenchmarkMMIOExit mvm/bare"},
		{"MMIO exit with the stop poll and clock work per exit again", "1.110", "0.869", 1, "REGRESSED BenchmarkMMIOExit mvm/bare"},
		{"CPU_ON regressed", "1.030", "1.600", 1, "REGRESSED BenchmarkCPUOnFew/cpus=2 user/kernel-p50"},
		{"CPU_ON at the slow mode of the calls before the raw ones", "1.030", "1.290", 1, "REGRESSED BenchmarkCPUOnFew/cpus=2 user/kernel-p50"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := strings.Replace(strings.Replace(gateOut, "%s", c.mmio, 1), "%s", c.cpuon, 1)
			clock, got := read(t, out)
			var w bytes.Buffer
			if st := judge(&w, clock, got, bounds()); st != c.want {
				t.Fatalf("status %d, want %d:\n%s", st, c.want, w.String())
			}
			if !strings.Contains(w.String(), c.says) {
				t.Fatalf("report does not say %q:\n%s", c.says, w.String())
			}
		})
	}
}

// Wall-clock output is never judged, and a missing benchmark is not a pass.
func TestGateRefuses(t *testing.T) {
	out := strings.Replace(strings.Replace(gateOut, "%s", "1.0", 2), "lab-clock: insn", "lab-clock: wall", 1)
	clock, got := read(t, out)
	var w bytes.Buffer
	if st := judge(&w, clock, got, bounds()); st != 2 || !strings.Contains(w.String(), "instruction time only") {
		t.Fatalf("wall clock: status %d, report %q", st, w.String())
	}
	clock, got = read(t, "lab-clock: insn\nBenchmarkMMIOExit-2 3 1.05 mvm/bare\n")
	w.Reset()
	if st := judge(&w, clock, got, bounds()); st != 2 || !strings.Contains(w.String(), "MISSING BenchmarkCPUOnFew/cpus=2") {
		t.Fatalf("missing benchmark: status %d, report %q", st, w.String())
	}
}

// One slow repeat among three does not fail the gate; two do.
func TestGateJudgesTheMedian(t *testing.T) {
	line := "BenchmarkMMIOExit-2 3 1 bare-ns/exit 1 mvm-ns/exit %s mvm/bare\n"
	cpuon := "BenchmarkCPUOnFew/cpus=2-2 1 0.87 user/kernel-p50\n"
	for _, c := range []struct {
		vals []string
		want int
	}{{[]string{"1.03", "1.20", "1.02"}, 0}, {[]string{"1.03", "1.20", "1.19"}, 1}} {
		out := "lab-clock: insn\n" + cpuon
		for _, v := range c.vals {
			out += strings.Replace(line, "%s", v, 1)
		}
		clock, got := read(t, out)
		var w bytes.Buffer
		if st := judge(&w, clock, got, bounds()); st != c.want {
			t.Errorf("%v: status %d, want %d:\n%s", c.vals, st, c.want, w.String())
		}
	}
}

// Each result counts once per name it is judged under.
func TestParseCountsOnce(t *testing.T) {
	_, got := read(t, "lab-clock: insn\nBenchmarkMMIOExit-2 3 1.10 mvm/bare\nBenchmarkCPUOnFew/cpus=2-2 1 0.9 user/kernel-p50\n")
	if n := len(got["BenchmarkMMIOExit\x00mvm/bare"]); n != 1 {
		t.Errorf("MMIOExit counted %d times", n)
	}
	if n := len(got["BenchmarkCPUOnFew/cpus=2\x00user/kernel-p50"]); n != 1 {
		t.Errorf("CPUOnFew/cpus=2 counted %d times", n)
	}
}
