package tracepoint

import (
	"math/rand/v2"
	"testing"

	"github.com/mvm-dev/mvm/exits"
)

func entry(tid, cpu int, t uint64) Event {
	return Event{Kind: EventEntry, TID: tid, CPU: cpu, Time: t}
}

func exitEv(tid, cpu int, t, code, sub uint64) Event {
	return Event{Kind: EventExit, TID: tid, CPU: cpu, Time: t, Code: code, Sub: sub}
}

func reasonOf(t *testing.T, v exits.VCPUStats, name string) exits.ReasonStats {
	t.Helper()
	for _, r := range v.Reasons {
		if r.Reason == name {
			return r
		}
	}
	t.Fatalf("vCPU %d has no reason %q: %+v", v.VCPU, name, v.Reasons)
	return exits.ReasonStats{}
}

func TestTracePairingArm64(t *testing.T) {
	a := NewAggregator(exits.Arm64Namer{})
	a.SetVCPU(100, 0)
	const dabt, wfx, trap = 0x24, 0x01, exits.Arm64ExceptionTrap
	a.Add([]Event{
		entry(100, 1, 1000),
		exitEv(100, 1, 1500, trap, dabt), // guest 500
		entry(100, 1, 1700),              // handle 200
		exitEv(100, 1, 2700, trap, dabt), // guest 1000
		entry(100, 1, 2800),              // handle 100
		exitEv(100, 1, 5800, trap, wfx),  // guest 3000
		entry(100, 1, 9800),              // handle 4000
		exitEv(100, 1, 9900, exits.Arm64ExceptionIRQ, 0),
	})
	vs := a.Snapshot()
	if len(vs) != 1 || vs[0].VCPU != 0 || vs[0].Entries != 4 || vs[0].Exits() != 4 {
		t.Fatalf("snapshot %+v", vs)
	}
	d := reasonOf(t, vs[0], "DABT_LOW")
	if d.Count != 2 || d.GuestCount != 2 || d.GuestSumNS != 1500 || d.GuestMinNS != 500 || d.GuestMaxNS != 1000 ||
		d.HandleCount != 2 || d.HandleSumNS != 300 || d.HandleMinNS != 100 || d.HandleMaxNS != 200 {
		t.Errorf("DABT_LOW %+v", d)
	}
	w := reasonOf(t, vs[0], "WFx")
	if w.GuestSumNS != 3000 || w.HandleSumNS != 4000 {
		t.Errorf("WFx %+v", w)
	}
	// The last exit has no following entry: counted, guest-timed, not handle-timed.
	irq := reasonOf(t, vs[0], "IRQ")
	if irq.Count != 1 || irq.GuestSumNS != 100 || irq.HandleCount != 0 {
		t.Errorf("IRQ %+v", irq)
	}
	if vs[0].Reasons[0].Reason != "DABT_LOW" {
		t.Errorf("reasons not sorted by count: %+v", vs[0].Reasons)
	}

	// Rows: arm64 Time is guest time.
	rows := exits.TraceRows(exits.Arm64Namer{}, vs, nil)
	for _, r := range rows {
		if r.Reason == "DABT_LOW" && (r.TimeNS != 1500 || r.HandleNS != 300 || r.GuestNS != 1500 || r.TimeMeanNS != 750 || r.HandleMeanNS != 150) {
			t.Errorf("arm64 row %+v", r)
		}
	}
}

func TestTracePairingX86(t *testing.T) {
	a := NewAggregator(exits.X86Namer{})
	a.SetVCPU(7, 1)
	a.Add([]Event{
		entry(7, 0, 100),
		exitEv(7, 0, 400, 30, exits.X86ISAVMX), // guest 300
		entry(7, 0, 1400),                      // handle 1000
		exitEv(7, 0, 1500, 12, exits.X86ISAVMX),
		entry(7, 0, 1600),
	})
	vs := a.Snapshot()
	rows := exits.TraceRows(exits.X86Namer{}, vs, nil)
	var io exits.Row
	for _, r := range rows {
		if r.Reason == "IO_INSTRUCTION" && r.VCPU == "1" {
			io = r
		}
	}
	// x86 Time is the handling time, as perf kvm stat reports it.
	if io.Count != 1 || io.TimeNS != 1000 || io.HandleNS != 1000 || io.GuestNS != 300 {
		t.Errorf("x86 row %+v", io)
	}
}

