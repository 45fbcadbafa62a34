package psci

import (
	"errors"
	"math"
	"slices"
	"testing"
)

// kvmMPIDR is the MPIDR_EL1 KVM gives vCPU i by default (Aff0 = i & 0xf,
// Aff1 = (i >> 4) & 0xff, Aff2 = (i >> 12) & 0xff), read back raw with its
// RES1 bit 31 set.
func kvmMPIDR(i int) uint64 {
	return 1<<31 | uint64(i&0xf) | uint64((i>>4)&0xff)<<8 | uint64((i>>12)&0xff)<<16
}

func aff(i int) uint64 { return kvmMPIDR(i) & AffinityMask }

// Guest RAM for the tests' ValidEntry: [1 GiB, 2 GiB).
const (
	ramBase = 0x4000_0000
	ramEnd  = 0x8000_0000
	entryOK = ramBase + 0x8_0000
	entryNo = 0x1000
)

func inRAM(addr uint64) bool { return addr >= ramBase && addr < ramEnd }

func newMachine(t testing.TB, n int, mod func(*Config)) *Machine {
	t.Helper()
	cfg := Config{MPIDRs: make([]uint64, n)}
	for i := range cfg.MPIDRs {
		cfg.MPIDRs[i] = kvmMPIDR(i)
	}
	if mod != nil {
		mod(&cfg)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

// call is Handle for a call that must not be VMM misuse.
func call(t testing.TB, m *Machine, caller int, fid uint32, x1, x2, x3 uint64) Result {
	t.Helper()
	r, err := m.Handle(caller, fid, x1, x2, x3)
	if err != nil {
		t.Fatalf("Handle(%d, %s %#x): %v", caller, Name(fid), fid, err)
	}
	return r
}

func wantStatus(t testing.TB, what string, r Result, s Status) {
	t.Helper()
	if r.X0 != s.X0() {
		t.Errorf("%s: X0 = %v (%#x), want %v", what, Status(int32(r.X0)), r.X0, s)
	}
}

func wantStates(t testing.TB, m *Machine, want ...State) {
	t.Helper()
	if got := m.Snapshot().States; !slices.Equal(got, want) {
		t.Errorf("states = %v, want %v", got, want)
	}
}

func mustStarted(t testing.TB, m *Machine, k int) {
	t.Helper()
	if err := m.Started(k); err != nil {
		t.Fatalf("Started(%d): %v", k, err)
	}
}

func TestNew(t *testing.T) {
	bad := []struct {
		name string
		cfg  Config
		is   error
	}{
		{"no vCPUs", Config{}, nil},
		{"duplicate affinity", Config{MPIDRs: []uint64{0x1, 0x1}}, nil},
		{"duplicate after masking RES1", Config{MPIDRs: []uint64{0x80000001, 0x1}}, nil},
		{"duplicate after masking high bits", Config{MPIDRs: []uint64{0x1, 0xFF<<40 | 1<<24 | 0x1}}, nil},
		{"boot vCPU too big", Config{MPIDRs: []uint64{0, 1}, BootCPUs: []int{2}}, ErrNoSuchCPU},
		{"boot vCPU negative", Config{MPIDRs: []uint64{0, 1}, BootCPUs: []int{-1}}, ErrNoSuchCPU},
		{"external feature in PSCI range", Config{MPIDRs: []uint64{0}, ExternalFeatures: []uint32{FnCPUOn}}, nil},
		{"external feature in PSCI64 range", Config{MPIDRs: []uint64{0}, ExternalFeatures: []uint32{0xC400001F}}, nil},
	}
	for _, c := range bad {
		m, err := New(c.cfg)
		if err == nil || m != nil {
			t.Errorf("%s: New = %v, %v; want an error", c.name, m, err)
			continue
		}
		if c.is != nil && !errors.Is(err, c.is) {
			t.Errorf("%s: error %v is not %v", c.name, err, c.is)
		}
	}

	// Defaults: vCPU 0 alone is ON; MPIDRs are stored masked.
	m := newMachine(t, 3, nil)
	wantStates(t, m, StateOn, StateOff, StateOff)
	if m.NumCPUs() != 3 {
		t.Errorf("NumCPUs = %d", m.NumCPUs())
	}
	for k := range 3 {
		got, err := m.MPIDR(k)
		if err != nil || got != uint64(k) {
			t.Errorf("MPIDR(%d) = %#x, %v; want %#x", k, got, err, k)
		}
	}
	for _, k := range []int{-1, 3} {
		if _, err := m.MPIDR(k); !errors.Is(err, ErrNoSuchCPU) {
			t.Errorf("MPIDR(%d) error = %v", k, err)
		}
		if _, err := m.State(k); !errors.Is(err, ErrNoSuchCPU) {
			t.Errorf("State(%d) error = %v", k, err)
		}
	}

	// Several boot CPUs, listed twice: harmless.
	m = newMachine(t, 4, func(c *Config) { c.BootCPUs = []int{3, 1, 3} })
	wantStates(t, m, StateOff, StateOn, StateOff, StateOn)
}

// Calls that need no other vCPU: each from vCPU 0 of a fresh 2-vCPU machine,
// which must leave the power states alone.
func TestStatelessCalls(t *testing.T) {
	cases := []struct {
		name       string
		fid        uint32
		x1, x2, x3 uint64
		want       uint64
	}{
		{"version", FnPSCIVersion, 0, 0, 0, 0x10001},
		{"version ignores args", FnPSCIVersion, ^uint64(0), ^uint64(0), ^uint64(0), 0x10001},
		{"migrate info type", FnMigrateInfoType, 0, 0, 0, 2},
		{"migrate", FnMigrate, aff(1), 0, 0, NotSupported.X0()},
		{"migrate64", FnMigrate64, aff(1), 0, 0, NotSupported.X0()},
		{"migrate info up cpu", FnMigrateInfoUpCPU, 0, 0, 0, NotSupported.X0()},
		{"migrate info up cpu64", FnMigrateInfoUpCPU64, 0, 0, 0, NotSupported.X0()},
		{"system suspend", FnSystemSuspend, entryOK, 0, 0, NotSupported.X0()},
		{"system suspend64", FnSystemSuspend64, entryOK, 0, 0, NotSupported.X0()},
		{"system off2 hibernate", FnSystemOff2, 1, 0, 0, NotSupported.X0()},
		{"system off2_64 hibernate", FnSystemOff2_64, 1, 0, 0, NotSupported.X0()},
		{"cpu freeze", FnCPUFreeze, 0, 0, 0, NotSupported.X0()},
		{"cpu default suspend", FnCPUDefaultSuspend, entryOK, 0, 0, NotSupported.X0()},
		{"cpu default suspend64", FnCPUDefaultSuspend64, entryOK, 0, 0, NotSupported.X0()},
		{"node hw state", FnNodeHWState, 0, 0, 0, NotSupported.X0()},
		{"node hw state64", FnNodeHWState64, 0, 0, 0, NotSupported.X0()},
		{"set suspend mode", FnSetSuspendMode, 1, 0, 0, NotSupported.X0()},
		{"stat residency", FnStatResidency, 0, 0, 0, NotSupported.X0()},
		{"stat residency64", FnStatResidency64, 0, 0, 0, NotSupported.X0()},
		{"stat count", FnStatCount, 0, 0, 0, NotSupported.X0()},
		{"stat count64", FnStatCount64, 0, 0, 0, NotSupported.X0()},
		{"mem protect", FnMemProtect, 1, 0, 0, NotSupported.X0()},
		{"mem protect check range", FnMemProtectCheckRange, 0, 0, 0, NotSupported.X0()},
		{"mem protect check range64", FnMemProtectCheck64, 0, 0, 0, NotSupported.X0()},
		// SMC64 IDs of SMC32-only functions are not functions: in particular
		// 0xC4000002 must not power the caller off.
		{"no VERSION64", 0xC4000000, 0, 0, 0, NotSupported.X0()},
		{"no CPU_OFF64", 0xC4000002, 0, 0, 0, NotSupported.X0()},
		{"no MIGRATE_INFO_TYPE64", 0xC4000006, 0, 0, 0, NotSupported.X0()},
		{"no SYSTEM_OFF64", 0xC4000008, 0, 0, 0, NotSupported.X0()},
		{"no SYSTEM_RESET64", 0xC4000009, 0, 0, 0, NotSupported.X0()},
		{"no PSCI_FEATURES64", 0xC400000A, uint64(FnCPUOn), 0, 0, NotSupported.X0()},
		{"unallocated 0x16", 0x84000016, 0, 0, 0, NotSupported.X0()},
		{"unallocated 0x1F", 0x8400001F, 0, 0, 0, NotSupported.X0()},
		{"unallocated 64 0x1F", 0xC400001F, 0, 0, 0, NotSupported.X0()},
		{"outside: SMCCC_VERSION", SMCCCVersionFID, 0, 0, 0, NotSupported.X0()},
		{"outside: just above range", 0x84000020, 0, 0, 0, NotSupported.X0()},
		{"outside: just below range", 0x83FFFFFF, 0, 0, 0, NotSupported.X0()},
		{"outside: 64 just above", 0xC4000020, 0, 0, 0, NotSupported.X0()},
		{"outside: zero", 0, 0, 0, 0, NotSupported.X0()},
		{"outside: all ones", math.MaxUint32, 0, 0, 0, NotSupported.X0()},
		{"outside: PSCI 0.1 style", 0x95c1ba5e, 0, 0, 0, NotSupported.X0()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := newMachine(t, 2, nil)
			r := call(t, m, 0, c.fid, c.x1, c.x2, c.x3)
			if r.X0 != c.want {
				t.Errorf("X0 = %#x, want %#x", r.X0, c.want)
			}
			if r.Action != ActionNone {
				t.Errorf("Action = %v, want none", r.Action)
			}
			wantStates(t, m, StateOn, StateOff)
		})
	}
}

func TestFeatures(t *testing.T) {
	m := newMachine(t, 2, nil)
	ext := newMachine(t, 2, func(c *Config) { c.ExternalFeatures = []uint32{SMCCCVersionFID, 0x80008000} })
	cases := []struct {
		fid  uint64
		m    *Machine
		want uint64
	}{
		{uint64(FnPSCIVersion), m, 0},
		{uint64(FnCPUSuspend), m, CPUSuspendFeatures},
		{uint64(FnCPUSuspend64), m, CPUSuspendFeatures},
		{uint64(FnCPUOff), m, 0},
		{uint64(FnCPUOn), m, 0},
		{uint64(FnCPUOn64), m, 0},
		{uint64(FnAffinityInfo), m, 0},
		{uint64(FnAffinityInfo64), m, 0},
		{uint64(FnMigrateInfoType), m, 0},
		{uint64(FnSystemOff), m, 0},
		{uint64(FnSystemReset), m, 0},
		{uint64(FnPSCIFeatures), m, 0},
		{uint64(FnSystemReset2), m, 0},
		{uint64(FnSystemReset2_64), m, 0},
		{uint64(FnMigrate), m, NotSupported.X0()},
		{uint64(FnMigrate64), m, NotSupported.X0()},
		{uint64(FnMigrateInfoUpCPU), m, NotSupported.X0()},
		{uint64(FnMigrateInfoUpCPU64), m, NotSupported.X0()},
		{uint64(FnSystemSuspend), m, NotSupported.X0()},
		{uint64(FnSystemSuspend64), m, NotSupported.X0()},
		{uint64(FnSystemOff2), m, NotSupported.X0()},
		{uint64(FnSystemOff2_64), m, NotSupported.X0()},
		{uint64(FnCPUFreeze), m, NotSupported.X0()},
		{uint64(FnMemProtect), m, NotSupported.X0()},
		{0xC4000000, m, NotSupported.X0()},
		{0xC4000002, m, NotSupported.X0()},
		{0xC400000A, m, NotSupported.X0()},
		{0x8400001F, m, NotSupported.X0()},
		// PSCI_FEATURES is SMC32: only W1 is the queried ID.
		{1<<32 | uint64(FnCPUOn), m, 0},
		{0xFFFFFFFF_00000000 | uint64(FnCPUOff), m, 0},
		// Not ours unless the VMM says so.
		{uint64(SMCCCVersionFID), m, NotSupported.X0()},
		{uint64(SMCCCVersionFID), ext, 0},
		{0x80008000, ext, 0},
		{0x80000001, ext, NotSupported.X0()},
		{uint64(FnCPUOn), ext, 0},
		{uint64(FnMigrate), ext, NotSupported.X0()},
		{0, m, NotSupported.X0()},
	}
	for _, c := range cases {
		r := call(t, c.m, 0, FnPSCIFeatures, c.fid, 0, 0)
		if r.X0 != c.want || r.Action != ActionNone {
			t.Errorf("PSCI_FEATURES(%#x) = %#x, %v; want %#x", c.fid, r.X0, r.Action, c.want)
		}
	}
}

// PSCI_FEATURES must say "implemented" for exactly the IDs Handle
// implements. Try every ID of both ranges on a fresh machine with plausible
// arguments.
func TestFeaturesAgreeWithHandle(t *testing.T) {
	implemented := 0
	for _, base := range []uint32{Base32, Base64} {
		for n := range RangeLen {
			fid := base + n
			m := newMachine(t, 2, nil)
			var x1 uint64
			switch fid {
			case FnCPUOn, FnCPUOn64:
				x1 = aff(1)
			case FnPSCIFeatures:
				x1 = uint64(FnPSCIVersion)
			}
			r := call(t, m, 0, fid, x1, entryOK, 0)
			handled := r.X0 != NotSupported.X0()
			f := call(t, newMachine(t, 2, nil), 0, FnPSCIFeatures, uint64(fid), 0, 0)
			featured := f.X0 != NotSupported.X0()
			if handled != featured {
				t.Errorf("%s %#x: Handle implements it: %v; PSCI_FEATURES says %v", Name(fid), fid, handled, featured)
			}
			if handled {
				implemented++
			}
		}
	}
	// VERSION, CPU_SUSPEND x2, CPU_OFF, CPU_ON x2, AFFINITY_INFO x2,
	// MIGRATE_INFO_TYPE, SYSTEM_OFF, SYSTEM_RESET, PSCI_FEATURES,
	// SYSTEM_RESET2 x2.
	if implemented != 14 {
		t.Errorf("%d function IDs implemented, want 14", implemented)
	}
}

// cpuOnMPIDRs: vCPU 0 Aff0=0, vCPU 1 Aff0=1, vCPU 2 Aff1=1, vCPU 3 Aff3=1 Aff0=2.
var cpuOnMPIDRs = [...]uint64{0x80000000, 0x80000001, 0x80000100, 0x1_8000_0002}

func TestCPUOn(t *testing.T) {
	type setup func(t *testing.T, m *Machine)
	onOne := func(t *testing.T, m *Machine) {
		call(t, m, 0, FnCPUOn64, 1, entryOK, 0)
	}
	onOneStarted := func(t *testing.T, m *Machine) {
		onOne(t, m)
		mustStarted(t, m, 1)
	}
	cases := []struct {
		name        string
		setup       setup
		pendingAsOn bool
		noRAMCheck  bool
		fid         uint32
		x1, x2, x3  uint64
		want        Status
		target      int    // on success
		entry, ctx  uint64 // on success
	}{
		{name: "64 success", fid: FnCPUOn64, x1: 1, x2: entryOK, x3: 0xdead_beef_cafe_f00d,
			want: Success, target: 1, entry: entryOK, ctx: 0xdead_beef_cafe_f00d},
		{name: "32 success", fid: FnCPUOn, x1: 1, x2: entryOK, x3: 0x1234,
			want: Success, target: 1, entry: entryOK, ctx: 0x1234},
		{name: "32 ignores upper halves", fid: FnCPUOn,
			x1: 0xFFFF_FFFF_0000_0001, x2: 0xAAAA_AAAA_0000_0000 | entryOK, x3: 0xBBBB_BBBB_0000_1234,
			want: Success, target: 1, entry: entryOK, ctx: 0x1234},
		{name: "non-affinity bits masked", fid: FnCPUOn64,
			x1: 0xFF<<56 | 0xAB<<40 | 1<<31 | 1<<30 | 1<<24 | 1, x2: entryOK, x3: 7,
			want: Success, target: 1, entry: entryOK, ctx: 7},
		{name: "32 non-affinity bits masked", fid: FnCPUOn, x1: 1<<31 | 1<<30 | 1<<24 | 1, x2: entryOK,
			want: Success, target: 1, entry: entryOK},
		{name: "Aff1 target", fid: FnCPUOn64, x1: 0x100, x2: entryOK, want: Success, target: 2, entry: entryOK},
		{name: "Aff3 target", fid: FnCPUOn64, x1: 0x1_0000_0002, x2: entryOK, want: Success, target: 3, entry: entryOK},
		{name: "Aff3 unreachable from SMC32", fid: FnCPUOn, x1: 0x1_0000_0002, x2: entryOK, want: InvalidParameters},
		{name: "unknown MPIDR", fid: FnCPUOn64, x1: 5, x2: entryOK, want: InvalidParameters},
		{name: "unknown Aff3", fid: FnCPUOn64, x1: 0x2_0000_0001, x2: entryOK, want: InvalidParameters},
		{name: "unknown Aff2", fid: FnCPUOn64, x1: 0x1_0001, x2: entryOK, want: InvalidParameters},
		{name: "caller itself is ON", fid: FnCPUOn64, x1: 0, x2: entryOK, want: AlreadyOn},
		{name: "already on", setup: onOneStarted, fid: FnCPUOn64, x1: 1, x2: entryOK, want: AlreadyOn},
		{name: "already on, 32", setup: onOneStarted, fid: FnCPUOn, x1: 1, x2: entryOK, want: AlreadyOn},
		{name: "on pending", setup: onOne, fid: FnCPUOn64, x1: 1, x2: entryOK, want: OnPending},
		{name: "on pending, 32", setup: onOne, fid: FnCPUOn, x1: 1, x2: entryOK, want: OnPending},
		{name: "on pending reported as on", setup: onOne, pendingAsOn: true, fid: FnCPUOn64, x1: 1, x2: entryOK, want: AlreadyOn},
		{name: "entry not in RAM", fid: FnCPUOn64, x1: 1, x2: entryNo, want: InvalidAddress},
		{name: "entry above RAM (64 uses all bits)", fid: FnCPUOn64, x1: 1, x2: 1<<32 | entryOK, want: InvalidAddress},
		{name: "unknown target beats bad entry", fid: FnCPUOn64, x1: 5, x2: entryNo, want: InvalidParameters},
		{name: "bad entry beats ALREADY_ON", fid: FnCPUOn64, x1: 0, x2: entryNo, want: InvalidAddress},
		{name: "bad entry beats ON_PENDING", setup: onOne, fid: FnCPUOn64, x1: 1, x2: entryNo, want: InvalidAddress},
		{name: "no predicate: any entry", noRAMCheck: true, fid: FnCPUOn64, x1: 0x100, x2: 0, x3: 1,
			want: Success, target: 2, entry: 0, ctx: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := Config{MPIDRs: cpuOnMPIDRs[:], ValidEntry: inRAM, PendingAsOn: c.pendingAsOn}
			if c.noRAMCheck {
				cfg.ValidEntry = nil
			}
			m, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if c.setup != nil {
				c.setup(t, m)
			}
			before := m.Snapshot().States
			r := call(t, m, 0, c.fid, c.x1, c.x2, c.x3)
			wantStatus(t, "CPU_ON", r, c.want)
			after := m.Snapshot().States
			if c.want != Success {
				if r.Action != ActionNone || r.Target != 0 || r.Entry != 0 || r.ContextID != 0 {
					t.Errorf("failed CPU_ON gave %+v", r)
				}
				if !slices.Equal(before, after) {
					t.Errorf("failed CPU_ON changed states %v -> %v", before, after)
				}
				return
			}
			if r.Action != ActionStartCPU || r.Target != c.target || r.Entry != c.entry || r.ContextID != c.ctx {
				t.Errorf("got %v target %d entry %#x ctx %#x; want start_cpu %d %#x %#x",
					r.Action, r.Target, r.Entry, r.ContextID, c.target, c.entry, c.ctx)
			}
			if before[c.target] != StateOff || after[c.target] != StateOnPending {
				t.Errorf("target %d: %v -> %v, want OFF -> ON_PENDING", c.target, before[c.target], after[c.target])
			}
			after[c.target] = before[c.target]
			if !slices.Equal(before, after) {
				t.Errorf("CPU_ON changed a vCPU other than the target: %v -> %v", before, m.Snapshot().States)
			}
		})
	}
}

