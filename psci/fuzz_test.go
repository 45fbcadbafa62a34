package psci

import (
	"encoding/binary"
	"errors"
	"slices"
	"strconv"
	"testing"
)

// fuzzFIDs are the IDs the fuzzer picks from most of the time: every PSCI
// function, some in-range IDs that name none, and a few outside.
var fuzzFIDs = [...]uint32{
	FnPSCIVersion, FnCPUSuspend, FnCPUSuspend64, FnCPUOff, FnCPUOn, FnCPUOn64,
	FnAffinityInfo, FnAffinityInfo64, FnMigrate, FnMigrate64, FnMigrateInfoType,
	FnMigrateInfoUpCPU, FnMigrateInfoUpCPU64, FnSystemOff, FnSystemReset,
	FnPSCIFeatures, FnCPUFreeze, FnCPUDefaultSuspend, FnCPUDefaultSuspend64,
	FnNodeHWState, FnNodeHWState64, FnSystemSuspend, FnSystemSuspend64,
	FnSetSuspendMode, FnStatResidency, FnStatResidency64, FnStatCount,
	FnStatCount64, FnSystemReset2, FnSystemReset2_64, FnMemProtect,
	FnMemProtectCheckRange, FnMemProtectCheck64, FnSystemOff2, FnSystemOff2_64,
	0xC4000000, 0xC4000002, 0x8400001F, 0xC400001F, SMCCCVersionFID, 0x84000020, 0,
	// CPU_ON and AFFINITY_INFO again, so state changes are frequent.
	FnCPUOn, FnCPUOn64, FnCPUOn64, FnCPUOff, FnAffinityInfo64,
}

// implementedFIDs are the functions Handle implements (PSCI_FEATURES != NOT_SUPPORTED).
var implementedFIDs = [...]uint32{
	FnPSCIVersion, FnCPUSuspend, FnCPUSuspend64, FnCPUOff, FnCPUOn, FnCPUOn64,
	FnAffinityInfo, FnAffinityInfo64, FnMigrateInfoType, FnSystemOff,
	FnSystemReset, FnPSCIFeatures, FnSystemReset2, FnSystemReset2_64,
}

type fuzzInput struct{ b []byte }

func (in *fuzzInput) byte() byte {
	if len(in.b) == 0 {
		return 0
	}
	v := in.b[0]
	in.b = in.b[1:]
	return v
}

func (in *fuzzInput) u64() uint64 {
	var buf [8]byte
	n := copy(buf[:], in.b)
	in.b = in.b[n:]
	return binary.LittleEndian.Uint64(buf[:])
}

// fuzzMPIDR lays vCPUs out either like KVM (Aff0/Aff1) or across Aff3, so
// SMC32 calls meet vCPUs they cannot name. Bit 31 is set on odd vCPUs: raw
// MPIDR_EL1 values must be accepted.
func fuzzMPIDR(i int, aff3 bool) uint64 {
	v := kvmMPIDR(i) &^ (1 << 31)
	if aff3 {
		v = uint64(i&3) | uint64(i>>2)<<32
	}
	if i%2 == 1 {
		v |= 1 << 31
	}
	return v
}

