package bench

import (
	"testing"

	"github.com/mvm-dev/mvm/exits"
)

func profileOf(rows ...exits.Row) *exits.Report { return &exits.Report{Rows: rows} }

func row(src, vcpu, reason string, count, ns uint64) exits.Row {
	return exits.Row{Source: src, VCPU: vcpu, Reason: reason, Count: count, TimeNS: ns}
}

func TestProfileDiffs(t *testing.T) {
	r := &Report{
		Config:   Config{Variants: []Variant{{Name: "A"}, {Name: "B"}}},
		Analysis: Analysis{Baseline: "A", Rows: []int{8}},
	}
	add := func(v string, rows ...exits.Row) {
		r.Runs = append(r.Runs, Run{Variant: v, CPUs: 8, Status: StatusOK, Profile: profileOf(rows...)})
	}
	// A: 100 and 300 WFx per run (mean 200), B: 400 both times. HVC64 is
	// the same on both sides; SYS64 only appears in B; per-vCPU rows and
	// runs without a profile must not count.
	add("A", row("tracepoint", "total", "WFx", 100, 1e6), row("tracepoint", "total", "HVC64", 10, 5e5), row("tracepoint", "0", "WFx", 999, 0))
	add("A", row("tracepoint", "total", "WFx", 300, 3e6), row("tracepoint", "total", "HVC64", 10, 5e5))
	add("B", row("tracepoint", "total", "WFx", 400, 2e6), row("tracepoint", "total", "HVC64", 10, 5e5), row("tracepoint", "total", "SYS64", 7, 1e5))
	add("B", row("tracepoint", "total", "WFx", 400, 2e6), row("tracepoint", "total", "HVC64", 10, 5e5), row("tracepoint", "total", "SYS64", 7, 1e5))
	r.Runs = append(r.Runs, Run{Variant: "B", CPUs: 8, Status: StatusOK})

	d := ProfileDiffs(r, "A", 2)
	if len(d) != 2 {
		t.Fatalf("got %d diffs, want the top 2: %+v", len(d), d)
	}
	if d[0].Reason != "SYS64" || d[0].BaseCount != 0 || d[0].VarCount != 7 {
		t.Errorf("first diff %+v, want SYS64 appearing (0 -> 7)", d[0])
	}
	if d[1].Reason != "WFx" || d[1].BaseCount != 200 || d[1].VarCount != 400 || d[1].BaseNS != 2e6 || d[1].VarNS != 2e6 {
		t.Errorf("second diff %+v, want WFx 200 -> 400 per run, time 2 ms both", d[1])
	}
	if got := ProfileDiffs(r, "B", 6); len(got) == 0 || got[0].Variant != "A" {
		t.Errorf("with B as the baseline the diffs should be for A: %+v", got)
	}
}
