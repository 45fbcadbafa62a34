package psci

import (
	"errors"
	"fmt"
	"sync"
)

// Error is the type of this package's sentinel errors; they are constants,
// compare them with errors.Is.
type Error string

func (e Error) Error() string { return string(e) }

// Errors returned for VMM-side misuse. A guest cannot cause them.
const (
	// ErrNoSuchCPU: a vCPU index outside [0, NumCPUs).
	ErrNoSuchCPU Error = "psci: no such vCPU"
	// ErrCallerNotOn: Handle was called for a vCPU the Machine holds OFF or
	// ON_PENDING. Such a vCPU cannot be executing guest code, so the VMM
	// either ran it without a start, forgot Started, or let a call from
	// before a Reset through. The call is dropped: no state changes.
	ErrCallerNotOn Error = "psci: calling vCPU is not ON"
	// ErrNotPending: Started was called for a vCPU that is not ON_PENDING.
	ErrNotPending Error = "psci: vCPU is not ON_PENDING"
)

// Action is what the VMM must do after a call, besides writing X0.
type Action uint8

// Actions. See the package documentation for the exact VMM protocol.
const (
	// ActionNone: write X0 and re-enter the caller.
	ActionNone Action = iota
	// ActionStartCPU: CPU_ON succeeded. Write X0 to the caller and
	// re-enter it; start vCPU Result.Target at Result.Entry with
	// X0 = Result.ContextID, then call Started(Target).
	ActionStartCPU
	// ActionCPUOff: CPU_OFF. The caller is now OFF; park it in userspace
	// until a start for it arrives. Do not re-enter it.
	ActionCPUOff
	// ActionSuspend: CPU_SUSPEND. Write X0 (SUCCESS); the caller may be
	// held until a wake-up event (an interrupt) before it is re-entered,
	// like WFI. Re-entering at once is also correct (an early wake-up).
	ActionSuspend
	// ActionSystemOff: SYSTEM_OFF. Power the VM off.
	ActionSystemOff
	// ActionSystemReset: SYSTEM_RESET or SYSTEM_RESET2. Stop every vCPU,
	// Reset the Machine, reboot the VM.
	ActionSystemReset
)

// String returns a short name such as "start_cpu".
func (a Action) String() string {
	switch a {
	case ActionNone:
		return "none"
	case ActionStartCPU:
		return "start_cpu"
	case ActionCPUOff:
		return "cpu_off"
	case ActionSuspend:
		return "suspend"
	case ActionSystemOff:
		return "system_off"
	case ActionSystemReset:
		return "system_reset"
	}
	return fmt.Sprintf("Action(%d)", uint8(a))
}

// Result is the outcome of one call: the value for the caller's X0 (PSCI
// functions return in X0 alone) and the Action for the VMM with its
// parameters. Fields that do not belong to Action are zero.
type Result struct {
	X0 uint64

	Action Action

	// ActionStartCPU: the vCPU to start, its entry point (PC) and the
	// context_id it receives in X0. For an SMC32 CPU_ON both are the
	// zero-extended low 32 bits of the caller's X2 and X3.
	Target    int
	Entry     uint64
	ContextID uint64

	// ActionSuspend: the power_state parameter (original format).
	PowerState uint32

	// ActionSystemReset: Reset2 is false for SYSTEM_RESET (a cold reset) and
	// true for SYSTEM_RESET2, whose reset_type (0 = SYSTEM_WARM_RESET, bit 31
	// set = vendor-specific) and cookie are in ResetType and Cookie.
	Reset2    bool
	ResetType uint32
	Cookie    uint64
}

// Rejected reports whether the call was refused for its arguments, and
// with which code: INVALID_PARAMETERS (a target that matches no vCPU,
// reserved bits set, an affinity level above 3) or INVALID_ADDRESS (an
// entry point [Config.ValidEntry] refuses). A well-behaved guest never
// sees either, so a VMM counts them as guest misbehaviour. NOT_SUPPORTED
// (an unimplemented function) and the answers a race can give (ALREADY_ON,
// ON_PENDING) are not rejections. No successful result has these X0
// values: AFFINITY_INFO returns 0..2, the others 0 or small positive
// numbers (DEN0022D.b chapter 5).
func (r Result) Rejected() (Status, bool) {
	if r.Action != ActionNone {
		return 0, false
	}
	switch r.X0 {
	case InvalidParameters.X0():
		return InvalidParameters, true
	case InvalidAddress.X0():
		return InvalidAddress, true
	}
	return 0, false
}