// FuzzHandle drives a Machine with an arbitrary sequence of calls, Started
// and Reset, decoded from the input, and checks after every step that
//   - nothing panics and every state stays ON, OFF or ON_PENDING;
//   - Handle's errors come only from VMM misuse and change nothing;
//   - only CPU_ON (OFF -> ON_PENDING of the vCPU with that affinity, one of
//     those configured) and CPU_OFF (caller -> OFF) change states, and
//     every other call leaves them alone;
//   - results are values the spec allows for that function, and each
//     Action comes only from its function;
//   - Started succeeds exactly from ON_PENDING, and Reset restores the
//     power-on states.
func FuzzHandle(f *testing.F) {
	// Seeds: a config byte, a boot mask, then operations as the decoder
	// below reads them.
	idx := func(fid uint32) byte { return byte(slices.Index(fuzzFIDs[:], fid)) }
	handle := func(caller byte, fid uint32, x1vCPU byte, x2sel byte) []byte {
		// x1: a configured vCPU's MPIDR; x2 < 192: no extra bytes; x3: 0.
		return append([]byte{0, caller, idx(fid), x1vCPU<<1 | 1, x2sel}, make([]byte, 8)...)
	}
	seq := func(parts ...[]byte) []byte { return slices.Concat(parts...) }
	f.Add([]byte{0x03, 0x01})
	f.Add(seq([]byte{0x43, 0x01}, // 4 vCPUs, RAM check, vCPU 0 on
		handle(0, FnCPUOn64, 1, 100),      // CPU_ON vCPU 1, entry in RAM
		handle(0, FnCPUOn64, 1, 100),      // ON_PENDING
		handle(0, FnAffinityInfo64, 1, 0), // ON_PENDING
		[]byte{5, 1},                      // Started(1)
		handle(1, FnCPUOff, 0, 0),         // vCPU 1 off
		handle(1, FnPSCIVersion, 0, 0),    // from an OFF vCPU
		handle(0, FnCPUOn, 1, 5),          // entry outside RAM
		handle(0, FnCPUOn, 1, 101),        // SMC32 CPU_ON again
		[]byte{6},                         // Reset
	))
	f.Add(seq([]byte{0x37, 0x81}, // 8 vCPUs across Aff3, PendingAsOn
		handle(0, FnCPUOn, 5, 100),        // SMC32 cannot reach Aff3=1
		handle(0, FnCPUOn64, 5, 100),      // SMC64 can
		handle(7, FnCPUOn64, 5, 100),      // vCPU 7 is ON (boot mask bit 7)
		handle(0, FnAffinityInfo64, 5, 3), // level 3
		handle(0, FnSystemReset2, 0, 1),   // reserved reset type
	))
	f.Add([]byte{0x57, 0xff, 0, 0, 4, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0xfa, 0x05, 1, 0xff, 0xe1, 2, 3, 4, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9})

	f.Fuzz(func(t *testing.T, data []byte) {
		in := &fuzzInput{data}
		cfgByte, bootMask := in.byte(), in.byte()
		n := 1 + int(cfgByte%8)
		aff3 := cfgByte&0x20 != 0
		cfg := Config{
			MPIDRs:      make([]uint64, n),
			PendingAsOn: cfgByte&0x10 != 0,
		}
		if cfgByte&0x40 != 0 {
			cfg.ValidEntry = inRAM
		}
		if cfgByte&0x80 != 0 {
			cfg.ExternalFeatures = []uint32{SMCCCVersionFID}
		}
		for i := range cfg.MPIDRs {
			cfg.MPIDRs[i] = fuzzMPIDR(i, aff3)
		}
		for i := range n {
			if bootMask&(1<<i) != 0 {
				cfg.BootCPUs = append(cfg.BootCPUs, i)
			}
		}
		m, err := New(cfg)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		initial := m.Snapshot().States
		indexOf := func(target uint64) int {
			for k, raw := range cfg.MPIDRs {
				if raw&AffinityMask == target {
					return k
				}
			}
			return -1
		}

		for step := 0; len(in.b) > 0 && step < 512; step++ {
			pre := m.Snapshot().States
			switch op := in.byte() % 8; op {
			case 5: // Started
				k := int(in.byte()) % (n + 1)
				err := m.Started(k)
				post := m.Snapshot().States
				if k == n {
					if !errors.Is(err, ErrNoSuchCPU) || !slices.Equal(pre, post) {
						t.Fatalf("Started(%d) out of range: %v", k, err)
					}
					break
				}
				if (err == nil) != (pre[k] == StateOnPending) {
					t.Fatalf("Started(%d) from %v: err = %v", k, pre[k], err)
				}
				if err == nil {
					pre[k] = StateOn
				}
				if !slices.Equal(pre, post) {
					t.Fatalf("Started(%d): states %v, want %v", k, post, pre)
				}
			case 6:
				m.Reset()
				if post := m.Snapshot().States; !slices.Equal(post, initial) {
					t.Fatalf("Reset: states %v, want %v", post, initial)
				}
			default: // Handle
				callerByte := in.byte()
				caller := int(callerByte) % (n + 1) // n: out of range
				if callerByte == 0xFF {
					caller = -1
				}
				var fid uint32
				if sel := in.byte(); sel < 224 {
					fid = fuzzFIDs[int(sel)%len(fuzzFIDs)]
				} else {
					fid = uint32(in.u64())
				}
				var x1 uint64
				if sel := in.byte(); sel&1 == 1 {
					// A configured vCPU's raw MPIDR, perhaps with junk above.
					x1 = cfg.MPIDRs[int(sel>>1)%n]
					if sel&0x80 != 0 {
						x1 |= in.u64() &^ AffinityMask
					}
				} else if sel&2 == 2 {
					// A function ID, for PSCI_FEATURES.
					x1 = uint64(fuzzFIDs[int(in.byte())%len(fuzzFIDs)])
				} else {
					x1 = in.u64()
				}
				var x2 uint64
				switch sel := in.byte(); {
				case sel < 96:
					x2 = uint64(sel % 6) // affinity levels, reset types
				case sel < 192:
					x2 = ramBase + uint64(sel)*0x1000
				default:
					x2 = in.u64()
				}
				x3 := in.u64()
				checkHandle(t, m, cfg, indexOf, pre, caller, fid, x1, x2, x3)
			}
			s := m.Snapshot()
			if len(s.States) != n || s.On+s.Off+s.OnPending != n {
				t.Fatalf("snapshot %+v for %d vCPUs", s, n)
			}
			for k, st := range s.States {
				if !st.Valid() {
					t.Fatalf("vCPU %d in invalid state %d", k, st)
				}
			}
		}
	})
}

