//go:build linux

package bpfagg

import (
	"fmt"

	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"github.com/mvm-dev/mvm/exits"
	"github.com/mvm-dev/mvm/exits/hist"
	"github.com/mvm-dev/mvm/exits/tracepoint"
	"github.com/mvm-dev/mvm/psci"
)

// The programs, built with cilium/ebpf's asm package. Per event they do as
// little as they can: kvm_exit looks up its thread's state once and leaves
// the exit pending there (reason, detail class, guest time); a detail
// event (kvm_wfx_arm64, ...) looks up the same state and sets the pending
// exit's breakdown key; kvm_entry looks up the state, the row of
// (thread, reason, key) and the VM-wide histogram of (reason, key), and
// accounts the pending exit with its handling time. An exit still pending
// when the maps are read (a thread's last) is accounted by Snapshot.

// Thread state (state map value, keyed by thread id).
const (
	sEntry    = 0  // time of the last kvm_entry not closed by an exit (0: none)
	sExit     = 8  // time of the pending exit (0: none)
	sCode     = 16 // the pending exit's reason fields and breakdown key:
	sSub      = 24 // the same layout as a row key after its thread id
	sDetail   = 32
	sGuest    = 40 // its guest time, valid when sHasGuest is 1
	sHasGuest = 48
	sClass    = 56  // its breakdown class (0: none)
	sEntries  = 64  // kvm_entry count
	sDrops    = 72  // exits not counted: the row map was full
	sHistDrop = 80  // samples not in a histogram: the histogram map was full
	sVCPU     = 88  // the thread's vCPU + 1 (0: not known), set by New
	sEntered  = 96  // 1 once the thread has entered the guest
	sSawKern  = 104 // 1 once it has exited from a kernel address
	sOwner    = 112 // the thread id owning a slot of the slot map (0: free)
	// The open row: the thread's row being counted here until its exit
	// of another row flushes it to the row map (most exits repeat the
	// one before: the row map's hash lookup is saved). sOPhase is the
	// row's phase + 1 (0: none); sOCode, sOSub, sODetail its key; sORow a
	// row value (offsets v*).
	sOPhase   = 120
	sOCode    = 128
	sOSub     = 136
	sODetail  = 144
	sORow     = 152
	stateSize = sORow + rowValueSize
)

// The phase map's one value (an mmap-able array, so the VMM sets the
// marker without a bpf call): the boot phase boundaries of
// exits.PhaseBounds, on bpf_ktime_get_ns's clock (CLOCK_MONOTONIC),
// 0 until seen.
const (
	gFirst     = 0  // the first kvm_entry
	gCPUOn     = 8  // the first PSCI CPU_ON exit
	gAllIn     = 16 // the last secondary's first entry after it
	gUser      = 24 // userspace: the marker, else the first user-PC exit
	gMark      = 32 // the marker (written by the VMM)
	gFirstUser = 40 // the first exit from a user address
	gSecIn     = 48 // secondaries entered since CPU_ON
	gVCPUs     = 56 // the number of vCPUs (set by New)
	phaseSize  = 64
)

// boundOffset is where the phase map keeps boundary b.
func boundOffset(b exits.Bound) int16 {
	switch b {
	case exits.BoundCPUOn:
		return gCPUOn
	case exits.BoundAllIn:
		return gAllIn
	case exits.BoundUser:
		return gUser
	}
	panic(fmt.Sprintf("bpfagg: no phase map word for boundary %d", b))
}

// Row value (row map, keyed by rowKey): one (thread, reason, key)'s
// numbers. Only the key's thread writes it, one CPU at a time, so plain
// stores suffice.
const (
	vCount = 8 * iota
	vGuestSum
	vGuestCount
	vGuestMin
	vGuestMax
	vHandleSum
	vHandleCount
	vHandleMin
	vHandleMax
	rowValueSize
)

// A histogram value (hist map, keyed by histKey, VM-wide): per bucket of
// exits/hist's layout a guest-time counter and a handle-time counter side
// by side (an exit's two times are mostly of a similar size, so the two
// counters it adds to are mostly on one page, where guest buckets then
// handle buckets put them on two: each page first touched after a guest
// exit costs); vCPUs share it, so it is updated with atomic adds.
const histValueSize = 2 * hist.NumBuckets * 8

// Stack layout (offsets from R10).
const (
	offKey     = -32  // row key {u32 tid; u32 phase; u64 code, sub, detail}; the hist key is its last 24 bytes
	offValue   = -104 // a zeroed row value to insert (72 bytes)
	offTID     = -112 // the thread id, key of the state map
	offHandle  = -120 // the handling time, across calls
	offZeroKey = -128 // key 0 of the zero and phase maps
	offCode    = -136 // kvm_exit's code, sub-code and PC, across calls
	offSub     = -144
	offPC      = -152
	offSMCKey  = -160                 // the vCPU index, key of the SMC note map
	offSlot    = -168                 // the thread's slot, key of the slot map
	offFlush   = -200                 // the row key of the open row being flushed
	offHKey    = -208                 // the histogram key packed in a word (histSlot)
	offHSlot   = -216                 // its slot, key of the histogram slot map
	offState   = offHSlot - stateSize // a zeroed thread state to insert
)

// arg is where a program reads one value of its event: a raw tracepoint's
// argument (the u64 array of TP_PROTO's arguments) or a tracepoint
// record's field (offsets from tracefs).
type arg = tracepoint.Field

// rawArg is argument i of a raw tracepoint: the kernel casts each to u64
// (sign-extending signed ones), as tracepoint.Field.Uint reads a field.
func rawArg(i int) arg { return arg{Name: fmt.Sprintf("arg%d", i), Offset: 8 * i, Size: 8} }

// progEnv is what the programs are built from.
type progEnv struct {
	tgid int
	raw  bool // raw tracepoint programs (else perf tracepoint ones)
	// slotFD is the slot map: thread states in an array indexed by the
	// thread id's low bits (slotMask), stateFD the hash map by thread id
	// for a thread whose slot another holds.
	slotFD, slotMask int
	stateFD, rowFD   int
	histFD, zeroFD   int
	// histSlotFD is the histogram slot map: VM-wide histograms in an
	// array of 1<<histSlotBits by their packed key's hash (0: none).
	histSlotFD, histSlotBits int
	// addrFD and addrRowFD are the device address maps (0: none).
	addrFD, addrRowFD   int
	code, sub           arg
	regions             []exits.Region
	detailArg           map[detailKind]arg
	breakdown, histsOff bool
	// phases: keep the boot phases (phaseFD, the exit's PC at pc, guest
	// RAM in ram).
	phases  bool
	phaseFD int
	pc      arg
	ram     []exits.Region
	// smcFD is the SMC note map (0: none): per vCPU, the SMCCC function
	// ID | 1<<32 of the SMC the VMM is handling (KVM has no tracepoint
	// for an SMC's X0).
	smcFD int
	// esr, when its varID is set (raw tracepoints with the breakdown),
	// is where kvm_entry's program reads a SYS64 exit's ESR to key it, so
	// kvm_handle_sys_reg's program is not attached.
	esr vcpuESR
}

// detailKind is one of the detail events the breakdown reads.
type detailKind int

const (
	detailWFx detailKind = iota + 1
	detailHVC
	detailSysESR
	detailFault
)

// loadArg loads a value of 1, 2, 4 or 8 bytes at ctx+off into dst as a
// 64-bit value, sign-extended for signed fields.
func loadArg(dst, ctx asm.Register, f arg) (asm.Instructions, error) {
	var size asm.Size
	switch f.Size {
	case 1:
		size = asm.Byte
	case 2:
		size = asm.Half
	case 4:
		size = asm.Word
	case 8:
		size = asm.DWord
	default:
		return nil, fmt.Errorf("tracepoint field %s has %d bytes", f.Name, f.Size)
	}
	insns := asm.Instructions{asm.LoadMem(dst, ctx, int16(f.Offset), size)}
	if f.Signed && f.Size < 8 {
		shift := int64(64 - 8*f.Size)
		insns = append(insns, asm.LSh.Imm(dst, int32(shift)), asm.ArSh.Imm(dst, int32(shift)))
	}
	return insns, nil
}

