//go:build linux

package bpfagg

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"

	"github.com/mvm-dev/mvm/exits"
	"github.com/mvm-dev/mvm/exits/tracepoint"
)

// Map bounds. Rows: threads x reasons x breakdown keys (72-byte values);
// histograms: VM-wide (reason, key) pairs of 8.7 KiB each, preallocated
// like every map here (an allocation in the kernel's tracepoint context
// can fail, an exit must not be lost to it): 4.5 MiB.
// Slots: thread states by the thread id's low bits (a VMM's threads have
// nearby ids, so they rarely share one; one that does goes to the thread
// map), 120 KiB.
const (
	maxThreads = 1 << 14
	maxRows    = 1 << 15
	maxHists   = 512
	numSlots   = 1 << 10
	// Histogram slots: the VM-wide histograms of the keys that pack into
	// a word and find their slot free (most keys, the hottest first), by
	// the key's hash; the others go to the histogram map. 2.2 MiB.
	histSlotBits = 8
	// Device addresses: (reason, device, IPA) counts, and per (reason,
	// device) the distinct IPAs kept and the exits past them.
	maxAddrs    = 1 << 12
	maxAddrRows = 1 << 9
)

// Config says what to count.
type Config struct {
	// Tracefs is the tracefs directory (tracepoint.Probe finds it).
	Tracefs string
	// TGID is the process whose threads are counted.
	TGID int
	// Layout names the guest-physical regions of the DABT_LOW/IABT_LOW
	// breakdown (empty: another VMM's guest, all "no memory map").
	Layout exits.Layout
	// NoBreakdown leaves out the detail events and the histograms: counts
	// and times per reason only.
	NoBreakdown bool
	// NoRaw uses perf tracepoint programs even where raw tracepoints
	// work (to compare their cost).
	NoRaw bool
	// TIDs are the vCPU threads in vCPU order, when known (mvm's own):
	// with Layout.VCPUs they give the boot phases.
	TIDs []int
	// NoVCPURead keys SYS64 exits by kvm_handle_sys_reg's event even
	// where kvm_entry's program can read the ESR from the vCPU (to compare
	// the two; vcpuesr_linux.go).
	NoVCPURead bool
}

// rowKey is the row map's key: the thread, the raw reason fields and the
// breakdown key (0 for reasons without one), as the programs write it.
type rowKey struct {
	TID    uint32
	Phase  uint32
	Code   uint64
	Sub    uint64
	Detail uint64
}

// rowValue is the row map's value (offsets v*).
type rowValue struct {
	Count                                        uint64
	GuestSum, GuestCount, GuestMin, GuestMax     uint64
	HandleSum, HandleCount, HandleMin, HandleMax uint64
}

// threadState is the state map's value (offsets s*).
type threadState struct {
	Entry, Exit, Code, Sub, Detail uint64
	Guest, HasGuest, Class         uint64
	Entries, Drops, HistDrops      uint64
	VCPU, Entered, SawKernel       uint64
	Owner                          uint64
	// The open row (programs_linux.go's sO*).
	OPhase, OCode, OSub, ODetail uint64
	ORow                         rowValue
}

// phaseBounds is the phase map's value (offsets g*).
type phaseBounds struct {
	First, CPUOn, AllIn, User, Mark, FirstUser, SecIn, VCPUs uint64
}

// histKey is the hist map's key: a row key without its thread.
type histKey struct{ Code, Sub, Detail uint64 }

// Counter counts kvm_exit and kvm_entry of one process in the kernel.
type Counter struct {
	cfg   Config
	namer exits.Namer
	rows  *ebpf.Map
	state *ebpf.Map
	// slots is the slot map (thread states by thread id's low bits),
	// slotMem its values, mapped.
	// histSlots is the histogram slot map (1<<histSlotBits slots).
	histSlots    *ebpf.Map
	histSlotBits int
	// addrs and addrRows count the device addresses (nil: not kept).
	addrs, addrRows *ebpf.Map
	slots           *ebpf.Map
	slotMem         []byte
	nSlots          int
	hists           *ebpf.Map
	zero            *ebpf.Map
	phase           *ebpf.Map
	// phaseMem is the phase map's value, mapped (nil without phases);
	// smcMem the SMC note map's values, one per vCPU.
	phaseMem []byte
	smc      *ebpf.Map
	smcMem   []byte
	progs    []*ebpf.Program
	links    []link.Link
	raw      bool
	events   []string
	// progEvents names the kvm event of each of progs (same order:
	// kvm_exit first), for Reattach.
	progEvents []string
	// rawErr is why raw tracepoints were not used (nil if they were).
	rawErr error
	// esr: kvm_entry's program keys SYS64 exits from the vCPU's ESR;
	// esrErr is why not (nil if it does or was not asked to).
	esr    bool
	esrErr error
}

