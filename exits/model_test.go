package exits

import "testing"

// Merge keeps min and max over both sides and takes a side's min only when
// it has times of that kind (a zero min of an empty side is no minimum).
func TestReasonStatsMerge(t *testing.T) {
	var s ReasonStats
	s.AddGuest(300)
	s.AddHandle(40)
	s.Merge(&ReasonStats{Count: 2, GuestCount: 2, GuestSumNS: 150, GuestMinNS: 50, GuestMaxNS: 100})
	s.Merge(&ReasonStats{Count: 1}) // no times at all
	s.Merge(&ReasonStats{Count: 1, HandleCount: 1, HandleSumNS: 90, HandleMinNS: 90, HandleMaxNS: 90})
	if s.Count != 4 || s.GuestCount != 3 || s.GuestSumNS != 450 || s.GuestMinNS != 50 || s.GuestMaxNS != 300 {
		t.Errorf("guest times %+v", s)
	}
	if s.HandleCount != 2 || s.HandleSumNS != 130 || s.HandleMinNS != 40 || s.HandleMaxNS != 90 {
		t.Errorf("handle times %+v", s)
	}
	var e ReasonStats
	e.Merge(&ReasonStats{Count: 1, GuestCount: 1, GuestSumNS: 70, GuestMinNS: 70, GuestMaxNS: 70})
	if e.GuestMinNS != 70 {
		t.Errorf("merged into empty: guest min %d, want 70", e.GuestMinNS)
	}
}

// TestBreakdownClasses: the broken-down exception classes are the ones
// the profile documents (docs/profile.md: SYS64 by register, IABT_LOW and
// DABT_LOW by device, HVC64 and SMC64 by function, WFx by instruction),
// by name, so a wrong EC number in the shared list shows here; nothing
// else is broken down, and no other architecture is.
func TestBreakdownClasses(t *testing.T) {
	want := map[string]uint64{"SYS64": ClassSys, "IABT_LOW": ClassDev, "DABT_LOW": ClassDev,
		"HVC64": ClassFunc, "SMC64": ClassFunc, "WFx": ClassWFx}
	n := Arm64Namer{}
	got := map[string]uint64{}
	for ec := uint64(0); ec < 64; ec++ {
		if c := BreakdownClass(n, Arm64ExceptionTrap, ec); c != 0 {
			got[n.ExitName(Arm64ExceptionTrap, ec)] = c
		}
		if c := BreakdownClass(n, Arm64ExceptionIRQ, ec); c != 0 {
			t.Errorf("an IRQ exit with EC 0x%x has breakdown class %d", ec, c)
		}
		if c := BreakdownClass(X86Namer{}, Arm64ExceptionTrap, ec); c != 0 {
			t.Errorf("x86 exit %d/%d has breakdown class %d", Arm64ExceptionTrap, ec, c)
		}
	}
	if len(got) != len(want) {
		t.Errorf("broken-down reasons %v, want %v", got, want)
	}
	for name, c := range want {
		if got[name] != c {
			t.Errorf("%s: class %d, want %d", name, got[name], c)
		}
	}
}

// TestPhaseOf: an exit belongs to the latest phase whose start is known
// and not after it; before every start, boot_to_smp, or kernel_to_user on
// one vCPU (no secondaries to bring up).
func TestPhaseOf(t *testing.T) {
	all := PhaseBounds{First: 10, CPUOn: 100, AllIn: 200, User: 300, VCPUs: 2}
	for _, c := range []struct {
		b    PhaseBounds
		at   uint64
		want string
	}{
		{all, 50, "boot_to_smp"},
		{all, 100, "secondaries"},
		{all, 199, "secondaries"},
		{all, 200, "kernel_to_user"},
		{all, 300, "after_userspace"},
		{PhaseBounds{CPUOn: 100, VCPUs: 2}, 5000, "secondaries"},
		{PhaseBounds{User: 300, VCPUs: 1}, 50, "kernel_to_user"},
		{PhaseBounds{User: 300, VCPUs: 1}, 350, "after_userspace"},
		{PhaseBounds{AllIn: 200, VCPUs: 4}, 150, "boot_to_smp"},
	} {
		if got := PhaseName(c.b.PhaseOf(c.at)); got != c.want {
			t.Errorf("%+v at %d: %s, want %s", c.b, c.at, got, c.want)
		}
	}
}