// filterTGID returns early unless the current task belongs to tgid; it
// leaves ctx in R6 and the thread id at R10+offTID.
// bpf_get_current_pid_tgid returns tgid << 32 | pid (the thread id).
func filterTGID(tgid int) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.FnGetCurrentPidTgid.Call(),
		asm.StoreMem(asm.R10, offTID, asm.R0, asm.Word),
		asm.RSh.Imm(asm.R0, 32),
		asm.JNE.Imm(asm.R0, int32(tgid), "out"),
	}
}

// zero stores n zero bytes (a multiple of 8) at R10+off.
func zero(off int16, n int) asm.Instructions {
	insns := asm.Instructions{asm.Mov.Imm(asm.R1, 0)}
	for i := 0; i < n; i += 8 {
		insns = append(insns, asm.StoreMem(asm.R10, off+int16(i), asm.R1, asm.DWord))
	}
	return insns
}

// lookup leaves in R0 the value for the key at R10+keyOff (0: absent).
func lookup(mapFD int, keyOff int16) asm.Instructions {
	return asm.Instructions{
		asm.LoadMapPtr(asm.R1, mapFD),
		asm.Mov.Reg(asm.R2, asm.R10),
		asm.Add.Imm(asm.R2, int32(keyOff)),
		asm.FnMapLookupElem.Call(),
	}
}

// insertFrom inserts the key at R10+keyOff with the value R3 points to,
// if absent (BPF_NOEXIST), and looks it up again.
func insertFrom(mapFD int, keyOff int16) asm.Instructions {
	insns := asm.Instructions{
		asm.LoadMapPtr(asm.R1, mapFD),
		asm.Mov.Reg(asm.R2, asm.R10),
		asm.Add.Imm(asm.R2, int32(keyOff)),
		asm.Mov.Imm(asm.R4, 1), // BPF_NOEXIST
		asm.FnMapUpdateElem.Call(),
	}
	return append(insns, lookup(mapFD, keyOff)...)
}

// lookupOrInsert leaves in R0 the value for the key at R10+keyOff,
// inserting a zeroed value (built at R10+valOff) when absent; it jumps to
// fail if the map is full. label must be unique per program.
func lookupOrInsert(mapFD int, keyOff, valOff int16, valSize int, label, fail string) asm.Instructions {
	insns := lookup(mapFD, keyOff)
	insns = append(insns, asm.JNE.Imm(asm.R0, 0, label+"_found"))
	insns = append(insns, zero(valOff, valSize)...)
	insns = append(insns, asm.Mov.Reg(asm.R3, asm.R10), asm.Add.Imm(asm.R3, int32(valOff)))
	insns = append(insns, insertFrom(mapFD, keyOff)...)
	return append(insns,
		asm.JEq.Imm(asm.R0, 0, fail),
		asm.Mov.Reg(asm.R0, asm.R0).WithSymbol(label+"_found"),
	)
}

// addSample adds the duration in R2 to the sum, count, min and max at
// those offsets of the row value in R9 (R3 is scratch).
func addSample(sum, count, minOff, maxOff int16, label string) asm.Instructions {
	return asm.Instructions{
		asm.LoadMem(asm.R3, asm.R9, sum, asm.DWord),
		asm.Add.Reg(asm.R3, asm.R2),
		asm.StoreMem(asm.R9, sum, asm.R3, asm.DWord),
		asm.LoadMem(asm.R3, asm.R9, count, asm.DWord),
		asm.Add.Imm(asm.R3, 1),
		asm.StoreMem(asm.R9, count, asm.R3, asm.DWord),
		asm.LoadMem(asm.R3, asm.R9, minOff, asm.DWord),
		asm.JEq.Imm(asm.R3, 0, label+"_setmin"),
		asm.JGE.Reg(asm.R2, asm.R3, label+"_max"),
		asm.StoreMem(asm.R9, minOff, asm.R2, asm.DWord).WithSymbol(label + "_setmin"),
		asm.LoadMem(asm.R3, asm.R9, maxOff, asm.DWord).WithSymbol(label + "_max"),
		asm.JLE.Reg(asm.R2, asm.R3, label+"_done"),
		asm.StoreMem(asm.R9, maxOff, asm.R2, asm.DWord),
		asm.Mov.Reg(asm.R2, asm.R2).WithSymbol(label + "_done"),
	}
}

// bucket replaces the duration in R2 by its exits/hist bucket index
// (hist.Index) without a loop: below 16 the value itself; else the
// position of the leading one (a binary search of six shifts) and the 4
// bits below it: (log2(v) - 3) * 16 + (v >> (log2(v) - 4)) & 15, the last
// bucket from 2^37 ns on. The search has no branches (a step's shift is
// s when v >> s is not 0: the sign bit of (v >> s) | -(v >> s)): right
// after a guest exit every basic block run costs a lookup of its
// translation in the lab's emulator, more than the arithmetic. R1, R3, R4
// and R5 are scratch.
func bucket(label string) asm.Instructions {
	insns := asm.Instructions{
		asm.JLT.Imm(asm.R2, 16, label+"_done"),
		asm.Mov.Reg(asm.R3, asm.R2),
		asm.Mov.Imm(asm.R4, 0),
	}
	for _, s := range []struct{ shift, log int32 }{{32, 5}, {16, 4}, {8, 3}, {4, 2}, {2, 1}, {1, 0}} {
		insns = append(insns,
			asm.Mov.Reg(asm.R5, asm.R3),
			asm.RSh.Imm(asm.R5, s.shift),
			asm.Mov.Reg(asm.R1, asm.R5),
			asm.Neg.Imm(asm.R1, 0),
			asm.Or.Reg(asm.R1, asm.R5),
			asm.RSh.Imm(asm.R1, 63),
			asm.LSh.Imm(asm.R1, s.log),
			asm.RSh.Reg(asm.R3, asm.R1),
			asm.Add.Reg(asm.R4, asm.R1),
		)
	}
	// R4 = log2(v) >= 4; shift = R4 - 4 (hist's maxShift is 32).
	return append(insns,
		asm.JGT.Imm(asm.R4, 32+4, label+"_last"),
		asm.Mov.Reg(asm.R3, asm.R2),
		asm.Mov.Reg(asm.R5, asm.R4),
		asm.Sub.Imm(asm.R5, 4),
		asm.RSh.Reg(asm.R3, asm.R5),
		asm.And.Imm(asm.R3, 15),
		asm.Mov.Reg(asm.R2, asm.R4),
		asm.Sub.Imm(asm.R2, 3),
		asm.LSh.Imm(asm.R2, 4),
		asm.Add.Reg(asm.R2, asm.R3),
		asm.Ja.Label(label+"_done"),
		asm.Mov.Imm(asm.R2, hist.NumBuckets-1).WithSymbol(label+"_last"),
		// The verifier needs the bound spelt out before R2 indexes a map value.
		asm.JLE.Imm(asm.R2, hist.NumBuckets-1, label+"_ok").WithSymbol(label+"_done"),
		asm.Mov.Imm(asm.R2, hist.NumBuckets-1),
		asm.Mov.Reg(asm.R2, asm.R2).WithSymbol(label+"_ok"),
	)
}

