// Package exitstest builds exit reports from every source for tests of the
// packages that read, render or export them.
package exitstest

import (
	"time"

	"github.com/mvm-dev/mvm/exits"
	"github.com/mvm-dev/mvm/exits/kvmstat"
	"github.com/mvm-dev/mvm/exits/tracepoint"
	"github.com/mvm-dev/mvm/exits/userspace"
)

// Entry and Exit are tracepoint events of thread tid on cpu at time t.
func Entry(tid, cpu int, t uint64) tracepoint.Event {
	return tracepoint.Event{Kind: tracepoint.EventEntry, TID: tid, CPU: cpu, Time: t}
}

// Exit is a kvm_exit event with the namer's code and sub fields.
func Exit(tid, cpu int, t, code, sub uint64) tracepoint.Event {
	return tracepoint.Event{Kind: tracepoint.EventExit, TID: tid, CPU: cpu, Time: t, Code: code, Sub: sub}
}

// Report is a small two-vCPU arm64 report from every source: userspace
// MMIO/uart 4 (3 on vCPU 0), HYPERCALL/CPU_ON and SYSTEM_OFF, INTR;
// tracepoint DABT_LOW 2 (guest 3000 ns, handle 1000 ns), HVC64 1, IRQ 1;
// KVM stats of both vCPUs and their total.
func Report() *exits.Report {
	s := userspace.NewSchema()
	uart, _ := s.Register(userspace.KindMMIO, "uart")
	cpuOn, _ := s.Register(userspace.KindHypercall, "CPU_ON")
	off, _ := s.Register(userspace.KindHypercall, "SYSTEM_OFF")
	r0, r1 := s.NewRecorder(0), s.NewRecorder(1)
	for i := 0; i < 3; i++ {
		r0.Record(uart, 2*time.Microsecond)
	}
	r0.Record(cpuOn, 10*time.Microsecond)
	r0.Record(off, 4*time.Microsecond)
	r1.Record(uart, 6*time.Microsecond)
	r1.Record(userspace.KindKey(userspace.KindIntr), 1*time.Microsecond)

	a := tracepoint.NewAggregator(exits.Arm64Namer{})
	a.SetVCPU(100, 0)
	a.SetVCPU(101, 1)
	a.Add([]tracepoint.Event{
		Entry(100, 0, 1000), Exit(100, 0, 3000, 2, 0x24), Entry(100, 0, 3500),
		Exit(100, 0, 4500, 2, 0x24), Entry(100, 0, 5000),
		Exit(100, 0, 9000, 2, 0x16), Entry(100, 0, 9100),
		Entry(101, 1, 2000), Exit(101, 1, 8000, 0, 0), Entry(101, 1, 8200),
	})

	ds := func(n, waitNS uint64) []kvmstat.StatDelta {
		exitsDesc := kvmstat.StatDesc{Name: "exits", Size: 1,
			Flags: kvmstat.Flags(kvmstat.StatCumulative, kvmstat.UnitNone, kvmstat.BasePow10)}
		wait := kvmstat.StatDesc{Name: "halt_wait_ns", Size: 1, Exponent: -9,
			Flags: kvmstat.Flags(kvmstat.StatCumulative, kvmstat.UnitSeconds, kvmstat.BasePow10)}
		hist := kvmstat.StatDesc{Name: "halt_wait_hist", Size: 2, Exponent: -9,
			Flags: kvmstat.Flags(kvmstat.StatLogHist, kvmstat.UnitSeconds, kvmstat.BasePow10)}
		return []kvmstat.StatDelta{
			{Desc: exitsDesc, Values: []uint64{n}, After: []uint64{n + 10}},
			{Desc: wait, Values: []uint64{waitNS}, After: []uint64{waitNS}},
			{Desc: hist, Values: []uint64{0, 1}, After: []uint64{0, 1}},
		}
	}
	stats := append(kvmstat.Rows("0", ds(4, 2500)), kvmstat.Rows("1", ds(1, 0))...)
	stats = append(stats, kvmstat.TotalRows(stats)...)

	rep := &exits.Report{DurationNS: 12_000}
	userspace.AddTo(rep, []userspace.RecorderSnapshot{r0.Snapshot(), r1.Snapshot()})
	kvmstat.AddTo(rep, stats)
	rep.AddTrace(exits.Arm64Namer{}, a.Snapshot(), nil)
	return rep
}
