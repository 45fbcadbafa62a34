package tracepoint

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mvm-dev/mvm/exits"
)

const trap = exits.Arm64ExceptionTrap

func detail(tid int, t uint64, k DetailKind, v uint64) Event {
	return Event{Kind: EventDetail, TID: tid, Time: t, Detail: k, Val: v}
}

func ent(tid int, t uint64) Event { return entry(tid, 0, t) }

func exitPC(tid int, t, ec, pc uint64) Event {
	return Event{Kind: EventExit, TID: tid, Time: t, Code: trap, Sub: ec, PC: pc}
}

func testLayout() exits.Layout {
	return exits.Layout{VCPUs: 2,
		Regions: []exits.Region{{Name: "gicd", Base: 0x800_0000, Size: 0x1_0000}, {Name: "uart", Base: 0x900_0000, Size: 0x1000}, {Name: "ram", Base: 0x4000_0000, Size: 1 << 30}},
		RAM:     []exits.Region{{Name: "ram", Base: 0x4000_0000, Size: 1 << 30}}}
}

func bd(t *testing.T, v exits.VCPUStats, reason string) map[string]exits.RowStats {
	t.Helper()
	m := map[string]exits.RowStats{}
	for _, r := range reasonOf(t, v, reason).Breakdown {
		m[r.Key] = r
	}
	return m
}

// TestBreakdownFromDetailEvents: each detail event names the exit before
// it; exits without one are "unknown"; the rows add up to the reason.
func TestBreakdownFromDetailEvents(t *testing.T) {
	a := NewAggregator(exits.Arm64Namer{})
	a.Configure(testLayout(), Options{})
	a.SetVCPU(1, 0)
	const kpc = 0xffff800080001000
	sgi := uint64(3)<<14 | 0<<11 | 12<<7 | 11<<3 | 5 | 1<<16 // ICC_SGI1R_EL1, write
	// MRS ID_AA64MMFR0_EL1 as an ESR: EC 0x18, Op0 3, CRm 7, read.
	esr := uint64(0x18)<<26 | 3<<20 | 7<<1 | 1
	a.Add([]Event{
		entry(1, 0, 100),
		exitPC(1, 200, 0x18, kpc), detail(1, 210, DetailSysReg, sgi), ent(1, 300),
		exitPC(1, 400, 0x18, kpc), detail(1, 410, DetailSysRegESR, esr), ent(1, 500),
		exitPC(1, 600, 0x18, kpc), ent(1, 700), // no detail: unknown
		exitPC(1, 800, 0x24, kpc), detail(1, 810, DetailFault, 0x800_0004), ent(1, 900),
		exitPC(1, 1000, 0x24, kpc), detail(1, 1010, DetailFault, 0x900_0000), ent(1, 1100),
		exitPC(1, 1200, 0x24, kpc), detail(1, 1210, DetailFault, 0x1234_0000), ent(1, 1300),
		exitPC(1, 1400, 0x16, kpc), detail(1, 1410, DetailHVC, 0x8400_0000), ent(1, 1500),
		exitPC(1, 1600, 0x16, kpc), detail(1, 1610, DetailHVC, 0xc600_0001), ent(1, 1700),
		exitPC(1, 1800, 0x01, kpc), detail(1, 1810, DetailWFx, 0), ent(1, 1900),
		exitPC(1, 2000, 0x01, kpc), detail(1, 2010, DetailWFx, 1), detail(1, 2020, DetailWFx, 0), ent(1, 2100),
		exitPC(1, 2200, 0x01, kpc), // pending at the end: counted by Flush
	})
	a.Flush()
	v := a.Snapshot()[0]
	sys := bd(t, v, "SYS64")
	if sys["ICC_SGI1R_EL1 write"].Count != 1 || sys["ID_AA64MMFR0_EL1 read"].Count != 1 || sys["unknown"].Count != 1 {
		t.Errorf("SYS64 %+v", sys)
	}
	if r := sys["ICC_SGI1R_EL1 write"]; r.GuestSumNS != 100 || r.HandleSumNS != 100 {
		t.Errorf("SGI row times %+v", r)
	}
	dabt := bd(t, v, "DABT_LOW")
	if dabt["gicd"].Count != 1 || dabt["uart"].Count != 1 || dabt["unmapped"].Count != 1 {
		t.Errorf("DABT_LOW %+v", dabt)
	}
	hvc := bd(t, v, "HVC64")
	if hvc["PSCI_VERSION"].Count != 1 || hvc["SMCCC 0xc6000001"].Count != 1 {
		t.Errorf("HVC64 %+v", hvc)
	}
	wfx := bd(t, v, "WFx")
	// The second detail of one exit does not count again.
	if wfx["WFI"].Count != 1 || wfx["WFE"].Count != 1 || wfx["unknown"].Count != 1 {
		t.Errorf("WFx %+v", wfx)
	}
	for _, r := range v.Reasons {
		var n uint64
		for _, b := range r.Breakdown {
			n += b.Count
		}
		if n != r.Count {
			t.Errorf("%s: rows add up to %d of %d", r.Reason, n, r.Count)
		}
	}
	d := a.Details()
	if got := d.Addresses["DABT_LOW"]["gicd"]; len(got) != 1 || got[0].Addr != "0x8000004" {
		t.Errorf("gicd addresses %+v", got)
	}
	if d.PCs["SYS64"][kpc] != 3 {
		t.Errorf("PCs %+v", d.PCs)
	}
	// Totals keep the rows.
	tot := exits.Total(a.Snapshot())
	if got := bd(t, tot, "DABT_LOW"); len(got) != 3 {
		t.Errorf("total DABT_LOW %+v", got)
	}
	rows := exits.TraceRows(exits.Arm64Namer{}, a.Snapshot(), d)
	for _, r := range rows {
		if r.VCPU == exits.TotalVCPU && r.Reason == "SYS64" && (r.Percentiles == nil || len(r.Breakdown) != 3 || r.Breakdown[0].Percentiles == nil) {
			t.Errorf("total SYS64 row %+v", r)
		}
	}
}