// histAdd atomically adds one to the guest-time (handle false) or
// handle-time counter of R2's bucket in the histogram value in R9 (R1,
// R3..R5 scratch).
func histAdd(handle bool, label string) asm.Instructions {
	insns := bucket(label)
	insns = append(insns, asm.LSh.Imm(asm.R2, 4))
	if handle {
		insns = append(insns, asm.Add.Imm(asm.R2, 8))
	}
	return append(insns,
		asm.Mov.Reg(asm.R1, asm.R9),
		asm.Add.Reg(asm.R1, asm.R2),
		asm.Mov.Imm(asm.R3, 1),
		asm.StoreXAdd(asm.R1, asm.R3, asm.DWord),
	)
}

// atomicOp is op.Mem(dst, src, size, off) with the operation also in the
// immediate, where the kernel reads it (BPF_ATOMIC: imm is BPF_ADD,
// BPF_CMPXCHG, ..., | BPF_FETCH; Documentation/bpf/standardization/
// instruction-set.rst, "Atomic operations"): cilium/ebpf v0.22's Marshal
// takes the immediate from Constant before it derives it from the opcode,
// so op.Mem alone is encoded as a plain atomic add for every op.
func atomicOp(op asm.AtomicOp, dst, src asm.Register, size asm.Size, off int16) asm.Instruction {
	ins := op.Mem(dst, src, size, off)
	ins.Constant = int64(op >> 8)
	return ins
}

// incState adds one to the state counter at off (state in R7).
func incState(off int16) asm.Instructions {
	return asm.Instructions{
		asm.LoadMem(asm.R1, asm.R7, off, asm.DWord),
		asm.Add.Imm(asm.R1, 1),
		asm.StoreMem(asm.R7, off, asm.R1, asm.DWord),
	}
}

// account moves the pending exit of the state in R7 into its row and
// histogram, with the handling time at R10+offHandle if withHandle, and
// clears it. It ends at label+"_end".
func (e *progEnv) account(withHandle bool, label string) asm.Instructions {
	insns := asm.Instructions{
		asm.LoadMem(asm.R1, asm.R10, offTID, asm.Word),
		asm.StoreMem(asm.R10, offKey, asm.R1, asm.Word),
		asm.StoreImm(asm.R10, offKey+4, 0, asm.Word),
	}
	if e.phases {
		// The exit's phase from its time and the bounds seen so far, as
		// exits.PhaseBounds.PhaseOf, from the same list of phase starts
		// (the phase map's value in R6).
		insns = append(insns, asm.LoadMem(asm.R1, asm.R7, sExit, asm.DWord))
		for _, b := range exits.PhaseStarts() {
			next := fmt.Sprintf("%s_ph%d", label, b.Phase)
			insns = append(insns,
				asm.Mov.Imm(asm.R2, int32(b.Phase)),
				asm.LoadMem(asm.R3, asm.R6, boundOffset(b.Bound), asm.DWord),
				asm.JEq.Imm(asm.R3, 0, next),
				asm.JGE.Reg(asm.R1, asm.R3, label+"_phset"),
				asm.Mov.Reg(asm.R0, asm.R0).WithSymbol(next),
			)
		}
		// Before any bound: exits.PhaseBeforeBounds of the vCPU count.
		insns = append(insns,
			asm.Mov.Imm(asm.R2, int32(exits.PhaseBeforeBounds(1))),
			asm.LoadMem(asm.R3, asm.R6, gVCPUs, asm.DWord),
			asm.JEq.Imm(asm.R3, 1, label+"_phset"),
			asm.Mov.Imm(asm.R2, int32(exits.PhaseBeforeBounds(2))),
			asm.StoreMem(asm.R10, offKey+4, asm.R2, asm.Word).WithSymbol(label+"_phset"),
		)
	}
	for i := int16(0); i < 24; i += 8 {
		insns = append(insns,
			asm.LoadMem(asm.R1, asm.R7, sCode+i, asm.DWord),
			asm.StoreMem(asm.R10, offKey+8+i, asm.R1, asm.DWord),
		)
	}
	insns = append(insns, asm.Mov.Imm(asm.R1, 0), asm.StoreMem(asm.R7, sExit, asm.R1, asm.DWord))
	insns = append(insns, e.openRow(label)...)
	insns = append(insns,
		asm.LoadMem(asm.R3, asm.R9, vCount, asm.DWord),
		asm.Add.Imm(asm.R3, 1),
		asm.StoreMem(asm.R9, vCount, asm.R3, asm.DWord),
		asm.LoadMem(asm.R1, asm.R7, sHasGuest, asm.DWord),
		asm.JEq.Imm(asm.R1, 0, label+"_noguest"),
		asm.LoadMem(asm.R2, asm.R7, sGuest, asm.DWord),
	)
	insns = append(insns, addSample(vGuestSum, vGuestCount, vGuestMin, vGuestMax, label+"_g")...)
	insns = append(insns, asm.Mov.Reg(asm.R0, asm.R0).WithSymbol(label+"_noguest"))
	if withHandle {
		insns = append(insns, asm.LoadMem(asm.R2, asm.R10, offHandle, asm.DWord))
		insns = append(insns, addSample(vHandleSum, vHandleCount, vHandleMin, vHandleMax, label+"_h")...)
	}
	if !e.histsOff {
		if e.histSlotFD != 0 {
			insns = append(insns, e.histSlot(label)...)
		}
		insns = append(insns, lookup(e.histFD, offKey+8)...)
		insns = append(insns, asm.JNE.Imm(asm.R0, 0, label+"_hfound"))
		// A histogram is too large for the stack: insert a copy of the
		// zero map's one value.
		insns = append(insns, asm.StoreImm(asm.R10, offZeroKey, 0, asm.Word))
		insns = append(insns, lookup(e.zeroFD, offZeroKey)...)
		insns = append(insns, asm.JEq.Imm(asm.R0, 0, label+"_histfull"), asm.Mov.Reg(asm.R3, asm.R0))
		insns = append(insns, insertFrom(e.histFD, offKey+8)...)
		insns = append(insns,
			asm.JEq.Imm(asm.R0, 0, label+"_histfull"),
			asm.Mov.Reg(asm.R9, asm.R0).WithSymbol(label+"_hfound"),
			asm.LoadMem(asm.R1, asm.R7, sHasGuest, asm.DWord),
			asm.JEq.Imm(asm.R1, 0, label+"_hnoguest"),
			asm.LoadMem(asm.R2, asm.R7, sGuest, asm.DWord),
		)
		insns = append(insns, histAdd(false, label+"_hg")...)
		insns = append(insns, asm.Mov.Reg(asm.R0, asm.R0).WithSymbol(label+"_hnoguest"))
		if withHandle {
			insns = append(insns, asm.LoadMem(asm.R2, asm.R10, offHandle, asm.DWord))
			insns = append(insns, histAdd(true, label+"_hh")...)
		}
		insns = append(insns, asm.Ja.Label(label+"_end"))
		hdrop := incState(sHistDrop)
		hdrop[0] = hdrop[0].WithSymbol(label + "_histfull")
		insns = append(insns, hdrop...)
	}
	return append(insns, asm.Mov.Reg(asm.R0, asm.R0).WithSymbol(label+"_end"))
}