// Config describes the vCPUs a Machine manages.
type Config struct {
	// MPIDRs holds each vCPU's MPIDR_EL1, index = vCPU id. Only the
	// affinity fields count (see AffinityMask): raw MPIDR_EL1 values, with
	// bit 31 (RES1) set, are fine. The affinity values must be unique.
	MPIDRs []uint64
	// BootCPUs lists the vCPUs that are ON at power-on and after Reset; the
	// others start OFF. Empty means vCPU 0 alone.
	BootCPUs []int
	// ValidEntry, if not nil, reports whether a guest physical address may
	// be an entry point (for instance: it lies in guest RAM). CPU_ON, and
	// CPU_SUSPEND for a powerdown state, return INVALID_ADDRESS when it
	// says no (DEN0022D.b §5.6.2 CPU_ON "Caller responsibilities"). It is
	// called without the Machine's lock held, from many goroutines.
	ValidEntry func(addr uint64) bool
	// ExternalFeatures lists function IDs outside the PSCI ranges that the
	// hypervisor implements for the guest, for which PSCI_FEATURES returns
	// 0. KVM answers SMCCC_VERSION itself, and a guest asks PSCI_FEATURES
	// about it before using SMCCC 1.1 (SMCCC_ARCH_FEATURES and the
	// ARCH_WORKAROUND calls): pass []uint32{SMCCCVersionFID}.
	ExternalFeatures []uint32
	// PendingAsOn makes a vCPU that is ON_PENDING look ON to the guest:
	// CPU_ON then returns ALREADY_ON instead of ON_PENDING and AFFINITY_INFO
	// returns ON instead of ON_PENDING. DEN0022D.b lets an implementation
	// whose CPU_ON completes asynchronously report ON_PENDING, which is what
	// this package does by default; KVM's in-kernel PSCI has no pending
	// window and never does, and kvm-unit-tests' arm/psci "cpu-on" test
	// accepts only SUCCESS once and ALREADY_ON for every other racing call.
	// Set this to answer racing CPU_ON calls as KVM does.
	PendingAsOn bool
}

// Machine is the PSCI state of one VM. It is safe for concurrent use by
// every vCPU goroutine; the methods that read or change power states take
// one mutex (none is on a hot path).
type Machine struct {
	// Immutable after New.
	mpidr       []uint64       // masked with AffinityMask
	byMPIDR     map[uint64]int // masked MPIDR -> vCPU index
	initial     []State
	validEntry  func(uint64) bool
	external    map[uint32]struct{}
	pendingAsOn bool

	mu    sync.Mutex
	state []State
}

// New builds a Machine from cfg. It fails if there are no vCPUs, if two
// MPIDRs have the same affinity, if a boot CPU index is out of range, or if
// an external feature ID lies in the PSCI ranges.
func New(cfg Config) (*Machine, error) {
	n := len(cfg.MPIDRs)
	if n == 0 {
		return nil, errors.New("psci: no vCPUs")
	}
	m := &Machine{
		mpidr:       make([]uint64, n),
		byMPIDR:     make(map[uint64]int, n),
		initial:     make([]State, n),
		state:       make([]State, n),
		validEntry:  cfg.ValidEntry,
		external:    make(map[uint32]struct{}, len(cfg.ExternalFeatures)),
		pendingAsOn: cfg.PendingAsOn,
	}
	for k, raw := range cfg.MPIDRs {
		aff := raw & AffinityMask
		if j, dup := m.byMPIDR[aff]; dup {
			return nil, fmt.Errorf("psci: vCPUs %d and %d share affinity %#x", j, k, aff)
		}
		m.mpidr[k] = aff
		m.byMPIDR[aff] = k
		m.initial[k] = StateOff
	}
	boot := cfg.BootCPUs
	if len(boot) == 0 {
		boot = []int{0}
	}
	for _, k := range boot {
		if k < 0 || k >= n {
			return nil, fmt.Errorf("psci: boot vCPU %d: %w (have %d)", k, ErrNoSuchCPU, n)
		}
		m.initial[k] = StateOn
	}
	for _, fid := range cfg.ExternalFeatures {
		if InRange(fid) {
			return nil, fmt.Errorf("psci: external feature %#x lies in the PSCI ranges", fid)
		}
		m.external[fid] = struct{}{}
	}
	copy(m.state, m.initial)
	return m, nil
}