// New loads and attaches the programs for the threads of process cfg.TGID:
// raw tracepoint programs (BPF_PROG_TYPE_RAW_TRACEPOINT: no trace record is
// built per event) where the kernel's tracepoint arguments carry the
// fields (arm64), else perf tracepoint programs reading the fields at their
// tracefs offsets. It fails when BPF is not allowed (no CAP_BPF and
// CAP_PERFMON, or root); the error says so.
func New(cfg Config) (_ *Counter, err error) {
	exit, err := tracepoint.ReadFormat(cfg.Tracefs, "kvm", "kvm_exit")
	if err != nil {
		return nil, err
	}
	// kvm_entry's fields are not read, but it must exist.
	if _, err := tracepoint.ReadFormat(cfg.Tracefs, "kvm", "kvm_entry"); err != nil {
		return nil, err
	}
	namer, err := exits.NamerForFields(func(name string) bool { _, ok := exit.Field(name); return ok })
	if err != nil {
		return nil, fmt.Errorf("kvm:kvm_exit: %w", err)
	}
	// Kernels before 5.11 charge BPF memory to RLIMIT_MEMLOCK.
	_ = rlimit.RemoveMemlock()

	c := &Counter{cfg: cfg, namer: namer}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	if c.rows, err = ebpf.NewMap(&ebpf.MapSpec{Name: "mvm_rows", Type: ebpf.Hash, KeySize: 32, ValueSize: rowValueSize, MaxEntries: maxRows}); err != nil {
		return nil, permErr("create the BPF row map", err)
	}
	if c.state, err = ebpf.NewMap(&ebpf.MapSpec{Name: "mvm_threads", Type: ebpf.Hash, KeySize: 4, ValueSize: stateSize, MaxEntries: maxThreads}); err != nil {
		return nil, permErr("create the BPF thread map", err)
	}
	if err := c.openSlots(numSlots); err != nil {
		return nil, err
	}
	breakdown := !cfg.NoBreakdown && namer.Arch() == "arm64"
	if !cfg.NoBreakdown {
		if c.hists, err = ebpf.NewMap(&ebpf.MapSpec{Name: "mvm_hists", Type: ebpf.Hash, KeySize: 24, ValueSize: histValueSize, MaxEntries: maxHists}); err != nil {
			return nil, permErr("create the BPF histogram map", err)
		}
		if c.zero, err = ebpf.NewMap(&ebpf.MapSpec{Name: "mvm_zero", Type: ebpf.Array, KeySize: 4, ValueSize: histValueSize, MaxEntries: 1}); err != nil {
			return nil, permErr("create the BPF zero map", err)
		}
		if err := c.openHistSlots(histSlotBits); err != nil {
			return nil, err
		}
	}
	if breakdown {
		if err := c.openAddrs(maxAddrs, maxAddrRows); err != nil {
			return nil, err
		}
	}
	env := progEnv{tgid: cfg.TGID, slotFD: c.slots.FD(), slotMask: numSlots - 1, stateFD: c.state.FD(), rowFD: c.rows.FD(), histsOff: cfg.NoBreakdown,
		regions: cfg.Layout.Regions, breakdown: breakdown}
	if c.hists != nil {
		env.histFD, env.zeroFD = c.hists.FD(), c.zero.FD()
		env.histSlotFD, env.histSlotBits = c.histSlots.FD(), c.histSlotBits
	}
	if c.addrs != nil {
		env.addrFD, env.addrRowFD = c.addrs.FD(), c.addrRows.FD()
	}
	if breakdown && cfg.Layout.VCPUs > 0 {
		if err := c.openPhases(&env); err != nil {
			return nil, err
		}
	}
	if len(env.regions) > 64 {
		env.regions = env.regions[:64] // the rest count as unmapped
	}
	if namer.Arch() == "arm64" && !cfg.NoRaw {
		if breakdown && !cfg.NoVCPURead {
			env.esr, c.esrErr = findVCPUESR()
		}
		err := c.attach(env, true, exit)
		if err != nil && env.esr.varID != 0 {
			// The verifier refused the ESR read (an older kernel):
			// key SYS64 exits by their event.
			c.esrErr = err
			c.detach()
			env.esr = vcpuESR{}
			err = c.attach(env, true, exit)
		}
		if err == nil {
			return c, nil
		} else {
			c.rawErr = err
			c.detach()
		}
	} else if cfg.NoRaw {
		c.rawErr = errors.New("not asked for")
	} else {
		c.rawErr = fmt.Errorf("%s's kvm_exit arguments do not carry the exit reason", namer.Arch())
	}
	if err := c.attach(env, false, exit); err != nil {
		return nil, err
	}
	return c, nil
}