// openRow leaves in R9 the open row of the state in R7 for the row key at
// R10+offKey: the open row itself if its key is that one; else, after
// flushing the open row into the row map (its count goes to sDrops if the
// map is full), a zeroed open row with that key.
func (e *progEnv) openRow(label string) asm.Instructions {
	insns := asm.Instructions{
		asm.LoadMem(asm.R1, asm.R10, offKey+4, asm.Word),
		asm.Add.Imm(asm.R1, 1),
		asm.LoadMem(asm.R2, asm.R7, sOPhase, asm.DWord),
		asm.JNE.Reg(asm.R1, asm.R2, label+"_new"),
	}
	for i := int16(0); i < 24; i += 8 {
		insns = append(insns,
			asm.LoadMem(asm.R1, asm.R10, offKey+8+i, asm.DWord),
			asm.LoadMem(asm.R2, asm.R7, sOCode+i, asm.DWord),
			asm.JNE.Reg(asm.R1, asm.R2, label+"_new"),
		)
	}
	insns = append(insns,
		asm.Ja.Label(label+"_open"),
		asm.LoadMem(asm.R2, asm.R7, sOPhase, asm.DWord).WithSymbol(label+"_new"),
		asm.JEq.Imm(asm.R2, 0, label+"_reset"),
		// Flush: the open row's key, then its numbers into the map's row.
		asm.Sub.Imm(asm.R2, 1),
		asm.StoreMem(asm.R10, offFlush+4, asm.R2, asm.Word),
		asm.LoadMem(asm.R1, asm.R10, offTID, asm.Word),
		asm.StoreMem(asm.R10, offFlush, asm.R1, asm.Word),
	)
	for i := int16(0); i < 24; i += 8 {
		insns = append(insns,
			asm.LoadMem(asm.R1, asm.R7, sOCode+i, asm.DWord),
			asm.StoreMem(asm.R10, offFlush+8+i, asm.R1, asm.DWord),
		)
	}
	insns = append(insns, lookupOrInsert(e.rowFD, offFlush, offValue, rowValueSize, label+"_row", label+"_rowfull")...)
	insns = append(insns, asm.Mov.Reg(asm.R9, asm.R0))
	for _, off := range []int16{vCount, vGuestSum, vGuestCount, vHandleSum, vHandleCount} {
		insns = append(insns,
			asm.LoadMem(asm.R1, asm.R7, sORow+off, asm.DWord),
			asm.LoadMem(asm.R2, asm.R9, off, asm.DWord),
			asm.Add.Reg(asm.R2, asm.R1),
			asm.StoreMem(asm.R9, off, asm.R2, asm.DWord),
		)
	}
	for _, m := range []struct {
		minOff, maxOff int16
	}{{vGuestMin, vGuestMax}, {vHandleMin, vHandleMax}} {
		lmin, lmax, ldone := fmt.Sprintf("%s_fmin%d", label, m.minOff), fmt.Sprintf("%s_fmax%d", label, m.minOff), fmt.Sprintf("%s_fdone%d", label, m.minOff)
		insns = append(insns,
			// Min: 0 is "none" on both sides, as in addSample.
			asm.LoadMem(asm.R1, asm.R7, sORow+m.minOff, asm.DWord),
			asm.JEq.Imm(asm.R1, 0, lmax),
			asm.LoadMem(asm.R2, asm.R9, m.minOff, asm.DWord),
			asm.JEq.Imm(asm.R2, 0, lmin),
			asm.JGE.Reg(asm.R1, asm.R2, lmax),
			asm.StoreMem(asm.R9, m.minOff, asm.R1, asm.DWord).WithSymbol(lmin),
			asm.LoadMem(asm.R1, asm.R7, sORow+m.maxOff, asm.DWord).WithSymbol(lmax),
			asm.LoadMem(asm.R2, asm.R9, m.maxOff, asm.DWord),
			asm.JLE.Reg(asm.R1, asm.R2, ldone),
			asm.StoreMem(asm.R9, m.maxOff, asm.R1, asm.DWord),
			asm.Mov.Reg(asm.R0, asm.R0).WithSymbol(ldone),
		)
	}
	insns = append(insns,
		asm.Ja.Label(label+"_reset"),
		// The map is full: the open row's exits are not counted.
		asm.LoadMem(asm.R1, asm.R7, sORow+vCount, asm.DWord).WithSymbol(label+"_rowfull"),
		asm.LoadMem(asm.R2, asm.R7, sDrops, asm.DWord),
		asm.Add.Reg(asm.R2, asm.R1),
		asm.StoreMem(asm.R7, sDrops, asm.R2, asm.DWord),
		// A new open row of this key.
		asm.Mov.Imm(asm.R1, 0).WithSymbol(label+"_reset"),
	)
	for off := int16(0); off < rowValueSize; off += 8 {
		insns = append(insns, asm.StoreMem(asm.R7, sORow+off, asm.R1, asm.DWord))
	}
	insns = append(insns,
		asm.LoadMem(asm.R1, asm.R10, offKey+4, asm.Word),
		asm.Add.Imm(asm.R1, 1),
		asm.StoreMem(asm.R7, sOPhase, asm.R1, asm.DWord),
	)
	for i := int16(0); i < 24; i += 8 {
		insns = append(insns,
			asm.LoadMem(asm.R1, asm.R10, offKey+8+i, asm.DWord),
			asm.StoreMem(asm.R7, sOCode+i, asm.R1, asm.DWord),
		)
	}
	return append(insns,
		asm.Mov.Reg(asm.R9, asm.R7).WithSymbol(label+"_open"),
		asm.Add.Imm(asm.R9, sORow),
	)
}

// epilogue returns. A perf tracepoint program returns 1: returning 0
// makes the kernel skip every perf event of that tracepoint
// (perf_trace_run_bpf_submit), which would hide the events from perf kvm
// stat or mvm's own perf path running meanwhile. A raw tracepoint's
// return value is ignored.
func (e *progEnv) epilogue() asm.Instructions {
	ret := int32(1)
	if e.raw {
		ret = 0
	}
	return asm.Instructions{asm.Mov.Imm(asm.R0, ret).WithSymbol("out"), asm.Return()}
}

// state leaves the thread's state in R7, or returns. The state is the
// thread's slot of the slot map (an array: the verifier inlines its
// lookup, and it is one value in one place, where a hash lookup touches
// the hash code, the table and a bucket: after a guest exit the CPU's
// caches are cold, and each of those costs), claimed with a
// compare-and-exchange of its owner the first time; when another thread
// holds the slot, the state map (a hash by thread id). With insert, a
// state not found is created (zeroed); else the program returns.
func (e *progEnv) state(insert bool) asm.Instructions {
	insns := asm.Instructions{
		asm.LoadMem(asm.R1, asm.R10, offTID, asm.Word),
		asm.And.Imm(asm.R1, int32(e.slotMask)),
		asm.StoreMem(asm.R10, offSlot, asm.R1, asm.Word),
	}
	insns = append(insns, lookup(e.slotFD, offSlot)...)
	insns = append(insns,
		asm.JEq.Imm(asm.R0, 0, "st_hash"),
		asm.Mov.Reg(asm.R7, asm.R0),
		asm.LoadMem(asm.R1, asm.R7, sOwner, asm.DWord),
		asm.LoadMem(asm.R2, asm.R10, offTID, asm.Word),
		asm.JEq.Reg(asm.R1, asm.R2, "st_have"),
	)
	if insert {
		insns = append(insns,
			asm.JNE.Imm(asm.R1, 0, "st_hash"),
			// R0 = 0: the expected owner; after, the owner found.
			asm.Mov.Imm(asm.R0, 0),
			atomicOp(asm.CmpXchg, asm.R7, asm.R2, asm.DWord, sOwner),
			asm.JEq.Imm(asm.R0, 0, "st_have"),
		)
	}
	insns = append(insns, asm.Mov.Reg(asm.R0, asm.R0).WithSymbol("st_hash"))
	if insert {
		insns = append(insns, lookupOrInsert(e.stateFD, offTID, offState, stateSize, "st", "out")...)
	} else {
		insns = append(insns, lookup(e.stateFD, offTID)...)
		insns = append(insns, asm.JEq.Imm(asm.R0, 0, "out"))
	}
	return append(insns,
		asm.Mov.Reg(asm.R7, asm.R0),
		asm.Mov.Reg(asm.R7, asm.R7).WithSymbol("st_have"),
	)
}