// NumCPUs returns the number of vCPUs.
func (m *Machine) NumCPUs() int { return len(m.mpidr) }

// MPIDR returns vCPU k's affinity (its MPIDR with only the affinity fields).
func (m *Machine) MPIDR(k int) (uint64, error) {
	if k < 0 || k >= len(m.mpidr) {
		return 0, ErrNoSuchCPU
	}
	return m.mpidr[k], nil
}

// State returns vCPU k's power state.
func (m *Machine) State(k int) (State, error) {
	if k < 0 || k >= len(m.mpidr) {
		return 0, ErrNoSuchCPU
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.state[k], nil
}

// Snapshot is a consistent copy of every vCPU's state, for metrics.
type Snapshot struct {
	States             []State // index = vCPU id; the caller owns it
	On, OnPending, Off int
}

// Snapshot returns the states of all vCPUs, taken atomically.
func (m *Machine) Snapshot() Snapshot {
	m.mu.Lock()
	s := Snapshot{States: append([]State(nil), m.state...)}
	m.mu.Unlock()
	for _, st := range s.States {
		switch st {
		case StateOn:
			s.On++
		case StateOnPending:
			s.OnPending++
		case StateOff:
			s.Off++
		}
	}
	return s
}

// Started records that vCPU k, started by a CPU_ON, is about to enter the
// guest: ON_PENDING -> ON. The VMM calls it from k's goroutine after setting
// its registers and before its first KVM_RUN. It fails, changing nothing, if
// k is not ON_PENDING.
func (m *Machine) Started(k int) error {
	if k < 0 || k >= len(m.mpidr) {
		return ErrNoSuchCPU
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state[k] != StateOnPending {
		return fmt.Errorf("psci: Started(%d) in state %v: %w", k, m.state[k], ErrNotPending)
	}
	m.state[k] = StateOn
	return nil
}

// Reset returns every vCPU to its power-on state (the BootCPUs ON, the rest
// OFF), for a guest reboot. The VMM must first stop every vCPU goroutine and
// discard start requests still in their mailboxes.
func (m *Machine) Reset() {
	m.mu.Lock()
	copy(m.state, m.initial)
	m.mu.Unlock()
}

// status makes a Result that returns code s and asks for nothing.
func status(s Status) Result { return Result{X0: s.X0()} }

// Handle services PSCI call fid made by vCPU caller with arguments x1..x3
// (the caller's X1..X3). It never panics: an unknown fid, one outside the
// PSCI ranges, or any argument values give a defined PSCI answer. A non-nil
// error reports VMM misuse (ErrNoSuchCPU: X0 = NOT_SUPPORTED;
// ErrCallerNotOn: X0 = INTERNAL_FAILURE); the Action is then ActionNone and
// no state changed.
func (m *Machine) Handle(caller int, fid uint32, x1, x2, x3 uint64) (Result, error) {
	if caller < 0 || caller >= len(m.mpidr) {
		return status(NotSupported), fmt.Errorf("psci: caller %d: %w", caller, ErrNoSuchCPU)
	}
	// SMCCC: an SMC32/HVC32 function sees only W1..W3.
	affMask := AffinityMask
	if !Is64(fid) {
		x1, x2, x3 = uint64(uint32(x1)), uint64(uint32(x2)), uint64(uint32(x3))
		affMask = AffinityMask32
	}

	// The entry-point predicate belongs to the VMM: call it before locking.
	entryOK := true
	switch fid {
	case FnCPUOn, FnCPUOn64:
		entryOK = m.entryValid(x2)
	case FnCPUSuspend, FnCPUSuspend64:
		if uint32(x1)&powerStateTypeBit != 0 {
			entryOK = m.entryValid(x2)
		}
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state[caller] != StateOn {
		return status(InternalFailure), fmt.Errorf("psci: %s from vCPU %d in state %v: %w",
			Name(fid), caller, m.state[caller], ErrCallerNotOn)
	}

	switch fid {
	case FnPSCIVersion:
		// DEN0022D.b "PSCI_VERSION": bits [31:16] major, [15:0] minor.
		return Result{X0: uint64(Version)}, nil
	case FnCPUSuspend, FnCPUSuspend64:
		return cpuSuspend(uint32(x1), entryOK), nil
	case FnCPUOff:
		return m.cpuOff(caller), nil
	case FnCPUOn, FnCPUOn64:
		return m.cpuOn(x1&affMask, x2, x3, entryOK), nil
	case FnAffinityInfo, FnAffinityInfo64:
		return m.affinityInfo(x1&affMask, uint32(x2)), nil
	case FnMigrateInfoType:
		return Result{X0: MigrateInfoTypeNone}, nil
	case FnSystemOff:
		// DEN0022D.b "SYSTEM_OFF": does not return. X0 is preloaded with
		// INTERNAL_FAILURE in case the VMM resumes the caller anyway.
		return Result{X0: InternalFailure.X0(), Action: ActionSystemOff}, nil
	case FnSystemReset:
		// DEN0022D.b "SYSTEM_RESET": a cold reset; does not return.
		return Result{X0: InternalFailure.X0(), Action: ActionSystemReset}, nil
	case FnSystemReset2, FnSystemReset2_64:
		return systemReset2(uint32(x1), x2), nil
	case FnPSCIFeatures:
		return m.features(uint32(x1)), nil
	}
	// MIGRATE and MIGRATE_INFO_UP_CPU: with MIGRATE_INFO_TYPE = 2 there is
	// nothing to migrate, so they are not implemented (KVM does the same).
	// SYSTEM_SUSPEND, SYSTEM_OFF2 and the other optional functions are not
	// implemented either; IDs that name no PSCI function land here too.
	return status(NotSupported), nil
}

func (m *Machine) entryValid(addr uint64) bool {
	return m.validEntry == nil || m.validEntry(addr)
}

// CPU_SUSPEND power_state, original format (DEN0022D.b §5.4 CPU_SUSPEND,
// "power_state parameter"; the format PSCI_FEATURES reports): StateID [15:0], StateType [16] (0 standby or
// retention, 1 powerdown), PowerLevel [25:24]; bits [23:17] and [31:26] are
// reserved and must be zero.
const (
	powerStateTypeBit  uint32 = 1 << 16
	powerStateReserved uint32 = 0xFC00_0000 | 0x00FE_0000
)

// cpuSuspend implements CPU_SUSPEND (DEN0022D.b §5.4) in its simplest
// correct form. Every valid request, whatever its StateID and PowerLevel, is
// served as a standby of the calling core that returns SUCCESS to the
// instruction after the call: the VMM treats it like WFI. A powerdown
// request is served the same way. §5.4 allows this: the implementation may
// downgrade a powerdown request to a standby state, in which case the call
// returns SUCCESS to the caller instead of resuming at the entry point, and
// callers must cope with that (as they must with an early wake-up). KVM's
// in-kernel PSCI makes the same choice, citing DEN0022A §5.4.2 clause 3.
// The core stays ON throughout.
func cpuSuspend(ps uint32, entryOK bool) Result {
	if ps&powerStateReserved != 0 {
		return status(InvalidParameters)
	}
	if ps&powerStateTypeBit != 0 && !entryOK {
		// The powerdown entry point is checked even though the downgrade
		// never uses it: the caller asked for a state that would.
		return status(InvalidAddress)
	}
	return Result{X0: Success.X0(), Action: ActionSuspend, PowerState: ps}
}

// cpuOff implements CPU_OFF (DEN0022D.b §5.5). It returns only DENIED, and
// only when a uniprocessor Trusted OS lives on the calling core; there is no
// Trusted OS here (MIGRATE_INFO_TYPE = 2), so CPU_OFF always succeeds, also
// for the last core that is ON.
func (m *Machine) cpuOff(caller int) Result {
	m.state[caller] = StateOff
	return Result{X0: InternalFailure.X0(), Action: ActionCPUOff}
}

// cpuOn implements CPU_ON (DEN0022D.b §5.6). Checks run in Trusted
// Firmware-A's order: target, then entry point, then target state. KVM's
// in-kernel PSCI (kvm_psci_vcpu_on) checks the target and its state but
// never the entry point, so there a bad entry point gets ALREADY_ON or
// starts the vCPU where mvm answers INVALID_ADDRESS.
// The lock is held, so of many racing calls for one OFF target exactly one
// sees OFF and succeeds.
func (m *Machine) cpuOn(target, entry, ctx uint64, entryOK bool) Result {
	k, ok := m.byMPIDR[target]
	if !ok {
		return status(InvalidParameters)
	}
	if !entryOK {
		// INVALID_ADDRESS since PSCI 1.0 (§5.6.2; INVALID_PARAMETERS before).
		return status(InvalidAddress)
	}
	switch m.state[k] {
	case StateOn:
		return status(AlreadyOn)
	case StateOnPending:
		if m.pendingAsOn {
			return status(AlreadyOn)
		}
		return status(OnPending)
	}
	m.state[k] = StateOnPending
	return Result{X0: Success.X0(), Action: ActionStartCPU, Target: k, Entry: entry, ContextID: ctx}
}

// levelMask returns the affinity fields at or above level (0..3).
func levelMask(level uint32) uint64 {
	switch level {
	case 0:
		return AffinityMask
	case 1:
		return AffinityMask &^ 0xFF
	case 2:
		return AffinityMask &^ 0xFFFF
	default:
		return AffinityMask &^ 0xFF_FFFF
	}
}

// affinityInfo implements AFFINITY_INFO (DEN0022D.b §5.7). Level 0 asks
// about one core. PSCI 1.0 made levels above 0 optional; rather than reject
// them (as Trusted Firmware-A does) this implementation answers for the
// whole affinity instance, the fields below lowest_affinity_level being
// ignored, with the spec's meanings: ON if any core in it is ON, else
// ON_PENDING if any is ON_PENDING, else OFF (KVM aggregates the same way).
// Levels above 3 do not exist: INVALID_PARAMETERS. So is an affinity that
// matches no vCPU.
func (m *Machine) affinityInfo(target uint64, level uint32) Result {
	if level > 3 {
		return status(InvalidParameters)
	}
	lm := levelMask(level)
	target &= lm
	found, on, pending := false, false, false
	for k, aff := range m.mpidr {
		if aff&lm != target {
			continue
		}
		found = true
		switch m.state[k] {
		case StateOn:
			on = true
		case StateOnPending:
			pending = true
		}
	}
	switch {
	case !found:
		return status(InvalidParameters)
	case on, pending && m.pendingAsOn:
		return Result{X0: uint64(StateOn)}
	case pending:
		return Result{X0: uint64(StateOnPending)}
	}
	return Result{X0: uint64(StateOff)}
}

// SYSTEM_RESET2 reset_type (DEN0022D.b "SYSTEM_RESET2"): bit 31 set means a
// vendor-specific reset; with bit 31 clear, 0 is SYSTEM_WARM_RESET and every
// other value is reserved.
const resetTypeVendor uint32 = 1 << 31

func systemReset2(resetType uint32, cookie uint64) Result {
	if resetType&resetTypeVendor == 0 && resetType != 0 {
		return status(InvalidParameters)
	}
	// Vendor-specific types are passed on with their cookie for the VMM to
	// interpret (KVM forwards them the same way); it may treat them as a
	// plain reset.
	return Result{
		X0:        InternalFailure.X0(),
		Action:    ActionSystemReset,
		Reset2:    true,
		ResetType: resetType,
		Cookie:    cookie,
	}
}

// features implements PSCI_FEATURES (DEN0022D.b "PSCI_FEATURES"): 0, or the
// CPU_SUSPEND feature flags, for every function Handle implements;
// NOT_SUPPORTED for every other ID. It must agree with Handle's switch.
func (m *Machine) features(fid uint32) Result {
	switch fid {
	case FnCPUSuspend, FnCPUSuspend64:
		return Result{X0: CPUSuspendFeatures}
	case FnPSCIVersion, FnCPUOff, FnCPUOn, FnCPUOn64,
		FnAffinityInfo, FnAffinityInfo64, FnMigrateInfoType,
		FnSystemOff, FnSystemReset, FnPSCIFeatures,
		FnSystemReset2, FnSystemReset2_64:
		return Result{X0: 0}
	}
	if _, ok := m.external[fid]; ok {
		return Result{X0: 0}
	}
	return status(NotSupported)
}