// The ValidEntry predicate sees exactly the entry address the guest passed,
// truncated for SMC32, and is not consulted for calls without an entry.
func TestValidEntryArgument(t *testing.T) {
	var seen []uint64
	m := newMachine(t, 2, func(c *Config) {
		c.ValidEntry = func(a uint64) bool { seen = append(seen, a); return true }
	})
	call(t, m, 0, FnCPUOn, 1, 0x1_2345_6789, 0)
	call(t, m, 0, FnPSCIVersion, 0, 0x42, 0)
	call(t, m, 0, FnCPUSuspend64, 0, 0x1_0000_0000, 0)           // standby: entry unused
	call(t, m, 0, FnCPUSuspend64, 1<<16, 0x2_0000_0000, 0)       // powerdown
	call(t, m, 0, FnCPUSuspend, 1<<16, 0xFFFF_FFFF_8000_0000, 0) // powerdown, SMC32
	want := []uint64{0x2345_6789, 0x2_0000_0000, 0x8000_0000}
	if !slices.Equal(seen, want) {
		t.Errorf("ValidEntry saw %#x, want %#x", seen, want)
	}
}

func TestCPUOffThenOnAgain(t *testing.T) {
	m := newMachine(t, 2, func(c *Config) { c.ValidEntry = inRAM })
	info := func() uint64 { return call(t, m, 0, FnAffinityInfo64, aff(1), 0, 0).X0 }

	r := call(t, m, 0, FnCPUOn64, aff(1), entryOK, 11)
	if r.Action != ActionStartCPU || r.Target != 1 || r.ContextID != 11 {
		t.Fatalf("first CPU_ON: %+v", r)
	}
	mustStarted(t, m, 1)
	if got := info(); got != uint64(StateOn) {
		t.Fatalf("AFFINITY_INFO after start = %d, want ON", got)
	}

	r = call(t, m, 1, FnCPUOff, 0, 0, 0)
	if r.Action != ActionCPUOff {
		t.Fatalf("CPU_OFF action = %v", r.Action)
	}
	wantStatus(t, "CPU_OFF (never returns)", r, InternalFailure)
	wantStates(t, m, StateOn, StateOff)
	if got := info(); got != uint64(StateOff) {
		t.Fatalf("AFFINITY_INFO after CPU_OFF = %d, want OFF", got)
	}
	// A parked vCPU makes no calls; if the VMM lets one through it is told.
	if _, err := m.Handle(1, FnPSCIVersion, 0, 0, 0); !errors.Is(err, ErrCallerNotOn) {
		t.Fatalf("call from OFF vCPU: err = %v", err)
	}

	r = call(t, m, 0, FnCPUOn64, aff(1), entryOK+0x1000, 22)
	wantStatus(t, "second CPU_ON", r, Success)
	if r.Action != ActionStartCPU || r.Target != 1 || r.Entry != entryOK+0x1000 || r.ContextID != 22 {
		t.Fatalf("second CPU_ON: %+v", r)
	}
	mustStarted(t, m, 1)
	wantStatus(t, "CPU_ON of the restarted vCPU", call(t, m, 0, FnCPUOn64, aff(1), entryOK, 0), AlreadyOn)
	if r := call(t, m, 1, FnPSCIVersion, 0, 0, 0); r.X0 != 0x10001 {
		t.Fatalf("restarted vCPU: VERSION = %#x", r.X0)
	}
	// And vCPU 1 may now turn vCPU 0 off and on.
	call(t, m, 0, FnCPUOff, 0, 0, 0)
	wantStates(t, m, StateOff, StateOn)
	wantStatus(t, "CPU_ON 0 from 1", call(t, m, 1, FnCPUOn, 0, entryOK, 0), Success)
	wantStates(t, m, StateOnPending, StateOn)
}

