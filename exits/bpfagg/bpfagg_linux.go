//go:build linux

package bpfagg

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"

	"github.com/mvm-dev/mvm/exits"
	"github.com/mvm-dev/mvm/exits/tracepoint"
)

// maxKeys bounds the exit-counter map: threads x distinct reasons.
const maxKeys = 1 << 16

// exitKey is the exit map's key: the thread and the raw reason fields, as
// the program writes it on its stack.
type exitKey struct {
	TID  uint32
	_    uint32
	Code uint64
	Sub  uint64
}

// Counter counts kvm_exit and kvm_entry of one process in the kernel.
type Counter struct {
	namer   exits.Namer
	exitMap *ebpf.Map
	entries *ebpf.Map
	state   *ebpf.Map
	progs   []*ebpf.Program
	links   []link.Link
}

// New loads and attaches the programs for the threads of process tgid.
// tracefs is the tracefs directory (tracepoint.Probe finds it). It fails
// when BPF is not allowed (no CAP_BPF and CAP_PERFMON, or root); the error
// says so.
func New(tracefs string, tgid int) (_ *Counter, err error) {
	// kvm_entry's fields are not read, but it must exist.
	if _, err := tracepoint.ReadFormat(tracefs, "kvm", "kvm_entry"); err != nil {
		return nil, err
	}
	exit, err := tracepoint.ReadFormat(tracefs, "kvm", "kvm_exit")
	if err != nil {
		return nil, err
	}
	namer, err := exits.NamerForFields(func(name string) bool { _, ok := exit.Field(name); return ok })
	if err != nil {
		return nil, fmt.Errorf("kvm:kvm_exit: %w", err)
	}
	code, _ := exit.Field(namer.CodeField())
	sub, _ := exit.Field(namer.SubField())
	// Kernels before 5.11 charge BPF memory to RLIMIT_MEMLOCK.
	_ = rlimit.RemoveMemlock()

	c := &Counter{namer: namer}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	if c.exitMap, err = ebpf.NewMap(&ebpf.MapSpec{Name: "mvm_exits", Type: ebpf.Hash, KeySize: 24, ValueSize: exitValueSize, MaxEntries: maxKeys}); err != nil {
		return nil, permErr("create the BPF exit map", err)
	}
	if c.entries, err = ebpf.NewMap(&ebpf.MapSpec{Name: "mvm_entries", Type: ebpf.Hash, KeySize: 4, ValueSize: 8, MaxEntries: maxKeys}); err != nil {
		return nil, permErr("create the BPF entry map", err)
	}
	if c.state, err = ebpf.NewMap(&ebpf.MapSpec{Name: "mvm_threads", Type: ebpf.Hash, KeySize: 4, ValueSize: threadStateSize, MaxEntries: maxKeys}); err != nil {
		return nil, permErr("create the BPF thread map", err)
	}
	exitInsns, err := exitProgram(c.exitMap.FD(), c.state.FD(), tgid, code, sub)
	if err != nil {
		return nil, err
	}
	for _, p := range []struct {
		name  string
		insns asm.Instructions
	}{
		{"kvm_exit", exitInsns},
		{"kvm_entry", entryProgram(c.exitMap.FD(), c.state.FD(), c.entries.FD(), tgid)},
	} {
		prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "mvm_" + p.name, Type: ebpf.TracePoint, License: "GPL", Instructions: p.insns})
		if err != nil {
			return nil, permErr("load the BPF program for kvm:"+p.name, err)
		}
		c.progs = append(c.progs, prog)
		l, err := link.Tracepoint("kvm", p.name, prog, nil)
		if err != nil {
			return nil, permErr("attach the BPF program to kvm:"+p.name, err)
		}
		c.links = append(c.links, l)
	}
	return c, nil
}

