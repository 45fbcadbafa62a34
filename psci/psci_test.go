package psci

import (
	"math"
	"strings"
	"testing"
)

// The function IDs are wire constants: pin every one to the number the spec
// gives (DEN0022D.b "Function prototypes") so an edit cannot move them.
func TestFunctionIDs(t *testing.T) {
	cases := []struct {
		got  uint32
		want uint32
	}{
		{FnPSCIVersion, 0x84000000},
		{FnCPUSuspend, 0x84000001}, {FnCPUSuspend64, 0xC4000001},
		{FnCPUOff, 0x84000002},
		{FnCPUOn, 0x84000003}, {FnCPUOn64, 0xC4000003},
		{FnAffinityInfo, 0x84000004}, {FnAffinityInfo64, 0xC4000004},
		{FnMigrate, 0x84000005}, {FnMigrate64, 0xC4000005},
		{FnMigrateInfoType, 0x84000006},
		{FnMigrateInfoUpCPU, 0x84000007}, {FnMigrateInfoUpCPU64, 0xC4000007},
		{FnSystemOff, 0x84000008},
		{FnSystemReset, 0x84000009},
		{FnPSCIFeatures, 0x8400000A},
		{FnCPUFreeze, 0x8400000B},
		{FnCPUDefaultSuspend, 0x8400000C}, {FnCPUDefaultSuspend64, 0xC400000C},
		{FnNodeHWState, 0x8400000D}, {FnNodeHWState64, 0xC400000D},
		{FnSystemSuspend, 0x8400000E}, {FnSystemSuspend64, 0xC400000E},
		{FnSetSuspendMode, 0x8400000F},
		{FnStatResidency, 0x84000010}, {FnStatResidency64, 0xC4000010},
		{FnStatCount, 0x84000011}, {FnStatCount64, 0xC4000011},
		{FnSystemReset2, 0x84000012}, {FnSystemReset2_64, 0xC4000012},
		{FnMemProtect, 0x84000013},
		{FnMemProtectCheckRange, 0x84000014}, {FnMemProtectCheck64, 0xC4000014},
		{FnSystemOff2, 0x84000015}, {FnSystemOff2_64, 0xC4000015},
		{SMCCCVersionFID, 0x80000000},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("function ID %#x, want %#x", c.got, c.want)
		}
	}
	if Version != 0x10001 {
		t.Errorf("Version = %#x, want 0x10001", Version)
	}
	if MigrateInfoTypeNone != 2 {
		t.Errorf("MigrateInfoTypeNone = %d, want 2", MigrateInfoTypeNone)
	}
	if AffinityMask != 0xFF00FFFFFF || AffinityMask32 != 0xFFFFFF {
		t.Errorf("affinity masks %#x %#x", AffinityMask, AffinityMask32)
	}
}

func TestFilterRanges(t *testing.T) {
	r := FilterRanges()
	want := []Range{{0x84000000, 0x20}, {0xC4000000, 0x20}}
	if len(r) != len(want) || r[0] != want[0] || r[1] != want[1] {
		t.Fatalf("FilterRanges() = %#v, want %#v", r, want)
	}
	r[0].Base = 1 // the caller owns the slice
	if FilterRanges()[0] != want[0] {
		t.Fatal("FilterRanges shares its slice between calls")
	}
}

func TestInRangeAndIs64(t *testing.T) {
	cases := []struct {
		fid      uint32
		in, is64 bool
	}{
		{0x84000000, true, false},
		{0x8400001F, true, false},
		{0x84000020, false, false},
		{0x83FFFFFF, false, false},
		{0xC4000000, true, true},
		{0xC400001F, true, true},
		{0xC4000020, false, true},
		{0x80000000, false, false},
		{0xC2000000, false, true},
		{0, false, false},
		{math.MaxUint32, false, true},
	}
	for _, c := range cases {
		if got := InRange(c.fid); got != c.in {
			t.Errorf("InRange(%#x) = %v, want %v", c.fid, got, c.in)
		}
		if got := Is64(c.fid); got != c.is64 {
			t.Errorf("Is64(%#x) = %v, want %v", c.fid, got, c.is64)
		}
	}
}