// TestBreakdownSMCFromVMM: KVM fires no tracepoint for an SMC, so the
// SMC64 breakdown names a function only where the VMM says which one it
// handled (NoteSMC). Its notes come before the records they describe are
// read (the ring reader is late) or after; SMCs KVM answered itself stay
// "unknown", a note between a non-SMC exit and its entry is ignored, and a
// stale note does not key a later exit.
func TestBreakdownSMCFromVMM(t *testing.T) {
	a := NewAggregator(exits.Arm64Namer{})
	a.Configure(testLayout(), Options{})
	a.SetVCPU(1, 0)
	const kpc = 0xffff800080001000
	a.NoteSMC(1, 50, 0x8400_0002)  // stale: before the exit below
	a.NoteSMC(1, 410, 0x8400_0000) // PSCI_VERSION, forwarded
	a.NoteSMC(1, 610, 0xc400_0003) // CPU_ON
	a.NoteSMC(1, 810, 0x8400_0000) // not an SMC exit: ignored
	a.Add([]Event{
		entry(1, 0, 100),
		exitPC(1, 200, 0x17, kpc), ent(1, 300), // answered by KVM: unknown
		exitPC(1, 400, 0x17, kpc), ent(1, 500),
		exitPC(1, 600, 0x17, kpc), ent(1, 700),
		exitPC(1, 800, 0x18, kpc), ent(1, 900),
		exitPC(1, 1000, 0x17, kpc),
	})
	a.NoteSMC(1, 1010, 0x8400_0000) // the reader was on time
	a.Add([]Event{ent(1, 1100)})
	a.Flush()
	v := a.Snapshot()[0]
	smc := bd(t, v, "SMC64")
	if len(smc) != 3 || smc["PSCI_VERSION"].Count != 2 || smc["CPU_ON"].Count != 1 || smc["unknown"].Count != 1 {
		t.Errorf("SMC64 %+v", smc)
	}
	if r := smc["PSCI_VERSION"]; r.GuestSumNS != 200 || r.HandleSumNS != 200 {
		t.Errorf("PSCI_VERSION row times %+v", r)
	}
	if sys := bd(t, v, "SYS64"); len(sys) != 1 || sys["unknown"].Count != 1 {
		t.Errorf("SYS64 %+v", sys)
	}
	if v.Reordered != 0 {
		t.Errorf("%d records out of order", v.Reordered)
	}
}