// CPU_OFF returns DENIED only when a Trusted OS lives on the core
// (DEN0022D.b §5.5); there is none, so even the last ON vCPU may go off.
func TestCPUOffLastCPU(t *testing.T) {
	m := newMachine(t, 1, nil)
	r := call(t, m, 0, FnCPUOff, ^uint64(0), ^uint64(0), ^uint64(0))
	if r.Action != ActionCPUOff || r.X0 == Denied.X0() {
		t.Fatalf("CPU_OFF of the last CPU: %+v", r)
	}
	s := m.Snapshot()
	if s.Off != 1 || s.On != 0 || s.OnPending != 0 {
		t.Fatalf("snapshot %+v", s)
	}
	m.Reset()
	wantStates(t, m, StateOn)
}

func TestAffinityInfoTransitions(t *testing.T) {
	for _, pendingAsOn := range []bool{false, true} {
		m := newMachine(t, 3, func(c *Config) { c.PendingAsOn = pendingAsOn })
		check := func(step string, want State) {
			t.Helper()
			for _, fid := range []uint32{FnAffinityInfo, FnAffinityInfo64} {
				r := call(t, m, 0, fid, aff(2), 0, 0)
				if r.X0 != uint64(want) || r.Action != ActionNone {
					t.Errorf("pendingAsOn=%v %s: %s = %#x, want %v", pendingAsOn, step, Name(fid), r.X0, want)
				}
			}
		}
		check("initially", StateOff)
		call(t, m, 0, FnCPUOn, aff(2), entryOK, 0)
		if pendingAsOn {
			check("after CPU_ON", StateOn)
		} else {
			check("after CPU_ON", StateOnPending)
		}
		mustStarted(t, m, 2)
		check("after Started", StateOn)
		call(t, m, 2, FnCPUOff, 0, 0, 0)
		check("after CPU_OFF", StateOff)
		// The caller asking about itself.
		if r := call(t, m, 0, FnAffinityInfo64, aff(0), 0, 0); r.X0 != uint64(StateOn) {
			t.Errorf("AFFINITY_INFO(self) = %d", r.X0)
		}
	}
}

