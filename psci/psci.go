// Package psci answers a guest's PSCI 1.1 calls (Arm DEN0022D.b, "Arm Power
// State Coordination Interface") as a pure state machine: it tracks the power
// state of every vCPU and tells the VMM what to write back and what to do.
//
// It performs no ioctls, owns no file descriptors and starts no goroutines, so
// it tests anywhere. mvm installs the SMCCC filter ranges returned by
// [FilterRanges] with action FWD_TO_USER; each KVM_EXIT_HYPERCALL in those
// ranges is passed to [Machine.Handle] by the vCPU goroutine that took it.
//
// # How a VMM drives a Machine
//
// Setup: build the Machine with [New] from every vCPU's MPIDR_EL1 (index =
// vCPU id), read back with KVM_GET_ONE_REG, and the vCPUs that are on at
// power-on (normally only vCPU 0). Give every vCPU goroutine a start mailbox
// with room for one request (a chan of capacity 1). A vCPU that is not on
// waits on its mailbox in userspace, never inside KVM_RUN.
//
// Each call: on KVM_EXIT_HYPERCALL, read the [Args] argument registers
// (X1, X2, ...) the function takes and call
// Handle(self, uint32(hypercall.nr), x1, x2, x3). A non-nil error means the
// VMM, not the guest, is inconsistent (see [ErrCallerNotOn]); the Result then
// carries Action [ActionNone] and a failure code in X0. Otherwise act on
// Result.Action:
//
//   - [ActionNone]: write X0 and re-enter.
//   - [ActionSuspend]: write X0; the caller asked for a standby state.
//     Re-enter at once (a legal early wake-up) or first wait for an
//     interrupt, e.g. with KVM_SET_MP_STATE(KVM_MP_STATE_SUSPENDED).
//   - [ActionStartCPU]: write X0 (SUCCESS) to the caller and re-enter
//     it; send (Entry, ContextID) to the mailbox of vCPU Target. That
//     goroutine re-initialises its vCPU (KVM_ARM_VCPU_INIT), sets
//     PC = Entry, X0 = ContextID, PSTATE = 0x3c5, calls
//     [Machine.Started](Target) and only then enters KVM_RUN. Until Started
//     the target is ON_PENDING. The send never blocks: a target gets at most
//     one start per OFF period.
//   - [ActionCPUOff]: the caller is already OFF in the Machine. Do not
//     re-enter it; wait on its own mailbox as at setup. A start for it may
//     already be waiting there.
//   - [ActionSystemOff]: stop every vCPU and end the VM.
//   - [ActionSystemReset]: stop and join every vCPU goroutine, drain every
//     mailbox, call [Machine.Reset] and boot again.
//
// For the calls that do not return (CPU_OFF, SYSTEM_OFF, SYSTEM_RESET,
// SYSTEM_RESET2) X0 is preloaded with INTERNAL_FAILURE, as KVM's in-kernel
// PSCI does, so a VMM that wrongly resumes the caller makes the failure
// visible to the guest. PSCI returns nothing in X1..X3: KVM's in-kernel
// PSCI zeroes them, mvm leaves them as the guest had them (SMCCC does not
// preserve them across a call), so Result has no fields for them.
//
// Function IDs, return codes and parameter layouts below come from
// DEN0022D.b (PSCI 1.1) chapter 5; SYSTEM_OFF2 is from DEN0022F (PSCI 1.3).
// Comments cite a function's own section by its title, with its number where
// known (§5.4 CPU_SUSPEND, §5.5 CPU_OFF, §5.6 CPU_ON, §5.7 AFFINITY_INFO).
// The SMC calling convention (bit 30 of a function ID selects SMC64) is Arm
// DEN0028 (SMCCC).
//
// One deliberate choice affects what racing guests see: between a successful
// CPU_ON and [Machine.Started] the target is ON_PENDING, which the spec lets
// CPU_ON and AFFINITY_INFO report; [Config.PendingAsOn] reports it as ON
// instead, exactly like KVM's in-kernel PSCI.
package psci

import "strconv"