// TestGroupByVCPU: threads of one vCPU merge (counts, min/max, rows by
// name, also within one thread), an unmapped thread goes to vCPU -1, and
// the order is vCPUs ascending, reasons and rows largest first.
func TestGroupByVCPU(t *testing.T) {
	threads := []ThreadStats{
		{TID: 7, Totals: VCPUStats{Entries: 3}, Reasons: []ReasonStats{
			{Reason: "SYS64", Count: 2, GuestCount: 2, GuestSumNS: 30, GuestMinNS: 10, GuestMaxNS: 20,
				Breakdown: []RowStats{{Key: "CTR_EL0 read", Count: 1}, {Key: "CTR_EL0 read", Count: 1}}},
			{Reason: "WFx", Count: 1}}},
		{TID: 8, Totals: VCPUStats{Entries: 1, Lost: 2}, Reasons: []ReasonStats{
			{Reason: "SYS64", Count: 3, GuestCount: 1, GuestSumNS: 5, GuestMinNS: 5, GuestMaxNS: 5,
				Breakdown: []RowStats{{Key: "MIDR_EL1 read", Count: 3}}}}},
		{TID: 9, Reasons: []ReasonStats{{Reason: "IRQ", Count: 1}}},
	}
	vcpu := map[int]int{7: 1, 8: 1}
	vs := GroupByVCPU(threads, func(tid int) (int, bool) { v, ok := vcpu[tid]; return v, ok })
	if len(vs) != 2 || vs[0].VCPU != -1 || vs[1].VCPU != 1 {
		t.Fatalf("vCPUs %+v", vs)
	}
	v := vs[1]
	if v.Entries != 4 || v.Lost != 2 || v.Exits() != 6 || v.Reasons[0].Reason != "SYS64" {
		t.Fatalf("vCPU 1 %+v", v)
	}
	s := v.Reasons[0]
	if s.Count != 5 || s.GuestCount != 3 || s.GuestMinNS != 5 || s.GuestMaxNS != 20 {
		t.Errorf("SYS64 %+v", s)
	}
	if len(s.Breakdown) != 2 || s.Breakdown[0] != (RowStats{Key: "MIDR_EL1 read", Count: 3}) || s.Breakdown[1] != (RowStats{Key: "CTR_EL0 read", Count: 2}) {
		t.Errorf("SYS64 rows %+v", s.Breakdown)
	}
	if tot := Total(vs); tot.Exits() != 7 || tot.Entries != 4 || tot.Count("IRQ") != 1 {
		t.Errorf("total %+v", tot)
	}
}

// TestKeyNames: a key from kvm_sys_access's encoding and one from the
// ESR's ISS (Arm ARM D24.2.43, ESR_ELx with EC 0x18: Op0 21:20, Op2 19:17,
// Op1 16:14, CRn 13:10, Rt 9:5, CRm 4:1, Direction 0, 1 = read) name the
// same register; device, function and WFx keys name what they hold.
func TestKeyNames(t *testing.T) {
	l := Layout{Regions: []Region{{Name: "uart", Base: 0x900_0000, Size: 0x1000}}}
	// CTR_EL0 is Op0 3, Op1 3, CRn 0, CRm 0, Op2 1.
	iss := uint64(3<<20 | 1<<17 | 3<<14 | 0<<10 | 7<<5 | 0<<1 | 1)
	enc := uint64(3<<14 | 3<<11 | 0<<7 | 0<<3 | 1)
	if a, b := SysRegKeyFromESR(iss), SysRegKey(enc); a != b || l.KeyName(a) != "CTR_EL0 read" {
		t.Errorf("ESR key %#x (%s), kvm_sys_access key %#x (%s)", a, l.KeyName(a), b, l.KeyName(b))
	}
	if n := l.KeyName(SysRegKeyFromESR(iss &^ 1)); n != "CTR_EL0 write" {
		t.Errorf("a write is named %q", n)
	}
	for key, want := range map[uint64]string{
		DevKey(l.Region(0x900_0010)): "uart",
		DevKey(l.Region(0x800_0000)): "unmapped",
		FuncKey(0x8400_0000):         "PSCI_VERSION",
		FuncKey(0xc400_0003):         "CPU_ON",
		FuncKey(0x8000_0000):         "SMCCC_VERSION",
		FuncKey(0x1234_5678):         "SMCCC 0x12345678",
		WFxKey(1):                    "WFE",
		WFxKey(0):                    "WFI",
		KeyOther:                     "other",
		KeyUnknown:                   "unknown",
	} {
		if got := l.KeyName(key); got != want {
			t.Errorf("key %#x: %q, want %q", key, got, want)
		}
	}
	if got := (Layout{}).KeyName(DevKey(0)); got != "no memory map" {
		t.Errorf("a device key without regions: %q", got)
	}
}

// TestTopAddresses: the TopAddrs busiest addresses, ties to the lower
// address, then the rest with the exits past the bound as "other".
func TestTopAddresses(t *testing.T) {
	m := map[uint64]uint64{}
	for i := uint64(0); i < 10; i++ {
		m[0x1000+i*8] = 10 - i/2 // 10,10,9,9,...,6,6
	}
	ac := TopAddresses(m, 5)
	if len(ac) != TopAddrs+1 {
		t.Fatalf("%d entries: %+v", len(ac), ac)
	}
	if ac[0] != (AddressCount{Addr: "0x1000", Samples: 10}) || ac[1] != (AddressCount{Addr: "0x1008", Samples: 10}) {
		t.Errorf("first %+v", ac[:2])
	}
	// The two 6s left out, plus 5 past the bound.
	if last := ac[TopAddrs]; last != (AddressCount{Addr: "other", Samples: 17}) {
		t.Errorf("other %+v", last)
	}
}