// TestPercentilesAgainstSortedSamples: a synthetic trace of one reason
// with random guest and handle times; the report's percentiles against the
// sorted samples, within the histogram's 1/32.
func TestPercentilesAgainstSortedSamples(t *testing.T) {
	a := NewAggregator(exits.Arm64Namer{})
	a.SetVCPU(1, 0)
	rng := rand.New(rand.NewPCG(7, 8))
	var guest, handle []uint64
	now := uint64(1000)
	var evs []Event
	evs = append(evs, entry(1, 0, now))
	for i := 0; i < 20000; i++ {
		g := 1000 + uint64(rng.ExpFloat64()*40000)
		h := 500 + uint64(rng.ExpFloat64()*8000)
		if rng.IntN(50) == 0 {
			h += 2_000_000 // a slow tail
		}
		now += g
		evs = append(evs, exitPC(1, now, 0x01, 0xffff800080000000), detail(1, now+1, DetailWFx, 0))
		now += h
		evs = append(evs, entry(1, 0, now))
		guest, handle = append(guest, g), append(handle, h)
	}
	a.Add(evs)
	a.Flush()
	d := a.Details()
	slices.Sort(guest)
	slices.Sort(handle)
	oracle := func(s []uint64, q float64) uint64 {
		i := int(q*float64(len(s))+0.999999) - 1
		return s[max(i, 0)]
	}
	for _, l := range []*exits.Latency{d.Latency["WFx"], d.RowLatency["WFx"]["WFI"]} {
		for _, c := range []struct {
			name    string
			got     exits.Percentiles
			samples []uint64
		}{{"guest", l.Guest, guest}, {"handle", l.Handle, handle}} {
			for _, q := range []struct {
				q   float64
				got uint64
			}{{0.5, c.got.P50}, {0.9, c.got.P90}, {0.99, c.got.P99}, {1, c.got.Max}} {
				want := oracle(c.samples, q.q)
				if diff := float64(q.got) - float64(want); diff > float64(want)/32 || -diff > float64(want)/32 {
					t.Errorf("%s p%g = %d, sorted samples say %d", c.name, q.q*100, q.got, want)
				}
			}
		}
	}
}

// TestPhasesAndUserspace: the phases switch at the first CPU_ON, at the
// last secondary's first entry and at userspace, found from the first exit
// from a user PC after kernel ones (not at the MMU-off PCs in RAM), or from
// the marker, which wins.
func TestPhasesAndUserspace(t *testing.T) {
	for _, marker := range []bool{false, true} {
		a := NewAggregator(exits.Arm64Namer{})
		a.Configure(testLayout(), Options{})
		a.SetVCPU(1, 0)
		a.SetVCPU(2, 1)
		const kpc, upc = 0xffff800080001000, 0x0000aaaa00001000
		a.Add([]Event{
			entry(1, 0, 100),
			exitPC(1, 200, 0x18, 0x4020_0000), ent(1, 210), // MMU off, in RAM: not user
			exitPC(1, 300, 0x16, kpc), detail(1, 301, DetailHVC, 0xc400_0003), ent(1, 310), // CPU_ON
			exitPC(1, 400, 0x01, kpc), ent(1, 410),
			entry(2, 1, 500), // the secondary's first entry
			exitPC(2, 600, 0x01, 0x4000_1000), ent(2, 610),
			exitPC(1, 700, 0x01, kpc), ent(1, 710),
		})
		if marker {
			a.MarkUserspace(750)
		}
		a.Add([]Event{
			exitPC(1, 800, 0x24, upc), ent(1, 810),
			exitPC(1, 900, 0x24, kpc), ent(1, 910),
		})
		a.Flush()
		d := a.Details()
		got := map[string]uint64{}
		for _, ph := range d.Phases {
			for _, r := range ph.Rows {
				got[ph.Phase+"/"+r.Reason] += r.Samples
			}
		}
		want := map[string]uint64{"boot_to_smp/SYS64": 1, "secondaries/HVC64": 1, "secondaries/WFx": 1,
			"kernel_to_user/WFx": 2, "after_userspace/DABT_LOW": 2}
		if !equalMaps(got, want) {
			t.Errorf("marker %v: phases %v, want %v", marker, got, want)
		}
		u := d.Userspace
		wantSrc, wantAt := "first_user_exit", int64(700)
		if marker {
			wantSrc, wantAt = "marker", 650
		}
		if u == nil || u.Source != wantSrc || u.AtNS != wantAt || u.FirstUserExitNS != 700 {
			t.Errorf("marker %v: userspace %+v", marker, u)
		}
		if d.Phases[1].StartNS != 200 || d.Phases[1].EndNS != 400 {
			t.Errorf("secondaries %d..%d, want 200..400", d.Phases[1].StartNS, d.Phases[1].EndNS)
		}
	}
}