// detail is one detail event: its tracepoint, raw argument index and
// field name.
type detail struct {
	kind  detailKind
	event string
	arg   int
	field string
}

// arm64Details are the detail events, with their TP_PROTO argument
// (arch/arm64/kvm/trace_arm.h, trace_handle_exit.h) and record field.
var arm64Details = []detail{
	{detailWFx, "kvm_wfx_arm64", 1, "is_wfe"},      // (vcpu_pc, is_wfe)
	{detailHVC, "kvm_hvc_arm64", 1, "r0"},          // (vcpu_pc, r0, imm)
	{detailSysESR, "kvm_handle_sys_reg", 0, "hsr"}, // (hsr); the field is esr in later kernels
	{detailFault, "kvm_guest_fault", 3, "ipa"},     // (vcpu_pc, hsr, hxfar, ipa)
}

// attach loads and attaches every program, raw or perf tracepoint ones.
func (c *Counter) attach(env progEnv, raw bool, exit *tracepoint.Format) error {
	env.raw = raw
	if !raw {
		env.esr = vcpuESR{}
	}
	typ := ebpf.TracePoint
	if raw {
		typ = ebpf.RawTracepoint
		// kvm_exit(int ret, unsigned int esr_ec, unsigned long vcpu_pc),
		// arch/arm64/kvm/trace_arm.h.
		// The arguments are what KVM passes, not the record's fields:
		// exitProgram applies the record's TP_fast_assign (the SError
		// bit masked off ret, esr_ec 0 unless a trap).
		env.code = arg{Name: "ret", Offset: 0, Size: 4}
		env.sub = rawArg(1)
		env.pc = rawArg(2)
	} else {
		env.code, _ = exit.Field(c.namer.CodeField())
		env.sub, _ = exit.Field(c.namer.SubField())
		var ok bool
		if env.pc, ok = exit.Field("vcpu_pc"); !ok {
			env.phases = false
		}
	}
	type prog struct {
		name  string
		insns asm.Instructions
	}
	exitInsns, err := env.exitProgram()
	if err != nil {
		return err
	}
	progs := []prog{{"kvm_exit", exitInsns}, {"kvm_entry", env.entryProgram()}}
	if env.breakdown {
		env.detailArg = map[detailKind]arg{}
		for _, d := range arm64Details {
			if d.kind == detailSysESR && env.esr.varID != 0 {
				continue // kvm_entry's program reads the ESR
			}
			if raw {
				env.detailArg[d.kind] = rawArg(d.arg)
			} else {
				f, err := tracepoint.ReadFormat(c.cfg.Tracefs, "kvm", d.event)
				if err != nil {
					continue
				}
				fd, ok := f.Field(d.field)
				if !ok && d.field == "hsr" {
					fd, ok = f.Field("esr")
				}
				if !ok {
					continue
				}
				env.detailArg[d.kind] = fd
			}
			if raw {
				if _, err := tracepoint.ReadFormat(c.cfg.Tracefs, "kvm", d.event); err != nil {
					continue // this kernel has no such event: "unknown" rows
				}
			}
			insns, err := env.detailProgram(d.kind)
			if err != nil {
				return err
			}
			progs = append(progs, prog{d.event, insns})
		}
	}
	// Every program is loaded (the verifier's walk is the slow part:
	// tens of milliseconds each in the lab) before any is attached, so
	// counting starts within a few system calls of the caller's next step
	// (mvm profile --pid takes the KVM stats baseline right after; the
	// tracepoints must cover that window, and not much more).
	loaded := make([]*ebpf.Program, 0, len(progs))
	for _, p := range progs {
		pr, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "mvm_" + shortName(p.name), Type: typ, License: "GPL", Instructions: p.insns})
		if err != nil {
			return permErr("load the BPF program for kvm:"+p.name, err)
		}
		c.progs = append(c.progs, pr)
		loaded = append(loaded, pr)
	}
	var events []string
	for i, p := range progs {
		var l link.Link
		var err error
		if raw {
			l, err = link.AttachRawTracepoint(link.RawTracepointOptions{Name: p.name, Program: loaded[i]})
		} else {
			l, err = link.Tracepoint("kvm", p.name, loaded[i], nil)
		}
		if err != nil {
			return permErr("attach the BPF program to kvm:"+p.name, err)
		}
		c.links = append(c.links, l)
		events = append(events, "kvm:"+p.name)
	}
	c.raw, c.events, c.esr = raw, events, env.esr.varID != 0
	c.progEvents = nil
	for _, p := range progs {
		c.progEvents = append(c.progEvents, p.name)
	}
	return nil
}