func TestAffinityInfoLevels(t *testing.T) {
	mpidrs := []uint64{
		0x000, 0x001, // cluster 0 (Aff1 = 0)
		0x100, 0x101, // cluster 1
		0x1_0000_0000, // Aff3 = 1
	}
	m, err := New(Config{MPIDRs: mpidrs})
	if err != nil {
		t.Fatal(err)
	}
	type q struct {
		name   string
		fid    uint32
		target uint64
		level  uint64
		want   uint64
	}
	on, off, pending := uint64(StateOn), uint64(StateOff), uint64(StateOnPending)
	inval := InvalidParameters.X0()
	caller := 0
	run := func(qs []q) {
		t.Helper()
		for _, c := range qs {
			r := call(t, m, caller, c.fid, c.target, c.level, 0)
			if r.X0 != c.want || r.Action != ActionNone {
				t.Errorf("%s: AFFINITY_INFO(%#x, %d) = %#x, want %#x", c.name, c.target, c.level, r.X0, c.want)
			}
		}
	}
	run([]q{
		{"level 0 on", FnAffinityInfo64, 0x000, 0, on},
		{"level 0 off", FnAffinityInfo64, 0x001, 0, off},
		{"level 0 masks non-affinity bits", FnAffinityInfo64, 0xFF<<40 | 1<<31 | 1<<24 | 0x001, 0, off},
		{"level 0 unknown", FnAffinityInfo64, 0x002, 0, inval},
		{"level 0 unknown Aff3", FnAffinityInfo64, 0x2_0000_0000, 0, inval},
		{"level 1 ignores Aff0: cluster 0 has an ON core", FnAffinityInfo64, 0x0FF, 1, on},
		{"level 1 cluster 1 all off", FnAffinityInfo64, 0x1AB, 1, off},
		{"level 1 unknown cluster", FnAffinityInfo64, 0x200, 1, inval},
		{"level 2 everything with Aff3=0", FnAffinityInfo64, 0xFFFF, 2, on},
		{"level 3 Aff3=1 instance", FnAffinityInfo64, 0x1_00FF_FFFF, 3, off},
		{"level 3 unknown Aff3", FnAffinityInfo64, 0x7_0000_0000, 3, inval},
		{"level 3 from SMC32 cannot name Aff3", FnAffinityInfo, 0x1_0000_0000, 3, on},
		{"level 4 does not exist", FnAffinityInfo64, 0x000, 4, inval},
		{"level max", FnAffinityInfo64, 0x000, math.MaxUint32, inval},
		{"level is 32 bits (SMC64)", FnAffinityInfo64, 0x001, 1 << 32, off},
		{"level is 32 bits (SMC32)", FnAffinityInfo, 0x001, 1<<32 | 4, inval},
		{"SMC32 target truncated", FnAffinityInfo, 0xFFFF_FFFF_0000_0001, 0, off},
	})
	call(t, m, 0, FnCPUOn64, 0x101, entryOK, 0)
	run([]q{
		{"level 0 pending", FnAffinityInfo64, 0x101, 0, pending},
		{"level 1 cluster 1 pending", FnAffinityInfo64, 0x100, 1, pending},
		{"level 2: ON wins over ON_PENDING", FnAffinityInfo64, 0, 2, on},
	})
	mustStarted(t, m, 3)
	call(t, m, 0, FnCPUOff, 0, 0, 0)
	caller = 3 // only ON vCPUs make calls
	run([]q{
		{"level 0 self now off", FnAffinityInfo64, 0x000, 0, off},
		{"level 1 cluster 0 now off", FnAffinityInfo64, 0x000, 1, off},
		{"level 1 cluster 1 on", FnAffinityInfo64, 0x100, 1, on},
	})
	if _, err := m.Handle(0, FnAffinityInfo64, 0, 0, 0); !errors.Is(err, ErrCallerNotOn) {
		t.Errorf("AFFINITY_INFO from the OFF vCPU 0: err = %v", err)
	}
}