// TestLagHoldsYoungEvents: with a clock, events younger than Lag wait, so a
// mark set meanwhile applies to them.
func TestLagHoldsYoungEvents(t *testing.T) {
	now := uint64(1000)
	a := NewAggregator(exits.Arm64Namer{})
	l := testLayout()
	l.VCPUs = 1
	a.Configure(l, Options{Now: func() uint64 { return now }, Lag: 500})
	a.SetVCPU(1, 0)
	a.Add([]Event{entry(1, 0, 100), exitPC(1, 900, 0x01, 0xffff800080000000), entry(1, 0, 950)})
	if n := a.Snapshot(); len(n) == 0 || n[0].Exits() != 0 {
		t.Fatalf("an event younger than the lag was processed: %+v", n)
	}
	a.MarkUserspace(800)
	now = 2000
	a.Add(nil)
	a.Flush()
	if d := a.Details(); len(d.Phases) != 1 || d.Phases[0].Phase != "after_userspace" {
		t.Errorf("phases %+v", d.Phases)
	}
}

// TestBoundedKeys: a guest touching ever new addresses and registers grows
// no row, address or PC set past its bound.
func TestBoundedKeys(t *testing.T) {
	a := NewAggregator(exits.Arm64Namer{})
	a.Configure(testLayout(), Options{})
	a.SetVCPU(1, 0)
	var evs []Event
	tm := uint64(1)
	for i := uint64(0); i < 20000; i++ {
		evs = append(evs, exitPC(1, tm, 0x18, 0xffff800080000000+4*i), detail(1, tm+1, DetailSysReg, i&0xffff), ent(1, tm+2))
		evs = append(evs, exitPC(1, tm+3, 0x24, 0xffff800080000000), detail(1, tm+4, DetailFault, 0x4000_0000+i*8), ent(1, tm+5))
		tm += 6
	}
	a.Add(evs)
	a.Flush()
	v := a.Snapshot()[0]
	sys := reasonOf(t, v, "SYS64")
	if len(sys.Breakdown) > exits.MaxKeysPerReason+1 || sys.Breakdown[0].Key != "other" {
		t.Errorf("%d SYS64 rows, first %q", len(sys.Breakdown), sys.Breakdown[0].Key)
	}
	d := a.Details()
	if n := len(d.PCs["SYS64"]); n > exits.MaxPCsPerReason || d.PCsOther["SYS64"] != 20000-exits.MaxPCsPerReason {
		t.Errorf("%d PCs, %d other", n, d.PCsOther["SYS64"])
	}
	if ram := d.Addresses["DABT_LOW"]["ram"]; len(ram) != exits.TopAddrs+1 || ram[exits.TopAddrs].Samples != 20000-exits.TopAddrs {
		t.Errorf("ram addresses %+v", ram)
	}
	if len(a.details["DABT_LOW"].addrs[exits.ClassDev<<56|2]) > exits.MaxAddrsPerRow {
		t.Error("address map grew past its bound")
	}
}

func equalMaps(a, b map[string]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