// Detach stops counting: it closes the programs' links, kvm_exit's first
// (so that an exit seen last still meets its kvm_entry while that program
// is attached), and keeps the programs loaded and the maps as they are, so
// that Reattach needs no verifier walk. A sampling profile (mvm run
// --profile=light) attaches them for short windows because an attached
// tracepoint costs on every exit whatever its program does.
func (c *Counter) Detach() error {
	var errs []error
	for _, l := range c.links {
		errs = append(errs, l.Close())
	}
	c.links = nil
	return errors.Join(errs...)
}

// Reattach links the loaded programs again after Detach: kvm_entry and
// the detail events before kvm_exit, so that the first exit counted has
// its thread's entry time from this window. Call ClearPending between the
// two, or the first events pair with events from before the gap.
func (c *Counter) Reattach() error {
	if len(c.links) > 0 {
		return errors.New("BPF programs are attached already")
	}
	order := make([]int, 0, len(c.progs))
	for i := 1; i < len(c.progs); i++ {
		order = append(order, i)
	}
	order = append(order, 0)
	for _, i := range order {
		var l link.Link
		var err error
		if c.raw {
			l, err = link.AttachRawTracepoint(link.RawTracepointOptions{Name: c.progEvents[i], Program: c.progs[i]})
		} else {
			l, err = link.Tracepoint("kvm", c.progEvents[i], c.progs[i], nil)
		}
		if err != nil {
			_ = c.Detach()
			return permErr("attach the BPF program to kvm:"+c.progEvents[i], err)
		}
		c.links = append(c.links, l)
	}
	return nil
}

// ClearPending forgets, while detached, every thread's last kvm_entry time
// and the exit still waiting for its kvm_entry (already counted by
// Snapshot, which reads it from the thread's state, so read a snapshot
// first): after a gap the next kvm_exit would otherwise get the gap as its
// guest time and the waiting exit the gap as its handling time. A program
// still running when its link was closed can write one state after this;
// that costs one exit's times, not a count.
func (c *Counter) ClearPending() error {
	clear := func(st *threadState) {
		for _, w := range []*uint64{&st.Entry, &st.Exit, &st.HasGuest} {
			(*atomic.Uint64)(unsafe.Pointer(w)).Store(0)
		}
	}
	for i := range c.nSlots {
		if p := c.slot(i); (*atomic.Uint64)(unsafe.Pointer(&p.Owner)).Load() != 0 {
			clear(p)
		}
	}
	var tid uint32
	var st threadState
	var tids []uint32
	it := c.state.Iterate()
	for it.Next(&tid, &st) {
		tids = append(tids, tid)
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("read the BPF thread map: %w", err)
	}
	for _, tid := range tids {
		if err := c.state.Lookup(tid, &st); err != nil {
			continue // gone since
		}
		st.Entry, st.Exit, st.HasGuest = 0, 0, 0
		if err := c.state.Put(tid, st); err != nil {
			return fmt.Errorf("BPF thread map: %w", err)
		}
	}
	return nil
}