func checkHandle(t *testing.T, m *Machine, cfg Config, indexOf func(uint64) int,
	pre []State, caller int, fid uint32, x1, x2, x3 uint64) {
	t.Helper()
	n := len(pre)
	r, err := m.Handle(caller, fid, x1, x2, x3)
	post := m.Snapshot().States
	where := func() string {
		return Name(fid) + " from vCPU " + strconv.Itoa(caller)
	}
	// VMM misuse: an error, nothing done.
	if caller < 0 || caller >= n {
		if !errors.Is(err, ErrNoSuchCPU) || r != (Result{X0: NotSupported.X0()}) || !slices.Equal(pre, post) {
			t.Fatalf("caller %d out of range: %+v, %v", caller, r, err)
		}
		return
	}
	if pre[caller] != StateOn {
		if !errors.Is(err, ErrCallerNotOn) || r != (Result{X0: InternalFailure.X0()}) || !slices.Equal(pre, post) {
			t.Fatalf("%s in state %v: %+v, %v", where(), pre[caller], r, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("%s: unexpected error %v", where(), err)
	}

	is64 := Is64(fid)
	affMask := AffinityMask
	if !is64 {
		x1, x2, x3 = uint64(uint32(x1)), uint64(uint32(x2)), uint64(uint32(x3))
		affMask = AffinityMask32
	}
	expect := slices.Clone(pre) // states after the call
	wantAction := ActionNone
	switch fid {
	case FnCPUOn, FnCPUOn64:
		k := indexOf(x1 & affMask)
		switch r.X0 {
		case Success.X0():
			if k < 0 || pre[k] != StateOff {
				t.Fatalf("%s: SUCCESS for target %#x (vCPU %d) from %v", where(), x1, k, pre)
			}
			if cfg.ValidEntry != nil && !cfg.ValidEntry(x2) {
				t.Fatalf("%s: SUCCESS with entry %#x outside RAM", where(), x2)
			}
			if r.Target != k || r.Entry != x2 || r.ContextID != x3 {
				t.Fatalf("%s: start %d %#x %#x, want %d %#x %#x", where(), r.Target, r.Entry, r.ContextID, k, x2, x3)
			}
			expect[k] = StateOnPending
			wantAction = ActionStartCPU
		case InvalidParameters.X0():
			if k >= 0 {
				t.Fatalf("%s: INVALID_PARAMETERS for configured vCPU %d", where(), k)
			}
		case InvalidAddress.X0():
			if k < 0 || cfg.ValidEntry == nil || cfg.ValidEntry(x2) {
				t.Fatalf("%s: INVALID_ADDRESS for entry %#x target %d", where(), x2, k)
			}
		case AlreadyOn.X0():
			if k < 0 || !(pre[k] == StateOn || (cfg.PendingAsOn && pre[k] == StateOnPending)) {
				t.Fatalf("%s: ALREADY_ON for vCPU %d in %v", where(), k, pre)
			}
		case OnPending.X0():
			if k < 0 || pre[k] != StateOnPending || cfg.PendingAsOn {
				t.Fatalf("%s: ON_PENDING for vCPU %d in %v", where(), k, pre)
			}
		default:
			t.Fatalf("%s: X0 = %#x", where(), r.X0)
		}
	case FnCPUOff:
		expect[caller] = StateOff
		wantAction = ActionCPUOff
	case FnAffinityInfo, FnAffinityInfo64:
		level := uint32(x2)
		k := indexOf(x1 & affMask)
		switch {
		case r.X0 == InvalidParameters.X0():
			if level == 0 && k >= 0 {
				t.Fatalf("%s: INVALID_PARAMETERS for vCPU %d at level 0", where(), k)
			}
		case level > 3:
			t.Fatalf("%s: level %d answered %#x", where(), level, r.X0)
		case r.X0 > uint64(StateOnPending), cfg.PendingAsOn && r.X0 == uint64(StateOnPending):
			t.Fatalf("%s: X0 = %#x", where(), r.X0)
		case level == 0:
			want := pre[k] // k >= 0, or it would be INVALID_PARAMETERS
			if cfg.PendingAsOn && want == StateOnPending {
				want = StateOn
			}
			if r.X0 != uint64(want) {
				t.Fatalf("%s: AFFINITY_INFO(vCPU %d) = %d, state %v", where(), k, r.X0, pre[k])
			}
		}
	case FnCPUSuspend, FnCPUSuspend64:
		reserved := uint32(x1)&0xFCFE_0000 != 0 // DEN0022D.b §5.4, original format
		if reserved != (r.X0 == InvalidParameters.X0()) {
			t.Fatalf("%s: power_state %#x gave %#x", where(), uint32(x1), r.X0)
		}
		if r.X0 == Success.X0() {
			wantAction = ActionSuspend
			if r.PowerState != uint32(x1) {
				t.Fatalf("%s: power_state %#x, want %#x", where(), r.PowerState, uint32(x1))
			}
		} else if r.X0 != InvalidParameters.X0() && r.X0 != InvalidAddress.X0() {
			t.Fatalf("%s: X0 = %#x", where(), r.X0)
		}
	case FnSystemOff:
		wantAction = ActionSystemOff
	case FnSystemReset:
		wantAction = ActionSystemReset
	case FnSystemReset2, FnSystemReset2_64:
		rt := uint32(x1)
		if reserved := rt != 0 && rt < 0x8000_0000; reserved != (r.X0 == InvalidParameters.X0()) {
			t.Fatalf("%s: reset_type %#x gave %#x", where(), rt, r.X0)
		}
		if r.X0 != InvalidParameters.X0() {
			wantAction = ActionSystemReset
			if !r.Reset2 || r.ResetType != uint32(x1) || r.Cookie != x2 {
				t.Fatalf("%s: %+v for type %#x cookie %#x", where(), r, uint32(x1), x2)
			}
		}
	case FnPSCIVersion:
		if r.X0 != uint64(Version) {
			t.Fatalf("VERSION = %#x", r.X0)
		}
	case FnMigrateInfoType:
		if r.X0 != MigrateInfoTypeNone {
			t.Fatalf("MIGRATE_INFO_TYPE = %#x", r.X0)
		}
	case FnPSCIFeatures:
		q := uint32(x1)
		if r.X0 != 0 && r.X0 != NotSupported.X0() {
			t.Fatalf("PSCI_FEATURES(%#x) = %#x", q, r.X0)
		}
		implemented := slices.Contains(implementedFIDs[:], q) ||
			(q == SMCCCVersionFID && slices.Contains(cfg.ExternalFeatures, q))
		if implemented != (r.X0 == 0) {
			t.Fatalf("PSCI_FEATURES(%#x) = %#x", q, r.X0)
		}
	default:
		if r.X0 != NotSupported.X0() {
			t.Fatalf("%s (%#x): X0 = %#x, want NOT_SUPPORTED", where(), fid, r.X0)
		}
	}
	if r.Action != wantAction {
		t.Fatalf("%s: action %v, want %v (%+v)", where(), r.Action, wantAction, r)
	}
	if !slices.Equal(post, expect) {
		t.Fatalf("%s (x1 %#x): states %v -> %v, want %v", where(), x1, pre, post, expect)
	}
}