// Function ID ranges. PSCI owns function numbers 0x00-0x1F of the standard
// secure service calls in both calling conventions (DEN0022D.b chapter 5,
// "Function prototypes"; SMCCC DEN0028: bit 31 fast call, bit 30 SMC64,
// bits [29:24] = 4 standard secure service).
const (
	Base32   uint32 = 0x8400_0000 // SMC32/HVC32 PSCI functions
	Base64   uint32 = 0xC400_0000 // SMC64/HVC64 PSCI functions
	RangeLen uint32 = 0x20        // function numbers 0x00..0x1F

	smc64Bit uint32 = 1 << 30
)

// PSCI function IDs (DEN0022D.b chapter 5, "Function prototypes"; SYSTEM_OFF2
// from DEN0022F, PSCI 1.3). Functions without a 64-bit variant exist only
// as SMC32 IDs: 0xC400_0000 (say) is not PSCI_VERSION, it is not a function.
const (
	FnPSCIVersion          uint32 = 0x8400_0000
	FnCPUSuspend           uint32 = 0x8400_0001
	FnCPUSuspend64         uint32 = 0xC400_0001
	FnCPUOff               uint32 = 0x8400_0002
	FnCPUOn                uint32 = 0x8400_0003
	FnCPUOn64              uint32 = 0xC400_0003
	FnAffinityInfo         uint32 = 0x8400_0004
	FnAffinityInfo64       uint32 = 0xC400_0004
	FnMigrate              uint32 = 0x8400_0005
	FnMigrate64            uint32 = 0xC400_0005
	FnMigrateInfoType      uint32 = 0x8400_0006
	FnMigrateInfoUpCPU     uint32 = 0x8400_0007
	FnMigrateInfoUpCPU64   uint32 = 0xC400_0007
	FnSystemOff            uint32 = 0x8400_0008
	FnSystemReset          uint32 = 0x8400_0009
	FnPSCIFeatures         uint32 = 0x8400_000A
	FnCPUFreeze            uint32 = 0x8400_000B
	FnCPUDefaultSuspend    uint32 = 0x8400_000C
	FnCPUDefaultSuspend64  uint32 = 0xC400_000C
	FnNodeHWState          uint32 = 0x8400_000D
	FnNodeHWState64        uint32 = 0xC400_000D
	FnSystemSuspend        uint32 = 0x8400_000E
	FnSystemSuspend64      uint32 = 0xC400_000E
	FnSetSuspendMode       uint32 = 0x8400_000F
	FnStatResidency        uint32 = 0x8400_0010
	FnStatResidency64      uint32 = 0xC400_0010
	FnStatCount            uint32 = 0x8400_0011
	FnStatCount64          uint32 = 0xC400_0011
	FnSystemReset2         uint32 = 0x8400_0012
	FnSystemReset2_64      uint32 = 0xC400_0012
	FnMemProtect           uint32 = 0x8400_0013
	FnMemProtectCheckRange uint32 = 0x8400_0014
	FnMemProtectCheck64    uint32 = 0xC400_0014
	FnSystemOff2           uint32 = 0x8400_0015
	FnSystemOff2_64        uint32 = 0xC400_0015
)

// SMCCCVersionFID is SMCCC_VERSION (DEN0028). It is not a PSCI function and
// KVM answers it itself, but a guest asks PSCI_FEATURES about it to learn
// whether SMCCC 1.1+ is there (Linux then probes the ARCH_WORKAROUND_*
// calls). Pass it in [Config.ExternalFeatures] to answer "implemented".
const SMCCCVersionFID uint32 = 0x8000_0000

// Version is what PSCI_VERSION returns: major<<16 | minor, here 1.1
// (DEN0022D.b "PSCI_VERSION").
const (
	VersionMajor        = 1
	VersionMinor        = 1
	Version      uint32 = VersionMajor<<16 | VersionMinor
)

// MigrateInfoTypeNone is what MIGRATE_INFO_TYPE returns: 2, "Trusted OS is
// either not present or does not require migration" (DEN0022D.b
// "MIGRATE_INFO_TYPE"). With it CPU_OFF never needs to return DENIED.
const MigrateInfoTypeNone uint64 = 2