func TestName(t *testing.T) {
	cases := []struct {
		fid  uint32
		want string
	}{
		{FnPSCIVersion, "PSCI_VERSION"},
		{FnCPUSuspend, "CPU_SUSPEND"},
		{FnCPUSuspend64, "CPU_SUSPEND"},
		{FnCPUOff, "CPU_OFF"},
		{FnCPUOn, "CPU_ON"},
		{FnCPUOn64, "CPU_ON"},
		{FnAffinityInfo, "AFFINITY_INFO"},
		{FnAffinityInfo64, "AFFINITY_INFO"},
		{FnMigrate, "MIGRATE"},
		{FnMigrate64, "MIGRATE"},
		{FnMigrateInfoType, "MIGRATE_INFO_TYPE"},
		{FnMigrateInfoUpCPU, "MIGRATE_INFO_UP_CPU"},
		{FnMigrateInfoUpCPU64, "MIGRATE_INFO_UP_CPU"},
		{FnSystemOff, "SYSTEM_OFF"},
		{FnSystemReset, "SYSTEM_RESET"},
		{FnPSCIFeatures, "PSCI_FEATURES"},
		{FnCPUFreeze, "CPU_FREEZE"},
		{FnCPUDefaultSuspend, "CPU_DEFAULT_SUSPEND"},
		{FnCPUDefaultSuspend64, "CPU_DEFAULT_SUSPEND"},
		{FnNodeHWState, "NODE_HW_STATE"},
		{FnNodeHWState64, "NODE_HW_STATE"},
		{FnSystemSuspend, "SYSTEM_SUSPEND"},
		{FnSystemSuspend64, "SYSTEM_SUSPEND"},
		{FnSetSuspendMode, "PSCI_SET_SUSPEND_MODE"},
		{FnStatResidency, "PSCI_STAT_RESIDENCY"},
		{FnStatResidency64, "PSCI_STAT_RESIDENCY"},
		{FnStatCount, "PSCI_STAT_COUNT"},
		{FnStatCount64, "PSCI_STAT_COUNT"},
		{FnSystemReset2, "SYSTEM_RESET2"},
		{FnSystemReset2_64, "SYSTEM_RESET2"},
		{FnMemProtect, "MEM_PROTECT"},
		{FnMemProtectCheckRange, "MEM_PROTECT_CHECK_RANGE"},
		{FnMemProtectCheck64, "MEM_PROTECT_CHECK_RANGE"},
		{FnSystemOff2, "SYSTEM_OFF2"},
		{FnSystemOff2_64, "SYSTEM_OFF2"},
		// In range, but no function: SMC64 IDs of SMC32-only functions, and
		// unallocated numbers.
		{0xC4000000, "UNKNOWN_0xC4000000"},
		{0xC4000002, "UNKNOWN_0xC4000002"},
		{0xC400000A, "UNKNOWN_0xC400000A"},
		{0x84000016, "UNKNOWN_0x84000016"},
		{0x8400001F, "UNKNOWN_0x8400001F"},
		{0xC400001F, "UNKNOWN_0xC400001F"},
		// Outside.
		{0x84000020, "NOT_PSCI"},
		{SMCCCVersionFID, "NOT_PSCI"},
		{0, "NOT_PSCI"},
		{math.MaxUint32, "NOT_PSCI"},
	}
	for _, c := range cases {
		if got := Name(c.fid); got != c.want {
			t.Errorf("Name(%#x) = %q, want %q", c.fid, got, c.want)
		}
	}
}