// phaseMap leaves the phase map's value in R6 (it always exists: an array
// of one).
func (e *progEnv) phaseMap() asm.Instructions {
	insns := asm.Instructions{asm.StoreImm(asm.R10, offZeroKey, 0, asm.Word)}
	insns = append(insns, lookup(e.phaseFD, offZeroKey)...)
	return append(insns, asm.JEq.Imm(asm.R0, 0, "out"), asm.Mov.Reg(asm.R6, asm.R0))
}

// exitProgram, on kvm_exit: accounts an exit still pending (no entry since
// it: the thread was caught between the two), then leaves this one
// pending with its reason, breakdown class and guest time.
func (e *progEnv) exitProgram() (asm.Instructions, error) {
	insns := filterTGID(e.tgid)
	insns = append(insns, asm.FnKtimeGetNs.Call(), asm.Mov.Reg(asm.R8, asm.R0))
	insns = append(insns, e.state(true)...)
	// The event's fields to the stack first: R6 holds the phase map after.
	lc, err := loadArg(asm.R1, asm.R6, e.code)
	if err != nil {
		return nil, err
	}
	insns = append(insns, lc...)
	if e.raw {
		// kvm_exit's record holds ARM_EXCEPTION_CODE(ret), the SError
		// flag (bit 31, ARM_EXIT_WITH_SERROR_BIT) cleared
		// (arch/arm64/include/asm/kvm_asm.h), and esr_ec only for a trap.
		// The bit is kept for the breakdown class below: handle_exit
		// (arch/arm64/kvm/handle_exit.c) handles no trap of an exit
		// with it, so no detail event keys it, and kvm_entry must not
		// key it from the ESR either.
		insns = append(insns,
			asm.Mov.Reg(asm.R3, asm.R1),
			asm.RSh.Imm(asm.R3, 31),
			asm.And.Imm(asm.R3, 1),
			asm.StoreMem(asm.R10, offSErr, asm.R3, asm.DWord),
			asm.And.Imm(asm.R1, 0x7fff_ffff),
		)
	}
	insns = append(insns, asm.StoreMem(asm.R10, offCode, asm.R1, asm.DWord), asm.Mov.Imm(asm.R2, 0))
	if e.sub.Name != "" {
		ls, err := loadArg(asm.R2, asm.R6, e.sub)
		if err != nil {
			return nil, err
		}
		insns = append(insns, ls...)
		if e.raw {
			insns = append(insns,
				asm.JEq.Imm(asm.R1, exits.Arm64ExceptionTrap, "trap"),
				asm.Mov.Imm(asm.R2, 0),
				asm.Mov.Reg(asm.R0, asm.R0).WithSymbol("trap"),
			)
		}
	}
	insns = append(insns, asm.StoreMem(asm.R10, offSub, asm.R2, asm.DWord))
	if e.phases {
		lp, err := loadArg(asm.R1, asm.R6, e.pc)
		if err != nil {
			return nil, err
		}
		insns = append(insns, lp...)
		insns = append(insns, asm.StoreMem(asm.R10, offPC, asm.R1, asm.DWord))
		insns = append(insns, e.phaseMap()...)
	}
	insns = append(insns,
		asm.LoadMem(asm.R1, asm.R7, sExit, asm.DWord),
		asm.JEq.Imm(asm.R1, 0, "nopend"),
	)
	insns = append(insns, e.account(false, "prev")...)
	insns = append(insns,
		asm.LoadMem(asm.R1, asm.R10, offCode, asm.DWord).WithSymbol("nopend"),
		asm.LoadMem(asm.R2, asm.R10, offSub, asm.DWord),
		asm.StoreMem(asm.R7, sCode, asm.R1, asm.DWord),
		asm.StoreMem(asm.R7, sSub, asm.R2, asm.DWord),
		asm.Mov.Imm(asm.R3, 0),
		asm.StoreMem(asm.R7, sDetail, asm.R3, asm.DWord),
		asm.StoreMem(asm.R7, sClass, asm.R3, asm.DWord),
	)
	if e.breakdown {
		// R1 = code, R2 = sub: the classes of exits.BreakdownClass,
		// from the same list.
		insns = append(insns, asm.JNE.Imm(asm.R1, exits.Arm64ExceptionTrap, "classed"))
		if e.raw {
			// With the SError bit handle_exit handles no trap, so no
			// detail event keys the exit: it has no class.
			insns = append(insns,
				asm.LoadMem(asm.R3, asm.R10, offSErr, asm.DWord),
				asm.JNE.Imm(asm.R3, 0, "classed"),
			)
		}
		for _, c := range exits.Arm64BreakdownClasses() {
			lbl := fmt.Sprintf("ec%d", c.EC)
			insns = append(insns,
				asm.JNE.Imm(asm.R2, int32(c.EC), lbl),
				asm.Mov.Imm(asm.R3, int32(c.Class)),
				asm.StoreMem(asm.R7, sClass, asm.R3, asm.DWord),
				asm.Ja.Label("classed"),
				asm.Mov.Reg(asm.R0, asm.R0).WithSymbol(lbl),
			)
		}
		insns = append(insns, asm.Mov.Reg(asm.R0, asm.R0).WithSymbol("classed"))
	}
	if e.phases {
		insns = append(insns, e.notePC()...)
	}
	insns = append(insns,
		asm.Mov.Imm(asm.R2, 0),
		asm.LoadMem(asm.R1, asm.R7, sEntry, asm.DWord),
		asm.JEq.Imm(asm.R1, 0, "noentry"),
		asm.Mov.Reg(asm.R2, asm.R8),
		asm.Sub.Reg(asm.R2, asm.R1),
		asm.StoreMem(asm.R7, sGuest, asm.R2, asm.DWord),
		asm.Mov.Imm(asm.R2, 1),
		asm.StoreMem(asm.R7, sHasGuest, asm.R2, asm.DWord).WithSymbol("noentry"),
		asm.Mov.Imm(asm.R1, 0),
		asm.StoreMem(asm.R7, sEntry, asm.R1, asm.DWord),
		asm.StoreMem(asm.R7, sExit, asm.R8, asm.DWord),
	)
	return append(insns, e.epilogue()...), nil
}

// sysKeyFromESR, on kvm_entry, keys the SYS64 exit pending in the state
// in R7 as kvm_handle_sys_reg's detail program would: from the ESR's ISS,
// read from the entering vCPU (kvm_running_vcpu's arch.fault.esr_el2,
// vcpuESR), which still holds the exit's ESR, the value that event
// reports (KVM writes it at the world switch back from the guest only).
// Read here rather than on kvm_exit: right after the guest exit every
// page a program touches first costs more (see the cost breakdown in
// docs/profile.md), and an exit pending since an earlier exit (no entry
// between) gets no key, like one whose vCPU cannot be read.
func (e *progEnv) sysKeyFromESR() asm.Instructions {
	// ld_imm64 with src BPF_PSEUDO_BTF_ID: the address of a kernel
	// variable by its vmlinux BTF ID (Documentation/bpf/standardization/
	// instruction-set.rst, "64-bit immediate instructions"), here a
	// per-CPU one, for bpf_this_cpu_ptr.
	ksym := asm.LoadImm(asm.R1, int64(e.esr.varID), asm.DWord)
	ksym.Src = asm.R3 // BPF_PSEUDO_BTF_ID
	return asm.Instructions{
		asm.LoadMem(asm.R1, asm.R7, sClass, asm.DWord),
		asm.JNE.Imm(asm.R1, int32(exits.ClassSys), "noesr"),
		asm.LoadMem(asm.R1, asm.R7, sDetail, asm.DWord),
		asm.JNE.Imm(asm.R1, 0, "noesr"),
		ksym,
		asm.FnThisCpuPtr.Call(),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
		asm.JEq.Imm(asm.R1, 0, "noesr"),
		asm.Mov.Imm(asm.R2, int32(e.esr.vcpuID)),
		// bpf_rdonly_cast(vcpu, struct kvm_vcpu): a kfunc call
		// (BPF_PSEUDO_KFUNC_CALL, imm its vmlinux BTF ID).
		{OpCode: asm.OpCode(asm.JumpClass).SetJumpOp(asm.Call), Src: asm.PseudoKfuncCall, Constant: int64(e.esr.castID)},
		asm.LoadMem(asm.R2, asm.R0, int16(e.esr.off), asm.DWord),
		asm.And.Imm(asm.R2, 0x1ff_ffff),
		asm.LoadImm(asm.R3, int64(exits.ClassSys<<56|sysESRMark), asm.DWord),
		asm.Or.Reg(asm.R2, asm.R3),
		asm.StoreMem(asm.R7, sDetail, asm.R2, asm.DWord),
		asm.Mov.Reg(asm.R0, asm.R0).WithSymbol("noesr"),
	}
}