// CPUSuspendFeatures is what PSCI_FEATURES(CPU_SUSPEND) returns
// (DEN0022D.b "PSCI_FEATURES", feature flags for CPU_SUSPEND): bit 1 = 0,
// the original power_state format; bit 0 = 0, OS-initiated mode not
// supported (platform-coordinated only). KVM reports the same.
const CPUSuspendFeatures uint64 = 0

// MPIDR affinity masks: Aff3 [39:32], Aff2 [23:16], Aff1 [15:8], Aff0 [7:0].
// CPU_ON's target_cpu and AFFINITY_INFO's target_affinity carry only these
// fields (DEN0022D.b "CPU_ON", "AFFINITY_INFO": the other bits must be
// zero); this package masks the other bits off rather than rejecting them.
// An SMC32 caller passes 32 bits and so cannot name Aff3.
const (
	AffinityMask   uint64 = 0xFF_00FF_FFFF
	AffinityMask32 uint64 = 0x00_00FF_FFFF
)

// Range is one SMCCC filter range: nr_functions IDs starting at base, as in
// struct kvm_smccc_filter.
type Range struct {
	Base  uint32
	Count uint32
}

// FilterRanges returns the two SMCCC filter ranges that forward every PSCI
// call to userspace: {0x8400_0000, 0x20} and {0xC400_0000, 0x20}. The slice
// is new on every call.
func FilterRanges() []Range {
	return []Range{{Base32, RangeLen}, {Base64, RangeLen}}
}

// InRange reports whether fid lies in one of the [FilterRanges].
func InRange(fid uint32) bool {
	return (fid >= Base32 && fid < Base32+RangeLen) ||
		(fid >= Base64 && fid < Base64+RangeLen)
}

// Is64 reports whether fid uses the SMC64/HVC64 calling convention (bit 30,
// SMCCC DEN0028). For SMC32 calls only the low 32 bits of each argument
// register are significant, and Handle ignores the rest.
func Is64(fid uint32) bool { return fid&smc64Bit != 0 }

// Name returns the function's name for reports. The scheme: the name DEN0022
// gives the function ("CPU_ON", "PSCI_VERSION", "SYSTEM_RESET2"), the same
// for its SMC32 and SMC64 IDs (use [Is64] to split them); "UNKNOWN_0x%08X"
// (the full ID in upper-case hex) for an ID in the PSCI ranges that names no
// function, such as 0xC400_0000 or 0x8400_001F; "NOT_PSCI" for any other
// ID. The set of names is bounded (at most 64 unknown ones), so a guest
// cannot blow up the label set of a metric keyed by Name.
func Name(fid uint32) string {
	switch fid {
	case FnPSCIVersion:
		return "PSCI_VERSION"
	case FnCPUSuspend, FnCPUSuspend64:
		return "CPU_SUSPEND"
	case FnCPUOff:
		return "CPU_OFF"
	case FnCPUOn, FnCPUOn64:
		return "CPU_ON"
	case FnAffinityInfo, FnAffinityInfo64:
		return "AFFINITY_INFO"
	case FnMigrate, FnMigrate64:
		return "MIGRATE"
	case FnMigrateInfoType:
		return "MIGRATE_INFO_TYPE"
	case FnMigrateInfoUpCPU, FnMigrateInfoUpCPU64:
		return "MIGRATE_INFO_UP_CPU"
	case FnSystemOff:
		return "SYSTEM_OFF"
	case FnSystemReset:
		return "SYSTEM_RESET"
	case FnPSCIFeatures:
		return "PSCI_FEATURES"
	case FnCPUFreeze:
		return "CPU_FREEZE"
	case FnCPUDefaultSuspend, FnCPUDefaultSuspend64:
		return "CPU_DEFAULT_SUSPEND"
	case FnNodeHWState, FnNodeHWState64:
		return "NODE_HW_STATE"
	case FnSystemSuspend, FnSystemSuspend64:
		return "SYSTEM_SUSPEND"
	case FnSetSuspendMode:
		return "PSCI_SET_SUSPEND_MODE"
	case FnStatResidency, FnStatResidency64:
		return "PSCI_STAT_RESIDENCY"
	case FnStatCount, FnStatCount64:
		return "PSCI_STAT_COUNT"
	case FnSystemReset2, FnSystemReset2_64:
		return "SYSTEM_RESET2"
	case FnMemProtect:
		return "MEM_PROTECT"
	case FnMemProtectCheckRange, FnMemProtectCheck64:
		return "MEM_PROTECT_CHECK_RANGE"
	case FnSystemOff2, FnSystemOff2_64:
		return "SYSTEM_OFF2"
	}
	if InRange(fid) {
		return "UNKNOWN_0x" + hex32(fid)
	}
	return "NOT_PSCI"
}