// permErr says what is missing when the kernel refuses BPF.
func permErr(what string, err error) error {
	if errors.Is(err, ebpf.ErrNotSupported) {
		return fmt.Errorf("%s: %w (kernel without BPF tracepoint programs)", what, err)
	}
	if errors.Is(err, errPerm) || errors.Is(err, errAcces) {
		return fmt.Errorf("%s: %w: needs CAP_BPF and CAP_PERFMON (or root)", what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// loadField loads a tracepoint field of 1, 2, 4 or 8 bytes at ctx+off
// into dst as a 64-bit value, sign-extended for signed fields, as
// tracepoint.Field.Uint reads it.
func loadField(dst, ctx asm.Register, f tracepoint.Field) (asm.Instructions, error) {
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
		return nil, fmt.Errorf("kvm:kvm_exit field %s has %d bytes", f.Name, f.Size)
	}
	insns := asm.Instructions{asm.LoadMem(dst, ctx, int16(f.Offset), size)}
	if f.Signed && f.Size < 8 {
		shift := int64(64 - 8*f.Size)
		insns = append(insns, asm.LSh.Imm(dst, int32(shift)), asm.ArSh.Imm(dst, int32(shift)))
	}
	return insns, nil
}

// filterTGID returns early unless the current task belongs to tgid; it
// leaves the thread id in R7. bpf_get_current_pid_tgid returns
// tgid << 32 | pid (the thread id).
func filterTGID(tgid int) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1), // ctx, kept across calls
		asm.FnGetCurrentPidTgid.Call(),
		asm.Mov.Reg(asm.R7, asm.R0),
		asm.RSh.Imm(asm.R0, 32),
		asm.JNE.Imm(asm.R0, int32(tgid), "out"),
	}
}

// Stack layout of both programs (offsets from R10):
//
//	-24..-1   exit key {u32 tid; u32 pad; u64 code; u64 sub}, or the tid
//	-96..-25  a zeroed exitValue to insert
//	-104      the thread id, key of the state map
//	-144..-105 a zeroed thread state to insert
//	-152      the handle time across a call
const (
	offKey   = -24
	offValue = -96
	offTID   = -104
	offState = -144
	offDelta = -152 // the handle time, kept across a call
)

// exitValue is the exit map's value: one (thread, reason)'s numbers.
// Guest time: the thread's previous kvm_entry -> this kvm_exit; handle
// time: this kvm_exit -> the thread's next kvm_entry (both
// bpf_ktime_get_ns, CLOCK_MONOTONIC, taken when the program runs). Only
// the thread of the key writes it, one CPU at a time, so plain stores
// suffice; minima are 0 until the first sample.
type exitValue struct {
	Count                                        uint64
	GuestSum, GuestCount, GuestMin, GuestMax     uint64
	HandleSum, HandleCount, HandleMin, HandleMax uint64
}

// Field offsets in exitValue.
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
	exitValueSize
)

// Thread state (state map value): the last kvm_entry's time (0: none
// since the last exit), the last kvm_exit's time (0: closed by an
// entry) and that exit's key.
const (
	sEntry          = 0
	sExit           = 8
	sKey            = 16
	threadStateSize = 40
)

// zero stores n zero bytes (a multiple of 8) at R10+off.
func zero(off int16, n int) asm.Instructions {
	insns := asm.Instructions{asm.Mov.Imm(asm.R1, 0)}
	for i := 0; i < n; i += 8 {
		insns = append(insns, asm.StoreMem(asm.R10, off+int16(i), asm.R1, asm.DWord))
	}
	return insns
}

// lookupOrInsert leaves in R0 the map value for the key at R10+keyOff,
// inserting the zeroed value at R10+valOff first when the key is absent;
// it jumps to "out" if the map is full. label must be unique per use.
func lookupOrInsert(mapFD int, keyOff, valOff int16, valSize int, label string) asm.Instructions {
	lookup := asm.Instructions{
		asm.LoadMapPtr(asm.R1, mapFD),
		asm.Mov.Reg(asm.R2, asm.R10),
		asm.Add.Imm(asm.R2, int32(keyOff)),
		asm.FnMapLookupElem.Call(),
	}
	insns := append(asm.Instructions{}, lookup...)
	insns = append(insns, asm.JNE.Imm(asm.R0, 0, label+"_found"))
	insns = append(insns, zero(valOff, valSize)...)
	insns = append(insns,
		asm.LoadMapPtr(asm.R1, mapFD),
		asm.Mov.Reg(asm.R2, asm.R10),
		asm.Add.Imm(asm.R2, int32(keyOff)),
		asm.Mov.Reg(asm.R3, asm.R10),
		asm.Add.Imm(asm.R3, int32(valOff)),
		asm.Mov.Imm(asm.R4, 1), // BPF_NOEXIST
		asm.FnMapUpdateElem.Call(),
	)
	insns = append(insns, lookup...)
	insns = append(insns,
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.Mov.Reg(asm.R0, asm.R0).WithSymbol(label+"_found"),
	)
	return insns
}

// addSample adds the duration in R2 to the sum, count, min and max at
// base+off.. of the value in R9 (R3 is scratch).
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