// notePC watches for the first exit from a user address, as the perf
// path's aggregator does: a PC in the TTBR0 half (bit 55 clear, Arm ARM
// D8.1), outside guest RAM (where the kernel runs with its MMU off), on a
// thread that has exited from a kernel address before. The phase map's
// value is in R6, the state in R7, the time in R8.
func (e *progEnv) notePC() asm.Instructions {
	insns := asm.Instructions{
		asm.LoadMem(asm.R2, asm.R10, offPC, asm.DWord),
		asm.Mov.Reg(asm.R3, asm.R2),
		asm.RSh.Imm(asm.R3, 55),
		asm.And.Imm(asm.R3, 1),
		asm.JEq.Imm(asm.R3, 0, "userpc"),
		asm.StoreMem(asm.R7, sSawKern, asm.R3, asm.DWord),
		asm.Ja.Label("pcdone"),
		asm.LoadMem(asm.R3, asm.R7, sSawKern, asm.DWord).WithSymbol("userpc"),
		asm.JEq.Imm(asm.R3, 0, "pcdone"),
	}
	for i, r := range e.ram {
		next := fmt.Sprintf("ram%d", i)
		insns = append(insns, inRegion(asm.R2, asm.R3, asm.R4, r, "pcdone", next)...)
		insns = append(insns, asm.Mov.Reg(asm.R0, asm.R0).WithSymbol(next))
	}
	return append(insns,
		asm.LoadMem(asm.R3, asm.R6, gFirstUser, asm.DWord),
		asm.JNE.Imm(asm.R3, 0, "pcdone"),
		asm.StoreMem(asm.R6, gFirstUser, asm.R8, asm.DWord),
		asm.LoadMem(asm.R3, asm.R6, gMark, asm.DWord),
		asm.JNE.Imm(asm.R3, 0, "pcdone"),
		asm.StoreMem(asm.R6, gUser, asm.R8, asm.DWord),
		asm.Mov.Reg(asm.R0, asm.R0).WithSymbol("pcdone"),
	)
}

// entryProgram, on kvm_entry: counts the thread's entries, accounts its
// pending exit with the handling time, and records the entry's time.
func (e *progEnv) entryProgram() asm.Instructions {
	insns := filterTGID(e.tgid)
	insns = append(insns, asm.FnKtimeGetNs.Call(), asm.Mov.Reg(asm.R8, asm.R0))
	insns = append(insns, e.state(true)...)
	insns = append(insns, incState(sEntries)...)
	if e.phases {
		insns = append(insns, e.phaseMap()...)
		insns = append(insns, e.noteEntry()...)
	}
	insns = append(insns,
		asm.StoreMem(asm.R7, sEntry, asm.R8, asm.DWord),
		asm.LoadMem(asm.R1, asm.R7, sExit, asm.DWord),
		asm.JEq.Imm(asm.R1, 0, "out"),
		asm.Mov.Reg(asm.R2, asm.R8),
		asm.Sub.Reg(asm.R2, asm.R1),
		asm.StoreMem(asm.R10, offHandle, asm.R2, asm.DWord),
	)
	if e.smcFD != 0 {
		insns = append(insns, e.smcNote()...)
	}
	if e.esr.varID != 0 {
		insns = append(insns, e.sysKeyFromESR()...)
	}
	insns = append(insns, e.account(true, "acc")...)
	return append(insns, e.epilogue()...)
}

// smcNote keys a pending SMCCC-class exit no detail event named with the
// note the VMM left for the thread's vCPU while handling it, and uses the
// note up; the first CPU_ON starts the secondaries phase at its exit, as
// the perf path's Aggregator.NoteSMC does (state in R7, phase map in R6).
func (e *progEnv) smcNote() asm.Instructions {
	insns := asm.Instructions{
		asm.LoadMem(asm.R1, asm.R7, sClass, asm.DWord),
		asm.JNE.Imm(asm.R1, int32(exits.ClassFunc), "nonote"),
		asm.LoadMem(asm.R1, asm.R7, sDetail, asm.DWord),
		asm.JNE.Imm(asm.R1, 0, "nonote"),
		asm.LoadMem(asm.R1, asm.R7, sVCPU, asm.DWord),
		asm.JEq.Imm(asm.R1, 0, "nonote"),
		asm.Sub.Imm(asm.R1, 1),
		asm.StoreMem(asm.R10, offSMCKey, asm.R1, asm.Word),
	}
	insns = append(insns, lookup(e.smcFD, offSMCKey)...)
	insns = append(insns,
		asm.JEq.Imm(asm.R0, 0, "nonote"),
		asm.LoadMem(asm.R2, asm.R0, 0, asm.DWord),
		asm.JEq.Imm(asm.R2, 0, "nonote"),
		asm.Mov.Imm(asm.R1, 0),
		asm.StoreMem(asm.R0, 0, asm.R1, asm.DWord),
		asm.LSh.Imm(asm.R2, 32),
		asm.RSh.Imm(asm.R2, 32),
		asm.LoadImm(asm.R3, int64(exits.ClassFunc<<56), asm.DWord),
		asm.Or.Reg(asm.R3, asm.R2),
		asm.StoreMem(asm.R7, sDetail, asm.R3, asm.DWord),
	)
	if e.phases {
		insns = append(insns,
			asm.LoadImm(asm.R3, int64(psci.FnCPUOn), asm.DWord),
			asm.JEq.Reg(asm.R2, asm.R3, "smccpuon"),
			asm.LoadImm(asm.R3, int64(psci.FnCPUOn64), asm.DWord),
			asm.JNE.Reg(asm.R2, asm.R3, "nonote"),
			asm.LoadMem(asm.R1, asm.R6, gCPUOn, asm.DWord).WithSymbol("smccpuon"),
			asm.JNE.Imm(asm.R1, 0, "nonote"),
			asm.LoadMem(asm.R1, asm.R7, sExit, asm.DWord),
			asm.StoreMem(asm.R6, gCPUOn, asm.R1, asm.DWord),
		)
	}
	return append(insns, asm.Mov.Reg(asm.R0, asm.R0).WithSymbol("nonote"))
}