func TestCPUSuspend(t *testing.T) {
	cases := []struct {
		name   string
		fid    uint32
		ps, x2 uint64
		want   Status
	}{
		{"standby", FnCPUSuspend64, 0, 0, Success},
		{"standby 32", FnCPUSuspend, 0, 0, Success},
		{"standby any StateID and level", FnCPUSuspend64, 0x0300_FFFF, 0, Success},
		{"standby ignores entry", FnCPUSuspend64, 0, entryNo, Success},
		{"powerdown downgraded to standby", FnCPUSuspend64, 1 << 16, entryOK, Success},
		{"powerdown level 1", FnCPUSuspend64, 1<<24 | 1<<16 | 0x22, entryOK, Success},
		{"powerdown bad entry", FnCPUSuspend64, 1 << 16, entryNo, InvalidAddress},
		{"powerdown entry above RAM (64 bits)", FnCPUSuspend64, 1 << 16, 1<<32 | entryOK, InvalidAddress},
		{"powerdown 32 truncates entry", FnCPUSuspend, 1 << 16, 1<<32 | entryOK, Success},
		{"reserved bit 17", FnCPUSuspend64, 1 << 17, 0, InvalidParameters},
		{"reserved bit 23", FnCPUSuspend64, 1 << 23, 0, InvalidParameters},
		{"reserved bit 26", FnCPUSuspend64, 1 << 26, 0, InvalidParameters},
		{"reserved bit 30 (extended StateType)", FnCPUSuspend64, 1 << 30, 0, InvalidParameters},
		{"reserved bit 31", FnCPUSuspend, 1 << 31, 0, InvalidParameters},
		{"reserved beats bad entry", FnCPUSuspend64, 1<<16 | 1<<20, entryNo, InvalidParameters},
		{"power_state is 32 bits", FnCPUSuspend64, 0xFFFF_FFFF_0000_0000, 0, Success},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := newMachine(t, 2, func(c *Config) { c.ValidEntry = inRAM })
			r := call(t, m, 0, c.fid, c.ps, c.x2, 0xC0)
			wantStatus(t, "CPU_SUSPEND", r, c.want)
			if c.want == Success {
				if r.Action != ActionSuspend || r.PowerState != uint32(c.ps) {
					t.Errorf("got %v power_state %#x, want suspend %#x", r.Action, r.PowerState, uint32(c.ps))
				}
			} else if r.Action != ActionNone {
				t.Errorf("failed CPU_SUSPEND asked for %v", r.Action)
			}
			wantStates(t, m, StateOn, StateOff) // the core stays ON
		})
	}
}