// epilogue returns 1: a tracepoint program returning 0 makes the kernel
// skip every perf event of that tracepoint (perf_trace_run_bpf_submit),
// which would hide the events from perf kvm stat or mvm's own perf path
// running meanwhile.
func epilogue() asm.Instructions {
	return asm.Instructions{asm.Mov.Imm(asm.R0, 1).WithSymbol("out"), asm.Return()}
}

// exitProgram, on kvm_exit: counts the (thread, code, sub) key, adds the
// guest time since the thread's last kvm_entry, and leaves the exit
// pending in the thread's state for the next entry.
func exitProgram(exitFD, stateFD, tgid int, code, sub tracepoint.Field) (asm.Instructions, error) {
	insns := filterTGID(tgid)
	insns = append(insns,
		asm.StoreMem(asm.R10, offKey, asm.R7, asm.Word),
		asm.StoreImm(asm.R10, offKey+4, 0, asm.Word),
		asm.StoreMem(asm.R10, offTID, asm.R7, asm.Word),
	)
	lc, err := loadField(asm.R1, asm.R6, code)
	if err != nil {
		return nil, err
	}
	insns = append(insns, lc...)
	insns = append(insns, asm.StoreMem(asm.R10, offKey+8, asm.R1, asm.DWord))
	if sub.Name != "" {
		ls, err := loadField(asm.R1, asm.R6, sub)
		if err != nil {
			return nil, err
		}
		insns = append(insns, ls...)
	} else {
		insns = append(insns, asm.Mov.Imm(asm.R1, 0))
	}
	insns = append(insns, asm.StoreMem(asm.R10, offKey+16, asm.R1, asm.DWord))
	insns = append(insns, asm.FnKtimeGetNs.Call(), asm.Mov.Reg(asm.R8, asm.R0))
	insns = append(insns, lookupOrInsert(exitFD, offKey, offValue, exitValueSize, "val")...)
	insns = append(insns,
		asm.Mov.Reg(asm.R9, asm.R0),
		asm.LoadMem(asm.R3, asm.R9, vCount, asm.DWord),
		asm.Add.Imm(asm.R3, 1),
		asm.StoreMem(asm.R9, vCount, asm.R3, asm.DWord),
	)
	insns = append(insns, lookupOrInsert(stateFD, offTID, offState, threadStateSize, "st")...)
	insns = append(insns,
		asm.LoadMem(asm.R1, asm.R0, sEntry, asm.DWord),
		asm.JEq.Imm(asm.R1, 0, "pend"),
		asm.Mov.Reg(asm.R2, asm.R8),
		asm.Sub.Reg(asm.R2, asm.R1),
	)
	insns = append(insns, addSample(vGuestSum, vGuestCount, vGuestMin, vGuestMax, "guest")...)
	insns = append(insns,
		asm.Mov.Imm(asm.R1, 0).WithSymbol("pend"),
		asm.StoreMem(asm.R0, sEntry, asm.R1, asm.DWord),
		asm.StoreMem(asm.R0, sExit, asm.R8, asm.DWord),
	)
	for i := int16(0); i < 24; i += 8 {
		insns = append(insns,
			asm.LoadMem(asm.R1, asm.R10, offKey+i, asm.DWord),
			asm.StoreMem(asm.R0, sKey+i, asm.R1, asm.DWord),
		)
	}
	return append(insns, epilogue()...), nil
}

// entryProgram, on kvm_entry: counts the thread's entries, closes its
// pending exit with the handle time, and records the entry's time.
func entryProgram(exitFD, stateFD, entryFD, tgid int) asm.Instructions {
	insns := filterTGID(tgid)
	insns = append(insns,
		asm.StoreMem(asm.R10, offTID, asm.R7, asm.Word),
		asm.FnKtimeGetNs.Call(),
		asm.Mov.Reg(asm.R8, asm.R0),
	)
	insns = append(insns, lookupOrInsert(entryFD, offTID, offValue, 8, "ent")...)
	insns = append(insns,
		asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
		asm.Add.Imm(asm.R1, 1),
		asm.StoreMem(asm.R0, 0, asm.R1, asm.DWord),
	)
	insns = append(insns, lookupOrInsert(stateFD, offTID, offState, threadStateSize, "st")...)
	insns = append(insns,
		asm.Mov.Reg(asm.R7, asm.R0), // the state, kept across the next lookup
		asm.StoreMem(asm.R7, sEntry, asm.R8, asm.DWord),
		asm.LoadMem(asm.R1, asm.R7, sExit, asm.DWord),
		asm.JEq.Imm(asm.R1, 0, "out"),
		asm.Mov.Imm(asm.R2, 0),
		asm.StoreMem(asm.R7, sExit, asm.R2, asm.DWord),
		asm.Mov.Reg(asm.R2, asm.R8),
		asm.Sub.Reg(asm.R2, asm.R1),
		asm.StoreMem(asm.R10, offDelta, asm.R2, asm.DWord),
	)
	for i := int16(0); i < 24; i += 8 {
		insns = append(insns,
			asm.LoadMem(asm.R1, asm.R7, sKey+i, asm.DWord),
			asm.StoreMem(asm.R10, offKey+i, asm.R1, asm.DWord),
		)
	}
	insns = append(insns,
		asm.LoadMapPtr(asm.R1, exitFD),
		asm.Mov.Reg(asm.R2, asm.R10),
		asm.Add.Imm(asm.R2, offKey),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.Mov.Reg(asm.R9, asm.R0),
		asm.LoadMem(asm.R2, asm.R10, offDelta, asm.DWord),
	)
	insns = append(insns, addSample(vHandleSum, vHandleCount, vHandleMin, vHandleMax, "handle")...)
	return append(insns, epilogue()...)
}

