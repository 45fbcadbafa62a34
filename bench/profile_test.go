package bench

import (
	"strings"
	"testing"

	"github.com/mvm-dev/mvm/exits"
)

// profileRun is one run's profile: WFx with a WFI breakdown row, HVC64,
// and IRQ during the secondaries phase.
func profileRun(wfx, hvc, irqSec uint64, sgi bool) *exits.Report {
	rep := &exits.Report{Rows: []exits.Row{
		{Source: "tracepoint", VCPU: "total", Reason: "WFx", Count: wfx, TimeNS: wfx * 1000,
			Breakdown: []exits.BreakdownRow{{Key: "WFI", Samples: wfx, TimeNS: wfx * 1000}}},
		{Source: "tracepoint", VCPU: "total", Reason: "HVC64", Count: hvc},
		{Source: "tracepoint", VCPU: "0", Reason: "WFx", Count: 999}, // per-vCPU rows do not count
	}}
	if sgi {
		rep.Rows = append(rep.Rows, exits.Row{Source: "tracepoint", VCPU: "total", Reason: "SYS64", Count: 1,
			Breakdown: []exits.BreakdownRow{{Key: "ICC_SGI1R_EL1 write", Samples: 1}}})
	}
	rep.ByPhase = []exits.PhaseRows{{Phase: "secondaries", Rows: []exits.PhaseRow{{Reason: "IRQ", Samples: irqSec}}}}
	return rep
}

func TestProfileDiffs(t *testing.T) {
	r := &Report{
		Config:   Config{Variants: []Variant{{Name: "A"}, {Name: "B"}}},
		Analysis: Analysis{Baseline: "A", Rows: []int{8}, Alpha: 0.05},
	}
	add := func(v string, p *exits.Report) {
		r.Runs = append(r.Runs, Run{Variant: v, CPUs: 8, Status: StatusOK, Profile: p})
	}
	// Six runs a side: WFx (and its WFI row) and IRQ during secondaries
	// clearly higher in B; HVC64 the same spread on both sides; one B run
	// has a single SYS64 exit, which must not rank as a +new change.
	for i := uint64(0); i < 6; i++ {
		add("A", profileRun(100+i, 10+i%2, 20+i, false))
		add("B", profileRun(400+i, 10+(i+1)%2, 54+i, i == 3))
	}
	r.Runs = append(r.Runs, Run{Variant: "B", CPUs: 8, Status: StatusOK}) // no profile: left out

	d := ProfileDiffs(r, "A", 0.05, false, 0)
	got := map[string]ProfileDiff{}
	for _, x := range d {
		got[x.Row()] = x
		if !x.Significant {
			t.Errorf("non-significant row %q listed without --profile-all", x.Row())
		}
	}
	for _, row := range []string{"WFx", "WFx WFI", "IRQ during secondaries"} {
		x, ok := got[row]
		if !ok {
			t.Errorf("significant row %q missing: %+v", row, d)
			continue
		}
		if x.P >= 0.05 || x.N != 6 || x.BaseN != 6 {
			t.Errorf("%s: p %g, n %d/%d", row, x.P, x.N, x.BaseN)
		}
	}
	if x := got["WFx"]; x.BaseCount != 102.5 || x.VarCount != 402.5 {
		t.Errorf("WFx medians %g -> %g", x.BaseCount, x.VarCount)
	}
	if _, ok := got["SYS64"]; ok {
		t.Error("a single SYS64 exit in one run ranks as significant")
	}
	for i := 1; i < len(d); i++ {
		if d[i].P < d[i-1].P {
			t.Errorf("not ordered by p: %v then %v", d[i-1].P, d[i].P)
		}
	}
	all := ProfileDiffs(r, "A", 0.05, true, 0)
	var sawSYS, sawHVC bool
	for _, x := range all {
		sawSYS = sawSYS || x.Row() == "SYS64 ICC_SGI1R_EL1 write"
		sawHVC = sawHVC || x.Row() == "HVC64" && !x.Significant
	}
	if !sawSYS || !sawHVC || len(all) <= len(d) {
		t.Errorf("--profile-all lacks rows: %+v", all)
	}
	if got := ProfileDiffs(r, "A", 0.05, true, 2); len(got) != 2 {
		t.Errorf("top 2: %d rows", len(got))
	}

	var b strings.Builder
	writeProfileDiffs(&b, r)
	if !strings.Contains(b.String(), "IRQ during secondaries") || !strings.Contains(b.String(), "(p=") || strings.Contains(b.String(), "HVC64") {
		t.Errorf("comparison table:\n%s", b.String())
	}
}