func TestSystemOffAndReset(t *testing.T) {
	fail := InternalFailure.X0()
	cases := []struct {
		name   string
		fid    uint32
		x1, x2 uint64
		want   Result
	}{
		{name: "system off", fid: FnSystemOff, x1: 5, x2: 6,
			want: Result{X0: fail, Action: ActionSystemOff}},
		{name: "system reset (cold)", fid: FnSystemReset, x1: 5, x2: 6,
			want: Result{X0: fail, Action: ActionSystemReset}},
		{name: "reset2 warm 64", fid: FnSystemReset2_64, x1: 0, x2: 0x1234_5678_9ABC,
			want: Result{X0: fail, Action: ActionSystemReset, Reset2: true, Cookie: 0x1234_5678_9ABC}},
		{name: "reset2 warm 32 truncates cookie", fid: FnSystemReset2, x1: 0, x2: 0x1_0000_0005,
			want: Result{X0: fail, Action: ActionSystemReset, Reset2: true, Cookie: 5}},
		{name: "reset2 reset_type is 32 bits", fid: FnSystemReset2_64, x1: 1 << 32,
			want: Result{X0: fail, Action: ActionSystemReset, Reset2: true}},
		{name: "reset2 vendor lowest", fid: FnSystemReset2_64, x1: 0x8000_0000, x2: 9,
			want: Result{X0: fail, Action: ActionSystemReset, Reset2: true, ResetType: 0x8000_0000, Cookie: 9}},
		{name: "reset2 vendor highest, 32", fid: FnSystemReset2, x1: 0xFFFF_FFFF,
			want: Result{X0: fail, Action: ActionSystemReset, Reset2: true, ResetType: 0xFFFF_FFFF}},
		{name: "reset2 reserved type 1", fid: FnSystemReset2_64, x1: 1,
			want: Result{X0: InvalidParameters.X0()}},
		{name: "reset2 reserved type 0x7FFFFFFF", fid: FnSystemReset2, x1: 0x7FFF_FFFF,
			want: Result{X0: InvalidParameters.X0()}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := newMachine(t, 2, nil)
			if r := call(t, m, 0, c.fid, c.x1, c.x2, 0); r != c.want {
				t.Errorf("got %+v, want %+v", r, c.want)
			}
			wantStates(t, m, StateOn, StateOff) // the VMM acts; the Machine does not
		})
	}
}