// Namer is the reason namer chosen from the kvm_exit format.
func (c *Counter) Namer() exits.Namer { return c.namer }

// Snapshot reads the maps and groups the counts by vCPU with vcpuOf
// (thread id -> vCPU; ok false gathers the thread under vCPU -1), in the
// form of the perf_event path's aggregate (counts only).
func (c *Counter) Snapshot(vcpuOf func(tid int) (int, bool)) ([]tracepoint.VCPUStats, error) {
	byVCPU := map[int]*tracepoint.VCPUStats{}
	reasons := map[int]map[string]*tracepoint.ReasonStats{}
	get := func(tid uint32) (*tracepoint.VCPUStats, map[string]*tracepoint.ReasonStats) {
		v, ok := vcpuOf(int(tid))
		if !ok {
			v = -1
		}
		if _, ok := byVCPU[v]; !ok {
			byVCPU[v] = &tracepoint.VCPUStats{VCPU: v}
			reasons[v] = map[string]*tracepoint.ReasonStats{}
		}
		return byVCPU[v], reasons[v]
	}
	var k exitKey
	var ev exitValue
	it := c.exitMap.Iterate()
	for it.Next(&k, &ev) {
		_, rs := get(k.TID)
		name := c.namer.ExitName(k.Code, k.Sub)
		r, ok := rs[name]
		if !ok {
			r = &tracepoint.ReasonStats{Reason: name}
			rs[name] = r
		}
		mergeValue(r, ev)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read the BPF exit map: %w", err)
	}
	var tid uint32
	var n uint64
	it = c.entries.Iterate()
	for it.Next(&tid, &n) {
		v, _ := get(tid)
		v.Entries += n
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read the BPF entry map: %w", err)
	}
	ids := make([]int, 0, len(byVCPU))
	for id := range byVCPU {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := make([]tracepoint.VCPUStats, 0, len(ids))
	for _, id := range ids {
		v := *byVCPU[id]
		for _, r := range reasons[id] {
			v.Reasons = append(v.Reasons, *r)
		}
		slices.SortFunc(v.Reasons, func(a, b tracepoint.ReasonStats) int {
			if c := cmp.Compare(b.Count, a.Count); c != 0 {
				return c
			}
			return cmp.Compare(a.Reason, b.Reason)
		})
		out = append(out, v)
	}
	return out, nil
}

// mergeValue adds one thread's numbers for a reason into r.
func mergeValue(r *tracepoint.ReasonStats, v exitValue) {
	r.Merge(&tracepoint.ReasonStats{
		Count:      v.Count,
		GuestCount: v.GuestCount, GuestSumNS: v.GuestSum, GuestMinNS: v.GuestMin, GuestMaxNS: v.GuestMax,
		HandleCount: v.HandleCount, HandleSumNS: v.HandleSum, HandleMinNS: v.HandleMin, HandleMaxNS: v.HandleMax,
	})
}

// Close detaches the programs and frees the maps.
func (c *Counter) Close() error {
	var errs []error
	for _, l := range c.links {
		errs = append(errs, l.Close())
	}
	for _, p := range c.progs {
		errs = append(errs, p.Close())
	}
	for _, m := range []*ebpf.Map{c.exitMap, c.entries, c.state} {
		if m != nil {
			errs = append(errs, m.Close())
		}
	}
	c.links, c.progs, c.exitMap, c.entries, c.state = nil, nil, nil, nil, nil
	return errors.Join(errs...)
}