// noteEntry tracks the first entry and the secondaries' first entries
// after the first CPU_ON, as the perf path's aggregator does (phase map in
// R6, state in R7, time in R8).
func (e *progEnv) noteEntry() asm.Instructions {
	return asm.Instructions{
		asm.LoadMem(asm.R1, asm.R6, gFirst, asm.DWord),
		asm.JNE.Imm(asm.R1, 0, "hadfirst"),
		asm.StoreMem(asm.R6, gFirst, asm.R8, asm.DWord),
		asm.LoadMem(asm.R1, asm.R7, sEntered, asm.DWord).WithSymbol("hadfirst"),
		asm.JNE.Imm(asm.R1, 0, "entered"),
		asm.Mov.Imm(asm.R1, 1),
		asm.StoreMem(asm.R7, sEntered, asm.R1, asm.DWord),
		asm.LoadMem(asm.R1, asm.R7, sVCPU, asm.DWord),
		asm.JLE.Imm(asm.R1, 1, "entered"), // vCPU 0 or not known
		asm.LoadMem(asm.R1, asm.R6, gCPUOn, asm.DWord),
		asm.JEq.Imm(asm.R1, 0, "entered"),
		asm.LoadMem(asm.R2, asm.R6, gVCPUs, asm.DWord),
		asm.JLT.Imm(asm.R2, 2, "entered"),
		// Count this secondary, then look: the last one to add sees all
		// vCPUs - 1 (an atomic add, then a load: asm.FetchAdd.Mem is
		// encoded as a plain add, see atomicOp).
		asm.Mov.Imm(asm.R1, 1),
		asm.AddAtomic.Mem(asm.R6, asm.R1, asm.DWord, gSecIn),
		asm.LoadMem(asm.R1, asm.R6, gSecIn, asm.DWord),
		asm.Add.Imm(asm.R1, 1),
		asm.JLT.Reg(asm.R1, asm.R2, "entered"), // not all of vCPUs - 1 yet
		asm.LoadMem(asm.R1, asm.R6, gAllIn, asm.DWord),
		asm.JNE.Imm(asm.R1, 0, "entered"),
		asm.StoreMem(asm.R6, gAllIn, asm.R8, asm.DWord),
		asm.Mov.Reg(asm.R0, asm.R0).WithSymbol("entered"),
	}
}

// detailProgram, on a detail event: gives the thread's pending exit its
// breakdown key, if the exit is of the event's class and has none yet.
func (e *progEnv) detailProgram(kind detailKind) (asm.Instructions, error) {
	a := e.detailArg[kind]
	class := map[detailKind]uint64{detailWFx: exits.ClassWFx, detailHVC: exits.ClassFunc,
		detailSysESR: exits.ClassSys, detailFault: exits.ClassDev}[kind]
	insns := filterTGID(e.tgid)
	insns = append(insns, e.state(false)...)
	insns = append(insns,
		asm.LoadMem(asm.R1, asm.R7, sExit, asm.DWord),
		asm.JEq.Imm(asm.R1, 0, "out"),
		asm.LoadMem(asm.R1, asm.R7, sClass, asm.DWord),
		asm.JNE.Imm(asm.R1, int32(class), "out"),
		asm.LoadMem(asm.R1, asm.R7, sDetail, asm.DWord),
		asm.JNE.Imm(asm.R1, 0, "out"),
	)
	la, err := loadArg(asm.R2, asm.R6, a)
	if err != nil {
		return nil, err
	}
	insns = append(insns, la...)
	switch kind {
	case detailWFx:
		insns = append(insns, asm.And.Imm(asm.R2, 1))
	case detailHVC:
		insns = append(insns, asm.LSh.Imm(asm.R2, 32), asm.RSh.Imm(asm.R2, 32))
		if e.phases {
			// The first PSCI CPU_ON (SMC32 or SMC64 function ID) starts
			// the secondaries phase at its exit.
			insns = append(insns,
				asm.LoadImm(asm.R3, int64(psci.FnCPUOn), asm.DWord),
				asm.JEq.Reg(asm.R2, asm.R3, "cpuon"),
				asm.LoadImm(asm.R3, int64(psci.FnCPUOn64), asm.DWord),
				asm.JNE.Reg(asm.R2, asm.R3, "notcpuon"),
				asm.StoreMem(asm.R10, offPC, asm.R2, asm.DWord).WithSymbol("cpuon"),
			)
			insns = append(insns, e.phaseMap()...)
			insns = append(insns,
				asm.LoadMem(asm.R2, asm.R10, offPC, asm.DWord),
				asm.LoadMem(asm.R1, asm.R6, gCPUOn, asm.DWord),
				asm.JNE.Imm(asm.R1, 0, "notcpuon"),
				asm.LoadMem(asm.R1, asm.R7, sExit, asm.DWord),
				asm.StoreMem(asm.R6, gCPUOn, asm.R1, asm.DWord),
				asm.Mov.Reg(asm.R0, asm.R0).WithSymbol("notcpuon"),
			)
		}
	case detailSysESR:
		// The ISS (25 bits); Snapshot turns it into the register key,
		// marked by sysESRMark.
		insns = append(insns, asm.And.Imm(asm.R2, 0x1ff_ffff), asm.LoadImm(asm.R3, sysESRMark, asm.DWord), asm.Or.Reg(asm.R2, asm.R3))
	case detailFault:
		// The region index of the IPA, unrolled over the layout.
		insns = append(insns, asm.Mov.Reg(asm.R4, asm.R2), asm.LoadImm(asm.R2, exits.DevUnmapped, asm.DWord))
		for i, r := range e.regions {
			hit, next := fmt.Sprintf("reg%d_hit", i), fmt.Sprintf("reg%d", i)
			insns = append(insns, inRegion(asm.R4, asm.R3, asm.R5, r, hit, next)...)
			insns = append(insns,
				asm.Ja.Label(next),
				asm.Mov.Imm(asm.R2, int32(i)).WithSymbol(hit),
				asm.Ja.Label("regdone"),
				asm.Mov.Reg(asm.R0, asm.R0).WithSymbol(next),
			)
		}
		insns = append(insns, asm.Mov.Reg(asm.R0, asm.R0).WithSymbol("regdone"))
	default:
		return nil, fmt.Errorf("bpfagg: detail kind %d", kind)
	}
	insns = append(insns,
		asm.LoadImm(asm.R3, int64(class<<56), asm.DWord),
		asm.Or.Reg(asm.R2, asm.R3),
		asm.StoreMem(asm.R7, sDetail, asm.R2, asm.DWord),
	)
	if kind == detailFault && e.addrFD != 0 {
		insns = append(insns, e.countAddress()...)
	}
	return append(insns, e.epilogue()...), nil
}

// Device addresses (the addr map, keyed by {sub, key, ipa}: a u64 count;
// the addr row map, keyed by {sub, key}: distinct addresses kept and
// exits at addresses past them), as the perf path's Aggregator keeps
// them: the first exits.MaxAddrsPerRow distinct IPAs of each device row.
const (
	offAddrKey = offState - 24 // {sub, key, ipa}; its first 16 bytes are the addr row key
	offAddrOne = offAddrKey - 8
	offAddrRow = offAddrOne - 16 // a zeroed addr row value to insert
	// kvm_exit's program: 1 if the exit's code had the SError bit.
	offSErr = offAddrRow - 8
)