func TestMisuse(t *testing.T) {
	m := newMachine(t, 3, nil)
	for _, caller := range []int{-1, 3, math.MaxInt, math.MinInt} {
		r, err := m.Handle(caller, FnCPUOn64, aff(1), entryOK, 0)
		if !errors.Is(err, ErrNoSuchCPU) {
			t.Errorf("Handle(caller %d): err = %v", caller, err)
		}
		if r != (Result{X0: NotSupported.X0()}) {
			t.Errorf("Handle(caller %d) = %+v", caller, r)
		}
	}
	wantStates(t, m, StateOn, StateOff, StateOff)

	// From an OFF caller: dropped.
	r, err := m.Handle(1, FnCPUOn64, aff(2), entryOK, 0)
	if !errors.Is(err, ErrCallerNotOn) || r != (Result{X0: InternalFailure.X0()}) {
		t.Errorf("CPU_ON from OFF vCPU: %+v, %v", r, err)
	}
	// From an ON_PENDING caller (the VMM forgot Started): dropped too.
	call(t, m, 0, FnCPUOn64, aff(2), entryOK, 0)
	for _, fid := range []uint32{FnCPUOff, FnSystemOff, FnPSCIVersion, 0x1234} {
		r, err = m.Handle(2, fid, 0, 0, 0)
		if !errors.Is(err, ErrCallerNotOn) || r.Action != ActionNone {
			t.Errorf("%s from ON_PENDING vCPU: %+v, %v", Name(fid), r, err)
		}
	}
	wantStates(t, m, StateOn, StateOff, StateOnPending)

	// Started only moves ON_PENDING to ON.
	for _, k := range []int{-1, 3} {
		if err := m.Started(k); !errors.Is(err, ErrNoSuchCPU) {
			t.Errorf("Started(%d) = %v", k, err)
		}
	}
	for _, k := range []int{0, 1} {
		if err := m.Started(k); !errors.Is(err, ErrNotPending) {
			t.Errorf("Started(%d) = %v, want ErrNotPending", k, err)
		}
	}
	mustStarted(t, m, 2)
	if err := m.Started(2); !errors.Is(err, ErrNotPending) {
		t.Errorf("second Started(2) = %v", err)
	}
	wantStates(t, m, StateOn, StateOff, StateOn)
}