func hex32(v uint32) string {
	s := strconv.FormatUint(uint64(v), 16)
	b := []byte("00000000")
	copy(b[8-len(s):], s)
	for i, c := range b {
		if c >= 'a' && c <= 'f' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// Status is a PSCI return code (DEN0022D.b chapter 5, "Return error codes").
// The guest receives it in X0 sign-extended to 64 bits; see [Status.X0].
type Status int32

// PSCI return codes (DEN0022D.b "Return error codes" table).
const (
	Success           Status = 0
	NotSupported      Status = -1
	InvalidParameters Status = -2
	Denied            Status = -3
	AlreadyOn         Status = -4
	OnPending         Status = -5
	InternalFailure   Status = -6
	NotPresent        Status = -7
	Disabled          Status = -8
	InvalidAddress    Status = -9
)

// X0 returns the register value for s: the int32 code sign-extended to 64
// bits (NOT_SUPPORTED is 0xFFFF_FFFF_FFFF_FFFF). An SMC32 caller reads W0,
// the low 32 bits, which hold the same int32.
func (s Status) X0() uint64 { return uint64(int64(s)) }

// String returns the spec's name for s, e.g. "NOT_SUPPORTED".
func (s Status) String() string {
	switch s {
	case Success:
		return "SUCCESS"
	case NotSupported:
		return "NOT_SUPPORTED"
	case InvalidParameters:
		return "INVALID_PARAMETERS"
	case Denied:
		return "DENIED"
	case AlreadyOn:
		return "ALREADY_ON"
	case OnPending:
		return "ON_PENDING"
	case InternalFailure:
		return "INTERNAL_FAILURE"
	case NotPresent:
		return "NOT_PRESENT"
	case Disabled:
		return "DISABLED"
	case InvalidAddress:
		return "INVALID_ADDRESS"
	}
	return "Status(" + strconv.Itoa(int(s)) + ")"
}

// State is a vCPU's power state. Its values are the codes AFFINITY_INFO
// returns for a core (DEN0022D.b "AFFINITY_INFO"): 0 ON, 1 OFF, 2 ON_PENDING.
type State uint8

// vCPU power states.
const (
	StateOn        State = 0 // running guest code (or parked by the VMM in a suspend)
	StateOff       State = 1 // waiting in userspace for a CPU_ON
	StateOnPending State = 2 // a CPU_ON succeeded; the VMM has not yet called Started
)

// String returns "ON", "OFF" or "ON_PENDING".
func (s State) String() string {
	switch s {
	case StateOn:
		return "ON"
	case StateOff:
		return "OFF"
	case StateOnPending:
		return "ON_PENDING"
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// Valid reports whether s is one of the three states.
func (s State) Valid() bool { return s <= StateOnPending }

// Args is how many argument registers (X1, X2, ...) function fid reads, so a
// VMM fetches no more registers than the call uses (DEN0022 chapter 5, each
// function's parameter list). Unknown IDs report 0: they are answered
// NOT_SUPPORTED without looking at arguments.
func Args(fid uint32) int {
	switch fid &^ smc64Bit {
	case FnCPUSuspend, FnCPUOn:
		return 3 // power_state/target, entry point, context_id
	case FnAffinityInfo, FnSystemReset2, FnSystemSuspend, FnSystemOff2:
		return 2
	case FnMigrate, FnPSCIFeatures:
		return 1
	}
	return 0
}
