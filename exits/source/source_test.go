package source

import (
	"errors"
	"testing"

	"github.com/mvm-dev/mvm/exits"
	"github.com/mvm-dev/mvm/exits/kvmstat"
)

// TestPlan walks the tracepoint paths through both outcomes of BPF: what
// is tried, which readers are read, and what the Sources list is told.
func TestPlan(t *testing.T) {
	refused := errors.New("needs CAP_BPF and CAP_PERFMON (or root)")
	notAsked := errors.New("not requested")
	for _, c := range []struct {
		name     string
		plan     Plan
		bpfErr   error // the outcome of OpenBPF when tried
		try      bool
		bpf, prf bool
		err      error // Choice.Err
		whyNot   bool  // Choice.BPFErr set
	}{
		{"auto, BPF works", Plan{Via: ViaAuto}, nil, true, true, false, nil, false},
		{"empty is auto", Plan{}, nil, true, true, false, nil, false},
		{"auto, BPF refused", Plan{Via: ViaAuto}, refused, true, false, true, nil, true},
		{"auto with guest code", Plan{Via: ViaAuto, NeedPCs: true}, nil, false, false, true, nil, true},
		{"bpf, works", Plan{Via: ViaBPF}, nil, true, true, false, nil, false},
		{"bpf, refused", Plan{Via: ViaBPF}, refused, true, false, false, refused, true},
		{"bpf with guest code", Plan{Via: ViaBPF, NeedPCs: true}, nil, true, true, false, nil, false},
		{"perf", Plan{Via: ViaPerf}, nil, false, false, true, nil, false},
		{"both, BPF works", Plan{Via: ViaBoth}, nil, true, true, true, nil, false},
		{"both, BPF refused", Plan{Via: ViaBoth}, refused, true, false, true, nil, true},
		{"not asked", Plan{Via: ViaAuto, NotAsked: notAsked}, nil, false, false, false, notAsked, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			try, why := c.plan.TryBPF()
			if try != c.try {
				t.Fatalf("TryBPF %v, want %v", try, c.try)
			}
			outcome := why
			if try {
				outcome = c.bpfErr
			}
			got := c.plan.Decide(outcome)
			if got.BPF != c.bpf || got.Perf != c.prf || !errors.Is(got.Err, c.err) || (got.BPFErr != nil) != c.whyNot {
				t.Errorf("Decide = %+v, want BPF %v perf %v err %v, a reason BPF is not used %v", got, c.bpf, c.prf, c.err, c.whyNot)
			}
			if c.plan.MayReadPerf() != (c.plan.NotAsked == nil && c.plan.Via != ViaBPF) {
				t.Errorf("MayReadPerf %v", c.plan.MayReadPerf())
			}
			if got.Perf && !c.plan.MayReadPerf() {
				t.Errorf("chose the perf rings that MayReadPerf ruled out")
			}
		})
	}
}

// TestAddStats: per-file deltas under their labels, a total over the
// vCPUs' alone (not the VM's), and a delta that cannot be taken marks the
// source failed.
func TestAddStats(t *testing.T) {
	desc := kvmstat.StatDesc{Name: "exits", Size: 1, Flags: kvmstat.Flags(kvmstat.StatCumulative, kvmstat.UnitNone, kvmstat.BasePow10)}
	snap := func(n uint64) *kvmstat.StatsSnapshot {
		s, err := kvmstat.SnapshotOf([]kvmstat.StatDesc{desc}, [][]uint64{{n}})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	rep := &exits.Report{}
	err := AddStats(rep, []Stats{{exits.VMVCPU, snap(100), snap(107)}, {"0", snap(10), snap(14)}, {"1", snap(0), snap(5)}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, r := range rep.KVMStats {
		if r.Name == "exits" {
			got[r.VCPU] = r.Delta
		}
	}
	want := map[string]uint64{exits.VMVCPU: 7, "0": 4, "1": 5, exits.TotalVCPU: 9}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("exits of %s: %d, want %d (all: %v)", k, got[k], v, got)
		}
	}
	bad := &exits.Report{}
	other := kvmstat.StatDesc{Name: "halt_exits", Size: 1, Flags: desc.Flags}
	two, err := kvmstat.SnapshotOf([]kvmstat.StatDesc{desc, other}, [][]uint64{{1}, {2}})
	if err != nil {
		t.Fatal(err)
	}
	if err := AddStats(bad, []Stats{{"0", snap(1), two}}); err == nil {
		t.Fatal("a delta between two layouts was taken")
	}
	for _, s := range bad.Sources {
		if s.Name == exits.SourceKVMStats && (s.Used || s.Reason == "") {
			t.Errorf("kvm_stats source after a failed delta: %+v", s)
		}
	}
}