func TestReset(t *testing.T) {
	m := newMachine(t, 5, func(c *Config) { c.BootCPUs = []int{0, 2} })
	initial := []State{StateOn, StateOff, StateOn, StateOff, StateOff}
	wantStates(t, m, initial...)

	call(t, m, 0, FnCPUOn64, aff(1), entryOK, 0) // 1 pending
	call(t, m, 2, FnCPUOn64, aff(3), entryOK, 0)
	mustStarted(t, m, 3) // 3 on
	call(t, m, 2, FnCPUOff, 0, 0, 0)
	call(t, m, 3, FnCPUOn64, aff(4), entryOK, 0)
	mustStarted(t, m, 4)
	call(t, m, 0, FnCPUOff, 0, 0, 0)
	wantStates(t, m, StateOff, StateOnPending, StateOff, StateOn, StateOn)

	m.Reset()
	wantStates(t, m, initial...)
	// The pending start is gone with the reset: vCPU 1 can be started anew,
	// and Started(1) for the old start is refused.
	if err := m.Started(1); !errors.Is(err, ErrNotPending) {
		t.Errorf("Started(1) after Reset = %v", err)
	}
	wantStatus(t, "CPU_ON after Reset", call(t, m, 2, FnCPUOn64, aff(1), entryOK, 0), Success)
	m.Reset()
	m.Reset()
	wantStates(t, m, initial...)
}

func TestSnapshot(t *testing.T) {
	m := newMachine(t, 4, nil)
	call(t, m, 0, FnCPUOn64, aff(1), entryOK, 0)
	call(t, m, 0, FnCPUOn64, aff(2), entryOK, 0)
	mustStarted(t, m, 2)
	s := m.Snapshot()
	if s.On != 2 || s.OnPending != 1 || s.Off != 1 {
		t.Fatalf("counts %+v", s)
	}
	if !slices.Equal(s.States, []State{StateOn, StateOnPending, StateOn, StateOff}) {
		t.Fatalf("states %v", s.States)
	}
	s.States[3] = StateOn // the copy is the caller's
	if st, _ := m.State(3); st != StateOff {
		t.Fatal("Snapshot shares its slice with the Machine")
	}
	for k, want := range []State{StateOn, StateOnPending, StateOn, StateOff} {
		if st, err := m.State(k); st != want || err != nil {
			t.Errorf("State(%d) = %v, %v", k, st, err)
		}
	}
}

func TestActionString(t *testing.T) {
	want := map[Action]string{
		ActionNone: "none", ActionStartCPU: "start_cpu", ActionCPUOff: "cpu_off",
		ActionSuspend: "suspend", ActionSystemOff: "system_off", ActionSystemReset: "system_reset",
		Action(99): "Action(99)",
	}
	for a, s := range want {
		if a.String() != s {
			t.Errorf("%d.String() = %q, want %q", a, a.String(), s)
		}
	}
}

func TestRejected(t *testing.T) {
	m := newMachine(t, 3, func(c *Config) { c.ValidEntry = func(a uint64) bool { return a%4 == 0 && inRAM(a) } })
	none := Status(1) // stands for "not rejected"
	for _, c := range []struct {
		what       string
		fid        uint32
		x1, x2, x3 uint64
		want       Status
	}{
		{"CPU_ON to no vCPU", FnCPUOn64, 0xFF_0000_0000, entryOK, 0, InvalidParameters},
		{"CPU_ON, entry below RAM", FnCPUOn64, aff(1), entryNo, 0, InvalidAddress},
		{"CPU_ON, entry misaligned", FnCPUOn64, aff(1), entryOK + 2, 0, InvalidAddress},
		{"CPU_ON, no vCPU and bad entry", FnCPUOn, 0xFF_FFFF, entryNo, 0, InvalidParameters},
		{"CPU_ON to the caller", FnCPUOn64, aff(0), entryOK, 0, none},
		{"CPU_ON that starts vCPU 1", FnCPUOn64, aff(1), entryOK, 7, none},
		{"CPU_ON racing for vCPU 1", FnCPUOn64, aff(1), entryOK, 7, none},
		{"AFFINITY_INFO of no vCPU", FnAffinityInfo64, 0x7F, 0, 0, InvalidParameters},
		{"AFFINITY_INFO at level 4", FnAffinityInfo64, aff(1), 4, 0, InvalidParameters},
		{"AFFINITY_INFO of an OFF vCPU", FnAffinityInfo64, aff(2), 0, 0, none},
		{"CPU_SUSPEND, reserved bits", FnCPUSuspend, 1 << 31, 0, 0, InvalidParameters},
		{"CPU_SUSPEND powerdown, bad entry", FnCPUSuspend64, 1 << 16, entryNo, 0, InvalidAddress},
		{"CPU_SUSPEND standby", FnCPUSuspend, 0, 0, 0, none},
		{"SYSTEM_RESET2, reserved type", FnSystemReset2, 1, 0, 0, InvalidParameters},
		{"SYSTEM_RESET2, warm", FnSystemReset2, 0, 0, 0, none},
		{"PSCI_VERSION", FnPSCIVersion, 0, 0, 0, none},
		{"PSCI_FEATURES of an unknown ID", FnPSCIFeatures, 0x8400_001F, 0, 0, none},
		{"unknown function", 0x8400_001F, 0, 0, 0, none},
		{"MIGRATE_INFO_TYPE", FnMigrateInfoType, 0, 0, 0, none},
	} {
		r := call(t, m, 0, c.fid, c.x1, c.x2, c.x3)
		s, ok := r.Rejected()
		switch {
		case c.want == none && ok:
			t.Errorf("%s: Rejected() = %v, true (X0 %#x); want not rejected", c.what, s, r.X0)
		case c.want != none && (!ok || s != c.want):
			t.Errorf("%s: Rejected() = %v, %v (X0 %#x); want %v, true", c.what, s, ok, r.X0, c.want)
		}
	}
}