// openPhases creates the phase map, maps its value and gives the vCPU
// threads their vCPU numbers.
func (c *Counter) openPhases(env *progEnv) error {
	var err error
	if c.phase, err = ebpf.NewMap(&ebpf.MapSpec{Name: "mvm_phase", Type: ebpf.Array, KeySize: 4, ValueSize: phaseSize, MaxEntries: 1, Flags: unix.BPF_F_MMAPABLE}); err != nil {
		return permErr("create the BPF phase map", err)
	}
	if c.phaseMem, err = unix.Mmap(c.phase.FD(), 0, os.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		c.phaseMem = nil
		return fmt.Errorf("map the BPF phase map: %w", err)
	}
	c.phaseWord(gVCPUs).Store(uint64(c.cfg.Layout.VCPUs))
	if n := len(c.cfg.TIDs); n > 0 {
		if c.smc, err = ebpf.NewMap(&ebpf.MapSpec{Name: "mvm_smc", Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: uint32(n), Flags: unix.BPF_F_MMAPABLE}); err != nil {
			return permErr("create the BPF SMC note map", err)
		}
		size := (8*n + os.Getpagesize() - 1) / os.Getpagesize() * os.Getpagesize()
		if c.smcMem, err = unix.Mmap(c.smc.FD(), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
			c.smcMem = nil
			return fmt.Errorf("map the BPF SMC note map: %w", err)
		}
		env.smcFD = c.smc.FD()
	}
	for i, tid := range c.cfg.TIDs {
		if err := c.putState(uint32(tid), threadState{VCPU: uint64(i + 1)}); err != nil {
			return err
		}
	}
	env.phases, env.phaseFD, env.ram = true, c.phase.FD(), c.cfg.Layout.RAM
	return nil
}

// openSlots creates the slot map of n (a power of two) thread states and
// maps its values: Snapshot reads them without a system call per slot.
func (c *Counter) openSlots(n int) error {
	var err error
	c.nSlots = n
	if c.slots, err = ebpf.NewMap(&ebpf.MapSpec{Name: "mvm_slots", Type: ebpf.Array, KeySize: 4, ValueSize: stateSize, MaxEntries: uint32(n), Flags: unix.BPF_F_MMAPABLE}); err != nil {
		return permErr("create the BPF slot map", err)
	}
	size := (n*stateSize + os.Getpagesize() - 1) / os.Getpagesize() * os.Getpagesize()
	if c.slotMem, err = unix.Mmap(c.slots.FD(), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		c.slotMem = nil
		return fmt.Errorf("map the BPF slot map: %w", err)
	}
	return nil
}

// openHistSlots creates the histogram slot map of 1<<bits slots.
func (c *Counter) openHistSlots(bits int) error {
	var err error
	c.histSlotBits = bits
	if c.histSlots, err = ebpf.NewMap(&ebpf.MapSpec{Name: "mvm_hslots", Type: ebpf.Array, KeySize: 4, ValueSize: histSlotSize, MaxEntries: 1 << bits}); err != nil {
		return permErr("create the BPF histogram slot map", err)
	}
	return nil
}

// openAddrs creates the device address maps.
func (c *Counter) openAddrs(addrs, rows int) error {
	var err error
	if c.addrs, err = ebpf.NewMap(&ebpf.MapSpec{Name: "mvm_addrs", Type: ebpf.Hash, KeySize: 24, ValueSize: 8, MaxEntries: uint32(addrs)}); err != nil {
		return permErr("create the BPF address map", err)
	}
	if c.addrRows, err = ebpf.NewMap(&ebpf.MapSpec{Name: "mvm_addr_rows", Type: ebpf.Hash, KeySize: 16, ValueSize: 16, MaxEntries: uint32(rows)}); err != nil {
		return permErr("create the BPF address row map", err)
	}
	return nil
}