// Name's set of values must stay bounded whatever the guest passes: at most
// 64 distinct names for the 64 in-range IDs, plus NOT_PSCI.
func TestNameBounded(t *testing.T) {
	names := map[string]bool{}
	for _, base := range []uint32{Base32, Base64} {
		for n := uint32(0); n < RangeLen; n++ {
			names[Name(base+n)] = true
		}
	}
	if len(names) > 64 {
		t.Fatalf("%d names for 64 IDs", len(names))
	}
	for _, fid := range []uint32{0, 1, 0x84000020, 0xC4000020, 0x83FFFFFF, 0xFFFFFFFF, 0x8600_0000} {
		if Name(fid) != "NOT_PSCI" {
			t.Errorf("Name(%#x) = %q", fid, Name(fid))
		}
	}
	for name := range names {
		if name == "" || strings.ContainsAny(name, " \t\n") {
			t.Errorf("bad name %q", name)
		}
	}
}

func TestStatus(t *testing.T) {
	cases := []struct {
		s    Status
		code int32
		x0   uint64
		name string
	}{
		{Success, 0, 0, "SUCCESS"},
		{NotSupported, -1, 0xFFFFFFFFFFFFFFFF, "NOT_SUPPORTED"},
		{InvalidParameters, -2, 0xFFFFFFFFFFFFFFFE, "INVALID_PARAMETERS"},
		{Denied, -3, 0xFFFFFFFFFFFFFFFD, "DENIED"},
		{AlreadyOn, -4, 0xFFFFFFFFFFFFFFFC, "ALREADY_ON"},
		{OnPending, -5, 0xFFFFFFFFFFFFFFFB, "ON_PENDING"},
		{InternalFailure, -6, 0xFFFFFFFFFFFFFFFA, "INTERNAL_FAILURE"},
		{NotPresent, -7, 0xFFFFFFFFFFFFFFF9, "NOT_PRESENT"},
		{Disabled, -8, 0xFFFFFFFFFFFFFFF8, "DISABLED"},
		{InvalidAddress, -9, 0xFFFFFFFFFFFFFFF7, "INVALID_ADDRESS"},
	}
	for _, c := range cases {
		if int32(c.s) != c.code {
			t.Errorf("%v = %d, want %d", c.s, int32(c.s), c.code)
		}
		if got := c.s.X0(); got != c.x0 {
			t.Errorf("%v.X0() = %#x, want %#x", c.s, got, c.x0)
		}
		// An SMC32 caller reads W0: the same int32.
		if int32(uint32(c.s.X0())) != c.code {
			t.Errorf("%v: W0 = %#x", c.s, uint32(c.s.X0()))
		}
		if got := c.s.String(); got != c.name {
			t.Errorf("String() = %q, want %q", got, c.name)
		}
	}
	if got := Status(-42).String(); got != "Status(-42)" {
		t.Errorf("unknown status String() = %q", got)
	}
}

func TestStateValues(t *testing.T) {
	// They double as AFFINITY_INFO's return values: 0 ON, 1 OFF, 2 ON_PENDING.
	if StateOn != 0 || StateOff != 1 || StateOnPending != 2 {
		t.Fatalf("state values %d %d %d", StateOn, StateOff, StateOnPending)
	}
	for s, name := range map[State]string{StateOn: "ON", StateOff: "OFF", StateOnPending: "ON_PENDING", 7: "State(7)"} {
		if s.String() != name {
			t.Errorf("%d.String() = %q, want %q", s, s.String(), name)
		}
		if s.Valid() != (s <= 2) {
			t.Errorf("%d.Valid() = %v", s, s.Valid())
		}
	}
}

func TestArgs(t *testing.T) {
	// Parameter counts from DEN0022's function descriptions.
	for _, c := range []struct {
		fid  uint32
		want int
	}{
		{FnPSCIVersion, 0}, {FnCPUOff, 0}, {FnSystemOff, 0}, {FnSystemReset, 0},
		{FnCPUOn, 3}, {FnCPUOn64, 3}, {FnCPUSuspend64, 3},
		{FnAffinityInfo, 2}, {FnAffinityInfo64, 2}, {FnSystemReset2, 2},
		{FnPSCIFeatures, 1}, {FnMigrate64, 1}, {0xC400_001F, 0},
	} {
		if got := Args(c.fid); got != c.want {
			t.Errorf("Args(%#x) = %d, want %d", c.fid, got, c.want)
		}
	}
}
