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
	if c.exitMap, err = ebpf.NewMap(&ebpf.MapSpec{Name: "mvm_exits", Type: ebpf.Hash, KeySize: 24, ValueSize: 8, MaxEntries: maxKeys}); err != nil {
		return nil, permErr("create the BPF exit map", err)
	}
	if c.entries, err = ebpf.NewMap(&ebpf.MapSpec{Name: "mvm_entries", Type: ebpf.Hash, KeySize: 4, ValueSize: 8, MaxEntries: maxKeys}); err != nil {
		return nil, permErr("create the BPF entry map", err)
	}
	exitInsns, err := exitProgram(c.exitMap.FD(), tgid, code, sub)
	if err != nil {
		return nil, err
	}
	for _, p := range []struct {
		name  string
		insns asm.Instructions
	}{
		{"kvm_exit", exitInsns},
		{"kvm_entry", entryProgram(c.entries.FD(), tgid)},
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

// addOne adds 1 to the map value for the key at R10+keyOff, inserting it
// with 1 when absent. A key is one thread's, and a thread runs on one CPU
// at a time, so no other CPU inserts the same key meanwhile.
func addOne(mapFD int, keyOff int16) asm.Instructions {
	return asm.Instructions{
		asm.LoadMapPtr(asm.R1, mapFD),
		asm.Mov.Reg(asm.R2, asm.R10),
		asm.Add.Imm(asm.R2, int32(keyOff)),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "insert"),
		asm.Mov.Imm(asm.R1, 1),
		asm.StoreXAdd(asm.R0, asm.R1, asm.DWord),
		asm.Ja.Label("out"),
		asm.Mov.Imm(asm.R1, 1).WithSymbol("insert"),
		asm.StoreMem(asm.R10, -32, asm.R1, asm.DWord),
		asm.LoadMapPtr(asm.R1, mapFD),
		asm.Mov.Reg(asm.R2, asm.R10),
		asm.Add.Imm(asm.R2, int32(keyOff)),
		asm.Mov.Reg(asm.R3, asm.R10),
		asm.Add.Imm(asm.R3, -32),
		asm.Mov.Imm(asm.R4, 1), // BPF_NOEXIST
		asm.FnMapUpdateElem.Call(),
		// Return 1: a tracepoint program returning 0 makes the kernel
		// skip every perf event of that tracepoint
		// (perf_trace_run_bpf_submit), which would hide the events
		// from perf kvm stat or mvm's own perf path running meanwhile.
		asm.Mov.Imm(asm.R0, 1).WithSymbol("out"),
		asm.Return(),
	}
}

// exitProgram counts kvm_exit per (thread, code, sub): the key {u32 tid;
// u32 pad; u64 code; u64 sub} at R10-24.
func exitProgram(mapFD, tgid int, code, sub tracepoint.Field) (asm.Instructions, error) {
	insns := filterTGID(tgid)
	insns = append(insns,
		asm.StoreMem(asm.R10, -24, asm.R7, asm.Word),
		asm.StoreImm(asm.R10, -20, 0, asm.Word),
	)
	lc, err := loadField(asm.R1, asm.R6, code)
	if err != nil {
		return nil, err
	}
	insns = append(insns, lc...)
	insns = append(insns, asm.StoreMem(asm.R10, -16, asm.R1, asm.DWord))
	if sub.Name != "" {
		ls, err := loadField(asm.R1, asm.R6, sub)
		if err != nil {
			return nil, err
		}
		insns = append(insns, ls...)
		insns = append(insns, asm.StoreMem(asm.R10, -8, asm.R1, asm.DWord))
	} else {
		insns = append(insns, asm.Mov.Imm(asm.R1, 0), asm.StoreMem(asm.R10, -8, asm.R1, asm.DWord))
	}
	return append(insns, addOne(mapFD, -24)...), nil
}

// entryProgram counts kvm_entry per thread: the key {u32 tid} at R10-24.
func entryProgram(mapFD, tgid int) asm.Instructions {
	insns := filterTGID(tgid)
	insns = append(insns, asm.StoreMem(asm.R10, -24, asm.R7, asm.Word))
	return append(insns, addOne(mapFD, -24)...)
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
	var n uint64
	it := c.exitMap.Iterate()
	for it.Next(&k, &n) {
		_, rs := get(k.TID)
		name := c.namer.ExitName(k.Code, k.Sub)
		r, ok := rs[name]
		if !ok {
			r = &tracepoint.ReasonStats{Reason: name}
			rs[name] = r
		}
		r.Count += n
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read the BPF exit map: %w", err)
	}
	var tid uint32
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

// Close detaches the programs and frees the maps.
func (c *Counter) Close() error {
	var errs []error
	for _, l := range c.links {
		errs = append(errs, l.Close())
	}
	for _, p := range c.progs {
		errs = append(errs, p.Close())
	}
	for _, m := range []*ebpf.Map{c.exitMap, c.entries} {
		if m != nil {
			errs = append(errs, m.Close())
		}
	}
	c.links, c.progs, c.exitMap, c.entries = nil, nil, nil, nil
	return errors.Join(errs...)
}