// addresses reads the device address maps: per reason and device row
// name, the top addresses as the perf path lists them.
func (c *Counter) addresses() (map[string]map[string][]exits.AddressCount, error) {
	type rowKey struct {
		reason, key string
	}
	counts := map[rowKey]map[uint64]uint64{}
	more := map[rowKey]uint64{}
	name := func(sub, key uint64) rowKey {
		return rowKey{c.namer.ExitName(exits.Arm64ExceptionTrap, sub), c.cfg.Layout.KeyName(key)}
	}
	var ak struct{ Sub, Key, IPA uint64 }
	var n uint64
	it := c.addrs.Iterate()
	for it.Next(&ak, &n) {
		k := name(ak.Sub, ak.Key)
		if counts[k] == nil {
			counts[k] = map[uint64]uint64{}
		}
		counts[k][ak.IPA] += n
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read the BPF address map: %w", err)
	}
	var rk struct{ Sub, Key uint64 }
	var rv struct{ Kept, More uint64 }
	it = c.addrRows.Iterate()
	for it.Next(&rk, &rv) {
		more[name(rk.Sub, rk.Key)] += rv.More
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read the BPF address row map: %w", err)
	}
	out := map[string]map[string][]exits.AddressCount{}
	for k, m := range counts {
		if out[k.reason] == nil {
			out[k.reason] = map[string][]exits.AddressCount{}
		}
		out[k.reason][k.key] = exits.TopAddresses(m, more[k])
	}
	return out, nil
}

// slot is the state in slot i of the slot map, shared with the programs.
func (c *Counter) slot(i int) *threadState {
	return (*threadState)(unsafe.Pointer(&c.slotMem[i*stateSize]))
}

// putState gives thread tid its state before the programs run: in its
// slot if free, else in the thread map.
func (c *Counter) putState(tid uint32, st threadState) error {
	if s := c.slot(int(tid) & (c.nSlots - 1)); s.Owner == 0 || s.Owner == uint64(tid) {
		st.Owner = uint64(tid)
		*s = st
		return nil
	}
	if err := c.state.Put(tid, st); err != nil {
		return fmt.Errorf("BPF thread map: %w", err)
	}
	return nil
}

// eachState calls fn with every thread's state: the slots' (read while
// the programs may write them: each word is read whole, a state can
// trail by the event being counted), then the thread map's.
func (c *Counter) eachState(fn func(tid uint32, st threadState)) error {
	for i := range c.nSlots {
		p := c.slot(i)
		owner := (*atomic.Uint64)(unsafe.Pointer(&p.Owner)).Load()
		if owner == 0 {
			continue
		}
		var st threadState
		words := (*[stateSize / 8]uint64)(unsafe.Pointer(p))
		out := (*[stateSize / 8]uint64)(unsafe.Pointer(&st))
		for w := range words {
			out[w] = (*atomic.Uint64)(unsafe.Pointer(&words[w])).Load()
		}
		fn(uint32(owner), st)
	}
	var tid uint32
	var st threadState
	it := c.state.Iterate()
	for it.Next(&tid, &st) {
		fn(tid, st)
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("read the BPF thread map: %w", err)
	}
	return nil
}

// phaseWord is the phase map's u64 at off, shared with the programs.
func (c *Counter) phaseWord(off int) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&c.phaseMem[off]))
}

// MarkUserspace records the guest's userspace marker at CLOCK_MONOTONIC
// time at: the precise edge, which wins over the first user-PC exit. It
// makes no system call (the VMM calls it under its seccomp filter).
func (c *Counter) MarkUserspace(at uint64) {
	if c == nil || c.phaseMem == nil {
		return
	}
	if c.phaseWord(gMark).CompareAndSwap(0, at) {
		c.phaseWord(gUser).Store(at)
	}
}