// TestTraceOutOfOrderAcrossCPUs feeds two threads whose records, read CPU
// buffer by CPU buffer, arrive out of time order; the batch sort restores it.
func TestTraceOutOfOrderAcrossCPUs(t *testing.T) {
	var evs []Event
	for tid := 1; tid <= 2; tid++ {
		base := uint64(tid * 7)
		for i := uint64(0); i < 50; i++ {
			cpu := int(i % 2) // the thread migrates between CPUs
			evs = append(evs, entry(tid, cpu, base+i*100), exitEv(tid, cpu, base+i*100+60, 2, 0x24))
		}
	}
	// Buffer order: all of CPU 1 first, then CPU 0, and the threads shuffled.
	var shuffled []Event
	for _, cpu := range []int{1, 0} {
		for _, e := range evs {
			if e.CPU == cpu {
				shuffled = append(shuffled, e)
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })

	a := NewAggregator(exits.Arm64Namer{})
	a.SetVCPU(1, 0)
	a.SetVCPU(2, 1)
	a.Add(shuffled)
	for _, v := range a.Snapshot() {
		d := reasonOf(t, v, "DABT_LOW")
		if d.Count != 50 || d.GuestCount != 50 || d.GuestSumNS != 50*60 || d.GuestMinNS != 60 || d.GuestMaxNS != 60 {
			t.Errorf("vCPU %d guest %+v", v.VCPU, d)
		}
		if d.HandleCount != 49 || d.HandleSumNS != 49*40 {
			t.Errorf("vCPU %d handle %+v", v.VCPU, d)
		}
		if v.Reordered != 0 {
			t.Errorf("vCPU %d reordered %d", v.VCPU, v.Reordered)
		}
	}
}

// TestTraceLost: a PERF_RECORD_LOST breaks the pairing, so no interval spans
// it; the loss is reported.
func TestTraceLost(t *testing.T) {
	a := NewAggregator(exits.Arm64Namer{})
	a.SetVCPU(5, 0)
	a.Add([]Event{
		entry(5, 0, 100),
		exitEv(5, 0, 200, 2, 0x01), // guest 100
		{Kind: EventLost, TID: 5, Time: 250, Lost: 3},
		entry(5, 0, 900),           // no handle time: the exit's entry may have been lost
		exitEv(5, 0, 950, 2, 0x01), // guest 50
		{Kind: EventLost, TID: 5, Time: 960, Lost: 2},
		exitEv(5, 0, 990, 2, 0x01), // no entry since the loss: no guest time
		entry(5, 0, 1000),          // handle 10
	})
	v := a.Snapshot()[0]
	if v.Lost != 5 {
		t.Errorf("lost %d", v.Lost)
	}
	w := reasonOf(t, v, "WFx")
	if w.Count != 3 || w.GuestCount != 2 || w.GuestSumNS != 150 || w.HandleCount != 1 || w.HandleSumNS != 10 {
		t.Errorf("WFx %+v", w)
	}
	r := &exits.Report{}
	r.AddTrace(exits.Arm64Namer{}, a.Snapshot(), nil)
	if r.TraceLost != 5 {
		t.Errorf("report lost %d", r.TraceLost)
	}
}

// TestTraceBatchesAndStragglers: records spread over batches pair across
// them; a record older than one already processed is counted, not timed.
func TestTraceBatchesAndStragglers(t *testing.T) {
	a := NewAggregator(exits.X86Namer{})
	a.SetVCPU(9, 0)
	a.Add([]Event{entry(9, 0, 100), exitEv(9, 0, 200, 30, 1)})
	a.Add([]Event{entry(9, 0, 260)}) // handle 60 across batches
	a.Add([]Event{exitEv(9, 0, 150, 12, 1)})
	a.Add(nil)
	v := a.Snapshot()[0]
	if io := reasonOf(t, v, "IO_INSTRUCTION"); io.HandleSumNS != 60 || io.GuestSumNS != 100 {
		t.Errorf("IO %+v", io)
	}
	if h := reasonOf(t, v, "HLT"); h.Count != 1 || h.GuestCount != 0 || h.HandleCount != 0 {
		t.Errorf("straggler %+v", h)
	}
	if v.Reordered != 1 {
		t.Errorf("reordered %d", v.Reordered)
	}
	r := &exits.Report{}
	r.AddTrace(exits.X86Namer{}, a.Snapshot(), nil)
	if r.TraceReordered != 1 {
		t.Errorf("report reordered %d", r.TraceReordered)
	}
}

func TestTraceUnmappedAndTotals(t *testing.T) {
	a := NewAggregator(exits.X86Namer{})
	a.Add([]Event{entry(1, 0, 1), exitEv(1, 0, 2, 30, 1)}) // tid 1 unmapped
	a.SetVCPU(2, 0)
	a.SetVCPU(3, 1)
	a.Add([]Event{
		entry(2, 0, 10), exitEv(2, 0, 20, 30, 1), entry(2, 0, 25),
		entry(3, 1, 10), exitEv(3, 1, 40, 30, 1), entry(3, 1, 50),
		exitEv(3, 1, 60, 12, 1),
	})
	// Unmapped threads gather under vCPU -1.
	if vs := a.Snapshot(); len(vs) != 3 || vs[0].VCPU != -1 || vs[0].Exits() != 1 {
		t.Fatalf("before the late mapping: vCPUs %+v", vs)
	}
	// Late mapping (another VMM's thread, found after its first exits):
	// all of tid 1 moves to vCPU 2, including the exit before SetVCPU,
	// whose pending handle time the next entry closes 98 ns later.
	a.SetVCPU(1, 2)
	a.Add([]Event{entry(1, 0, 100), exitEv(1, 0, 150, 12, 1)})
	vs := a.Snapshot()
	if len(vs) != 3 || vs[0].VCPU != 0 || vs[2].VCPU != 2 || vs[2].Exits() != 2 || vs[2].Entries != 2 {
		t.Fatalf("vCPUs %+v", vs)
	}
	tot := exits.Total(vs)
	io := reasonOf(t, tot, "IO_INSTRUCTION")
	if io.Count != 3 || io.GuestCount != 3 || io.GuestSumNS != 1+10+30 || io.GuestMinNS != 1 || io.GuestMaxNS != 30 ||
		io.HandleCount != 3 || io.HandleSumNS != 5+10+98 || io.HandleMinNS != 5 || io.HandleMaxNS != 98 {
		t.Errorf("total IO %+v", io)
	}
	if tot.Count("HLT") != 2 || tot.Count("nope") != 0 || tot.Exits() != 5 || tot.Entries != 6 {
		t.Errorf("totals %+v", tot)
	}
	if a.Namer().Arch() != "amd64" {
		t.Error("namer")
	}
}