// countAddress counts the IPA in R4 of the exit the fault event just
// keyed (its key in R2, the state in R7). A new IPA takes one of its row's
// MaxAddrsPerRow places, reserved with a compare-and-exchange (tried
// three times, then it counts as past them).
func (e *progEnv) countAddress() asm.Instructions {
	insns := asm.Instructions{
		asm.LoadMem(asm.R1, asm.R7, sSub, asm.DWord),
		asm.StoreMem(asm.R10, offAddrKey, asm.R1, asm.DWord),
		asm.StoreMem(asm.R10, offAddrKey+8, asm.R2, asm.DWord),
		asm.StoreMem(asm.R10, offAddrKey+16, asm.R4, asm.DWord),
	}
	insns = append(insns, lookup(e.addrFD, offAddrKey)...)
	insns = append(insns,
		asm.JEq.Imm(asm.R0, 0, "addrnew"),
		asm.Mov.Imm(asm.R1, 1),
		asm.StoreXAdd(asm.R0, asm.R1, asm.DWord),
		asm.Ja.Label("out"),
		asm.Mov.Reg(asm.R0, asm.R0).WithSymbol("addrnew"),
	)
	insns = append(insns, lookupOrInsert(e.addrRowFD, offAddrKey, offAddrRow, 16, "arow", "out")...)
	insns = append(insns, asm.Mov.Reg(asm.R8, asm.R0))
	for range 3 {
		insns = append(insns,
			asm.LoadMem(asm.R0, asm.R8, 0, asm.DWord),
			asm.JGE.Imm(asm.R0, exits.MaxAddrsPerRow, "addrmore"),
			asm.Mov.Reg(asm.R9, asm.R0),
			asm.Mov.Reg(asm.R1, asm.R0),
			asm.Add.Imm(asm.R1, 1),
			atomicOp(asm.CmpXchg, asm.R8, asm.R1, asm.DWord, 0),
			asm.JEq.Reg(asm.R0, asm.R9, "addrplace"),
		)
	}
	insns = append(insns, asm.Ja.Label("addrmore"))
	insns = append(insns,
		asm.Mov.Imm(asm.R1, 1).WithSymbol("addrplace"),
		asm.StoreMem(asm.R10, offAddrOne, asm.R1, asm.DWord),
		asm.LoadMapPtr(asm.R1, e.addrFD),
		asm.Mov.Reg(asm.R2, asm.R10),
		asm.Add.Imm(asm.R2, offAddrKey),
		asm.Mov.Reg(asm.R3, asm.R10),
		asm.Add.Imm(asm.R3, offAddrOne),
		asm.Mov.Imm(asm.R4, 1), // BPF_NOEXIST
		asm.FnMapUpdateElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		// Not inserted: give the place back; another vCPU added this IPA
		// meanwhile (EEXIST): count it there; else the map is full.
		asm.Mov.Reg(asm.R9, asm.R0),
		asm.Mov.Imm(asm.R1, -1),
		asm.StoreXAdd(asm.R8, asm.R1, asm.DWord),
		asm.JNE.Imm(asm.R9, -int32(unix.EEXIST), "addrmore"),
	)
	insns = append(insns, lookup(e.addrFD, offAddrKey)...)
	return append(insns,
		asm.JEq.Imm(asm.R0, 0, "addrmore"),
		asm.Mov.Imm(asm.R1, 1),
		asm.StoreXAdd(asm.R0, asm.R1, asm.DWord),
		asm.Ja.Label("out"),
		asm.Mov.Imm(asm.R1, 1).WithSymbol("addrmore"),
		asm.AddAtomic.Mem(asm.R8, asm.R1, asm.DWord, 8),
	)
}

// inRegion jumps to hit if v lies in r, to miss if below it, and falls
// through if above (tmp and bound are scratch).
func inRegion(v, tmp, bound asm.Register, r exits.Region, hit, miss string) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(tmp, v),
		asm.LoadImm(bound, int64(r.Base), asm.DWord),
		asm.JLT.Reg(tmp, bound, miss),
		asm.Sub.Reg(tmp, bound),
		asm.LoadImm(bound, int64(r.Size), asm.DWord),
		asm.JLT.Reg(tmp, bound, hit),
	}
}

// sysESRMark marks a SYS64 key that still holds the ESR's ISS (bit 40,
// above every register key).
const sysESRMark = 1 << 40

// A histogram slot's value: its owner, the packed key (0: free), then a
// histogram value.
const histSlotSize = 8 + histValueSize

// Histogram keys packed in one word for the slot map: 1<<63 | code<<59 |
// sub<<53 | class<<50 | value, for code < 16, sub < 64, class < 8 and a
// value below 1<<50 (every arm64 key: exception code, EC, breakdown class,
// the ISS with sysESRMark, an SMCCC function ID or a region index); other
// keys use the histogram map.
const (
	packCode, packSub, packClass = 59, 53, 50
	packValueBits                = 50
)

// histMul is the multiplier of the slot's Fibonacci hash (2^64 / phi).
const histMul uint64 = 0x9e37_79b9_7f4a_7c15

// histSlot jumps to label+"_hfound" with R0 pointing at the histogram
// value of the key at R10+offKey+8 in the histogram slot map (claiming
// the slot with a compare-and-exchange of its owner word), or falls
// through when the key does not pack or another key holds the slot. As
// with the thread states, an array lookup is inlined and touches only the
// value, where a hash lookup also touches the hash code and a bucket.
func (e *progEnv) histSlot(label string) asm.Instructions {
	miss := label + "_hmiss"
	return asm.Instructions{
		asm.LoadMem(asm.R1, asm.R10, offKey+8, asm.DWord),
		asm.LoadMem(asm.R2, asm.R10, offKey+16, asm.DWord),
		asm.LoadMem(asm.R3, asm.R10, offKey+24, asm.DWord),
		asm.JGT.Imm(asm.R1, 15, miss),
		asm.JGT.Imm(asm.R2, 63, miss),
		asm.Mov.Reg(asm.R4, asm.R3),
		asm.RSh.Imm(asm.R4, 56),
		asm.JGT.Imm(asm.R4, 7, miss),
		asm.Mov.Reg(asm.R5, asm.R3),
		asm.LSh.Imm(asm.R5, 8),
		asm.RSh.Imm(asm.R5, 8),
		asm.Mov.Reg(asm.R0, asm.R5),
		asm.RSh.Imm(asm.R0, packValueBits),
		asm.JNE.Imm(asm.R0, 0, miss),
		asm.LSh.Imm(asm.R1, packCode),
		asm.LSh.Imm(asm.R2, packSub),
		asm.LSh.Imm(asm.R4, packClass),
		asm.Or.Reg(asm.R5, asm.R1),
		asm.Or.Reg(asm.R5, asm.R2),
		asm.Or.Reg(asm.R5, asm.R4),
		asm.LoadImm(asm.R1, -1<<63, asm.DWord),
		asm.Or.Reg(asm.R5, asm.R1),
		asm.StoreMem(asm.R10, offHKey, asm.R5, asm.DWord),
		asm.LoadImm(asm.R1, asImm(histMul), asm.DWord),
		asm.Mul.Reg(asm.R5, asm.R1),
		asm.RSh.Imm(asm.R5, int32(64-e.histSlotBits)),
		asm.StoreMem(asm.R10, offHSlot, asm.R5, asm.Word),
		asm.LoadMapPtr(asm.R1, e.histSlotFD),
		asm.Mov.Reg(asm.R2, asm.R10),
		asm.Add.Imm(asm.R2, offHSlot),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, miss),
		asm.Mov.Reg(asm.R9, asm.R0),
		asm.LoadMem(asm.R1, asm.R9, 0, asm.DWord),
		asm.LoadMem(asm.R2, asm.R10, offHKey, asm.DWord),
		asm.JEq.Reg(asm.R1, asm.R2, label+"_hhave"),
		asm.JNE.Imm(asm.R1, 0, miss),
		// R0 = 0, the expected owner; after, the owner found (ours if
		// another vCPU claimed the slot for the same key meanwhile).
		asm.Mov.Imm(asm.R0, 0),
		atomicOp(asm.CmpXchg, asm.R9, asm.R2, asm.DWord, 0),
		asm.JEq.Imm(asm.R0, 0, label+"_hhave"),
		asm.JNE.Reg(asm.R0, asm.R2, miss),
		asm.Mov.Reg(asm.R0, asm.R9).WithSymbol(label + "_hhave"),
		asm.Add.Imm(asm.R0, 8),
		asm.Ja.Label(label + "_hfound"),
		asm.Mov.Reg(asm.R0, asm.R0).WithSymbol(miss),
	}
}

// asImm is u's bits as a 64-bit immediate.
func asImm(u uint64) int64 { return int64(u) }

// histSlotOf is the slot of packed key p among 1<<bits, as histSlot
// computes it.
func histSlotOf(p uint64, bits int) uint32 { return uint32(p * histMul >> (64 - bits)) }

// unpackHistKey undoes histSlot's packing.
func unpackHistKey(p uint64) histKey {
	return histKey{Code: p >> packCode & 15, Sub: p >> packSub & 63,
		Detail: (p>>packClass&7)<<56 | p&(1<<packValueBits-1)}
}