// NoteSMC tells the programs the SMCCC function ID of the SMC that vCPU
// vcpu is handling now (the VMM serves it between that kvm_exit and the
// next kvm_entry, which keys the exit with it). No system call.
func (c *Counter) NoteSMC(vcpu int, fid uint32) {
	if c == nil || c.smcMem == nil || vcpu < 0 || 8*vcpu+8 > len(c.smcMem) || vcpu >= len(c.cfg.TIDs) {
		return
	}
	(*atomic.Uint64)(unsafe.Pointer(&c.smcMem[8*vcpu])).Store(uint64(fid) | 1<<32)
}

// bounds reads the phase boundaries.
func (c *Counter) bounds() exits.PhaseBounds {
	w := func(off int) uint64 { return c.phaseWord(off).Load() }
	return exits.PhaseBounds{First: w(gFirst), CPUOn: w(gCPUOn), AllIn: w(gAllIn), User: w(gUser),
		Mark: w(gMark), FirstUser: w(gFirstUser), VCPUs: c.cfg.Layout.VCPUs}
}

// shortName fits a program name in the kernel's 15 characters.
func shortName(event string) string {
	n := strings.TrimPrefix(event, "kvm_")
	if len(n) > 11 {
		n = n[:11]
	}
	return n
}

func (c *Counter) detach() {
	for _, l := range c.links {
		l.Close()
	}
	for _, p := range c.progs {
		p.Close()
	}
	c.links, c.progs = nil, nil
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

// Namer is the reason namer chosen from the kvm_exit format.
func (c *Counter) Namer() exits.Namer { return c.namer }

// Describe says, for the Sources list, how the counter counts: which
// program type on which events, and why not raw tracepoints.
func (c *Counter) Describe() string {
	var b strings.Builder
	b.WriteString("counted, timed")
	if c.hists != nil {
		b.WriteString(" and histogrammed")
	}
	b.WriteString(" per thread, reason")
	if len(c.events) > 2 {
		b.WriteString(", breakdown key")
	}
	if c.phaseMem != nil {
		b.WriteString(" and boot phase")
	}
	b.WriteString(" in the kernel by BPF programs on ")
	b.WriteString(strings.Join(c.events, ", "))
	if c.raw {
		b.WriteString(" (raw tracepoints)")
		if c.esr {
			b.WriteString("; SYS64 keyed from the vCPU's ESR at kvm_entry (kernel BTF), not by kvm:kvm_handle_sys_reg")
		} else if c.esrErr != nil {
			fmt.Fprintf(&b, "; SYS64 keyed by kvm:kvm_handle_sys_reg (the vCPU's ESR not read: %v)", c.esrErr)
		}
	} else {
		fmt.Fprintf(&b, " (perf tracepoint programs; raw tracepoints not used: %v)", c.rawErr)
	}
	return b.String()
}

// Raw reports whether raw tracepoint programs are in use.
func (c *Counter) Raw() bool { return c.raw }

// Live reads a Counter's maps whenever asked, as a metrics scrape does
// (a live tracepoint aggregate, like the perf path's Aggregator).
type Live struct {
	Counter *Counter
	VCPUOf  func(tid int) (int, bool)
	// Logger receives a failed read (nil: slog.Default()).
	Logger *slog.Logger
}

// Snapshot reads the maps now (nil when they cannot be read).
func (l Live) Snapshot() []exits.VCPUStats {
	s, err := l.Counter.Snapshot(l.VCPUOf)
	if err != nil {
		log := l.Logger
		if log == nil {
			log = slog.Default()
		}
		log.Warn("read the BPF exit counters", "err", err)
		return nil
	}
	return s.VCPUs
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
	for _, mem := range [][]byte{c.phaseMem, c.smcMem, c.slotMem} {
		if mem != nil {
			errs = append(errs, unix.Munmap(mem))
		}
	}
	c.phaseMem, c.smcMem, c.slotMem = nil, nil, nil
	for _, m := range []*ebpf.Map{c.rows, c.state, c.hists, c.zero, c.phase, c.smc, c.slots, c.histSlots, c.addrs, c.addrRows} {
		if m != nil {
			errs = append(errs, m.Close())
		}
	}
	c.links, c.progs, c.rows, c.state, c.hists, c.zero, c.phase, c.smc, c.slots, c.histSlots = nil, nil, nil, nil, nil, nil, nil, nil, nil, nil
	c.addrs, c.addrRows = nil, nil
	return errors.Join(errs...)
}
