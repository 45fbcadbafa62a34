//go:build linux

package bpfagg

import (
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"runtime"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"github.com/mvm-dev/mvm/exits"
	"github.com/mvm-dev/mvm/exits/hist"
	"github.com/mvm-dev/mvm/exits/tracepoint"
)

// TestLoadAndAttach: the kernel's verifier accepts the programs with the
// field offsets of this host's kvm_exit format, and they attach. This host
// may never fire kvm_exit (kvm_pvm does not), so the counts are checked in
// the lab (TestQEMUProfileCommand: BPF and perf counts per vCPU) and below
// by running the programs on made-up arguments.
func TestLoadAndAttach(t *testing.T) {
	root, err := tracepoint.ProbeEnv(tracepoint.SystemEnv(true))
	if err != nil {
		t.Fatalf("tracepoints: %v", err)
	}
	c, err := New(Config{Tracefs: root, TGID: os.Getpid()})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := c.Snapshot(func(int) (int, bool) { return 0, false })
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d vCPUs with counts; namer %s; %s", len(snap.VCPUs), c.Namer().Arch(), c.Describe())
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// runProg loads insns as a raw tracepoint program and runs it once on the
// calling thread with args as its context (BPF_PROG_TEST_RUN).
func runProg(t *testing.T, insns asm.Instructions, args ...uint64) {
	t.Helper()
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.RawTracepoint, License: "GPL", Instructions: insns})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	defer p.Close()
	ctx := make([]uint64, 4)
	copy(ctx, args)
	if _, err := p.Run(&ebpf.RunOptions{Context: ctx}); err != nil {
		t.Skipf("BPF_PROG_TEST_RUN of a raw tracepoint program: %v", err)
	}
}

// TestBucketMatchesHist: the BPF bucket index of a value is exits/hist's.
func TestBucketMatchesHist(t *testing.T) {
	out, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1})
	if err != nil {
		t.Skipf("BPF maps: %v", err)
	}
	defer out.Close()
	insns := asm.Instructions{asm.LoadMem(asm.R2, asm.R1, 0, asm.DWord)}
	insns = append(insns, bucket("b")...)
	insns = append(insns,
		asm.StoreMem(asm.R10, -16, asm.R2, asm.DWord),
		asm.StoreImm(asm.R10, -4, 0, asm.Word),
		asm.LoadMapPtr(asm.R1, out.FD()),
		asm.Mov.Reg(asm.R2, asm.R10), asm.Add.Imm(asm.R2, -4),
		asm.Mov.Reg(asm.R3, asm.R10), asm.Add.Imm(asm.R3, -16),
		asm.Mov.Imm(asm.R4, 0),
		asm.FnMapUpdateElem.Call(),
		asm.Mov.Imm(asm.R0, 0), asm.Return(),
	)
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.RawTracepoint, License: "GPL", Instructions: insns})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	defer p.Close()
	vals := []uint64{0, 1, 15, 16, 17, 31, 32, 33, 63, 64, 1000, 1 << 20, 1<<36 - 1, 1 << 36, 1<<37 - 1, 1 << 37, 1 << 40, 1<<63 + 5, ^uint64(0)}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		vals = append(vals, rng.Uint64()>>rng.IntN(64))
	}
	for _, v := range vals {
		if _, err := p.Run(&ebpf.RunOptions{Context: []uint64{v}}); err != nil {
			t.Skipf("BPF_PROG_TEST_RUN: %v", err)
		}
		var got uint64
		if err := out.Lookup(uint32(0), &got); err != nil {
			t.Fatal(err)
		}
		if want := hist.Index(v); got != uint64(want) {
			t.Errorf("bucket(%d) = %d, hist.Index %d", v, got, want)
		}
	}
}

// TestProgramsAccount runs the raw tracepoint programs of an arm64 kernel
// on a made-up sequence of this thread's events and compares the counts,
// breakdown rows and timed samples with the perf path's aggregator fed the
// same sequence: with the thread's state in its slot, and in the thread
// map (a slot map of one slot, which the other vCPU thread holds).
func TestProgramsAccount(t *testing.T) {
	for _, slots := range []int{numSlots, 1} {
		for _, hbits := range []int{histSlotBits, 1} {
			t.Run(fmt.Sprintf("slots=%d,histslots=%d", slots, 1<<hbits), func(t *testing.T) { testProgramsAccount(t, slots, hbits) })
		}
	}
}

func testProgramsAccount(t *testing.T, slots, hbits int) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	namer, err := exits.NamerForFields(func(n string) bool { return n == "ret" || n == "esr_ec" })
	if err != nil {
		t.Fatal(err)
	}
	ram := exits.Region{Name: "ram", Base: 0x4000_0000, Size: 0x1000_0000}
	layout := exits.Layout{VCPUs: 2, RAM: []exits.Region{ram},
		Regions: []exits.Region{{Name: "gicd", Base: 0x800_0000, Size: 0x1_0000}, {Name: "uart", Base: 0x900_0000, Size: 0x1000}, ram}}
	tid := unix.Gettid()
	// This thread plays vCPU 1, a secondary.
	c := &Counter{cfg: Config{TGID: os.Getpid(), Layout: layout, TIDs: []int{tid + 1, tid}}, namer: namer}
	defer c.Close()
	mk := func(name string, key, val, n uint32, typ ebpf.MapType) *ebpf.Map {
		m, err := ebpf.NewMap(&ebpf.MapSpec{Name: name, Type: typ, KeySize: key, ValueSize: val, MaxEntries: n})
		if err != nil {
			t.Skipf("BPF maps: %v", err)
		}
		return m
	}
	c.rows = mk("r", 32, rowValueSize, 64, ebpf.Hash)
	c.state = mk("s", 4, stateSize, 8, ebpf.Hash)
	c.hists = mk("h", 24, histValueSize, 16, ebpf.Hash)
	c.zero = mk("z", 4, histValueSize, 1, ebpf.Array)
	if err := c.openSlots(slots); err != nil {
		t.Skipf("BPF slot map: %v", err)
	}
	if err := c.openHistSlots(hbits); err != nil {
		t.Skipf("BPF histogram slot map: %v", err)
	}
	if err := c.openAddrs(64, 8); err != nil {
		t.Skipf("BPF address maps: %v", err)
	}
	env := progEnv{tgid: os.Getpid(), raw: true, slotFD: c.slots.FD(), slotMask: slots - 1, histSlotFD: c.histSlots.FD(), histSlotBits: hbits,
		addrFD: c.addrs.FD(), addrRowFD: c.addrRows.FD(), stateFD: c.state.FD(), rowFD: c.rows.FD(), histFD: c.hists.FD(), zeroFD: c.zero.FD(),
		code: rawArg(0), sub: rawArg(1), regions: layout.Regions, breakdown: true,
		detailArg: map[detailKind]arg{detailWFx: rawArg(1), detailHVC: rawArg(1), detailSysESR: rawArg(0), detailFault: rawArg(3)}}
	if err := c.openPhases(&env); err != nil {
		t.Fatal(err)
	}
	var inMap uint32
	var st threadState
	for it := c.state.Iterate(); it.Next(&inMap, &st); {
	}
	if slots == 1 && inMap != uint32(tid) || slots > 1 && inMap != 0 {
		t.Fatalf("%d slots: thread %d in the thread map, this thread is %d", slots, inMap, tid)
	}
	env.pc = rawArg(2)
	exitP, err := env.exitProgram()
	if err != nil {
		t.Fatal(err)
	}
	entryP := env.entryProgram()
	detailP := map[detailKind]asm.Instructions{}
	for _, k := range []detailKind{detailWFx, detailHVC, detailSysESR, detailFault} {
		if detailP[k], err = env.detailProgram(k); err != nil {
			t.Fatal(err)
		}
	}
	agg := tracepoint.NewAggregator(namer)
	agg.Configure(layout, tracepoint.Options{})
	agg.SetVCPU(tid, 1)
	var evs []tracepoint.Event
	now := uint64(1000)
	entry := func() {
		runProg(t, entryP, 0)
		now += 10
		evs = append(evs, tracepoint.Event{Kind: tracepoint.EventEntry, TID: tid, Time: now})
	}
	pc := uint64(0x4008_0000) // the kernel before its MMU is on
	exit := func(ret, ec uint64) {
		runProg(t, exitP, ret, ec, pc)
		now += 10
		evs = append(evs, tracepoint.Event{Kind: tracepoint.EventExit, TID: tid, Time: now, Code: ret, Sub: ec, PC: pc})
	}
	det := func(k detailKind, tk tracepoint.DetailKind, perfVal uint64, args ...uint64) {
		runProg(t, detailP[k], args...)
		now += 10
		evs = append(evs, tracepoint.Event{Kind: tracepoint.EventDetail, TID: tid, Time: now, Detail: tk, Val: perfVal})
	}
	// ICC_SGI1R_EL1 write: Op0 3, Op1 0, CRn 12, CRm 11, Op2 5; ISS
	// Op0<<20 | Op2<<17 | Op1<<14 | CRn<<10 | Rt<<5 | CRm<<1 | dir(0 write).
	esr := uint64(0x18)<<26 | 3<<20 | 5<<17 | 0<<14 | 12<<10 | 1<<5 | 11<<1
	exit(2, 0x01) // an exit before any entry: no guest time
	det(detailWFx, tracepoint.DetailWFx, 1, 0x1234, 1)
	entry()
	exit(2, 0x18)
	det(detailSysESR, tracepoint.DetailSysRegESR, esr, esr)
	entry()
	pc = 0xffff_8000_1000_0000 // the kernel's half
	// An IRQ with the SError flag and a stale EC, as KVM passes them
	// (the record would hold ret 0, esr_ec 0).
	runProg(t, exitP, 1<<31, 0x18, pc)
	now += 10
	evs = append(evs, tracepoint.Event{Kind: tracepoint.EventExit, TID: tid, Time: now, Code: 0, Sub: 0, PC: pc})
	entry()
	exit(2, 0x24)
	det(detailFault, tracepoint.DetailFault, 0x900_0004, 0x1234, 0, 0, 0x900_0004)
	det(detailFault, tracepoint.DetailFault, 0x800_0000, 0x1234, 0, 0, 0x800_0000) // a second one does not rekey
	entry()
	exit(2, 0x24)
	det(detailFault, tracepoint.DetailFault, 0x100, 0x1234, 0, 0, 0x100) // unmapped
	entry()
	// More distinct UART addresses than a row keeps (the first of them
	// seen already), one of them twice.
	for i := range uint64(exits.MaxAddrsPerRow + 3) {
		for range 1 + i/20 {
			exit(2, 0x24)
			det(detailFault, tracepoint.DetailFault, 0x900_0004+4*i, 0x1234, 0, 0, 0x900_0004+4*i)
			entry()
		}
	}
	exit(2, 0x01)
	det(detailWFx, tracepoint.DetailWFx, 0, 0x1234, 0)
	entry()
	exit(2, 0x16)
	det(detailHVC, tracepoint.DetailHVC, 0x8400_0000, 0x1234, 0x8400_0000, 0)
	entry()
	exit(2, 0x16)
	det(detailHVC, tracepoint.DetailHVC, 0xc400_0003, 0x1234, 0xc400_0003, 0) // CPU_ON: the secondaries phase
	entry()
	exit(0, 0)
	entry()
	pc = 0x40_0000 // a user address
	exit(0, 0)     // userspace from here
	entry()
	exit(2, 0x17) // an SMC the VMM handles and names
	now += 10
	agg.NoteSMC(tid, now, 0x8400_0000)
	c.NoteSMC(1, 0x8400_0000)
	entry()
	exit(2, 0x17) // an SMC nobody names: unknown
	entry()
	exit(2, 0x18) // left pending: the thread's last exit
	det(detailSysESR, tracepoint.DetailSysRegESR, esr, esr)
	agg.Add(evs)
	agg.Flush()
	want := exits.Total(agg.Snapshot())

	snap, err := c.Snapshot(func(int) (int, bool) { return 0, true })
	if err != nil {
		t.Fatal(err)
	}
	got := exits.Total(snap.VCPUs)
	if got.Entries != want.Entries || got.Exits() != want.Exits() {
		t.Errorf("BPF entries %d exits %d, perf path %d and %d", got.Entries, got.Exits(), want.Entries, want.Exits())
	}
	for _, w := range want.Reasons {
		var g *exits.ReasonStats
		for i := range got.Reasons {
			if got.Reasons[i].Reason == w.Reason {
				g = &got.Reasons[i]
			}
		}
		if g == nil {
			t.Errorf("%s: missing in BPF", w.Reason)
			continue
		}
		if g.Count != w.Count || g.GuestCount != w.GuestCount || g.HandleCount != w.HandleCount {
			t.Errorf("%s: BPF count %d guest %d handle %d, perf %d %d %d", w.Reason, g.Count, g.GuestCount, g.HandleCount, w.Count, w.GuestCount, w.HandleCount)
		}
		if g.GuestCount > 0 && g.GuestSumNS == 0 || g.HandleCount > 0 && g.HandleSumNS == 0 {
			t.Errorf("%s: BPF times %d/%d ns", w.Reason, g.GuestSumNS, g.HandleSumNS)
		}
		rows := map[string]uint64{}
		for _, r := range g.Breakdown {
			rows[r.Key] = r.Count
		}
		for _, r := range w.Breakdown {
			if rows[r.Key] != r.Count {
				t.Errorf("%s %s: BPF %d, perf %d (BPF rows %v)", w.Reason, r.Key, rows[r.Key], r.Count, rows)
			}
		}
		if len(rows) != len(w.Breakdown) {
			t.Errorf("%s: BPF rows %v, perf %v", w.Reason, rows, w.Breakdown)
		}
		l := snap.Details.Latency[w.Reason]
		if l == nil || g.GuestCount > 0 && l.Guest.Max != g.GuestMaxNS || g.HandleCount > 0 && (l.Handle.P50 == 0 || l.Handle.Max != g.HandleMaxNS) {
			t.Errorf("%s: BPF percentiles %+v, stats %+v", w.Reason, l, g)
		}
	}
	// Every timed sample is in a histogram, of the slot map or (keys
	// whose slot another holds) the hash map; the pending exit is not.
	var inSlots, inHash, timed uint64
	var slot uint32
	var hv struct {
		Owner   uint64
		Buckets [2 * hist.NumBuckets]uint64
	}
	for it := c.histSlots.Iterate(); it.Next(&slot, &hv); {
		for _, n := range hv.Buckets {
			inSlots += n
		}
	}
	var hk histKey
	var buckets [2 * hist.NumBuckets]uint64
	for it := c.hists.Iterate(); it.Next(&hk, &buckets); {
		for _, n := range buckets {
			inHash += n
		}
	}
	for _, r := range got.Reasons {
		timed += r.GuestCount + r.HandleCount
	}
	if inSlots+inHash != timed-1 || inSlots == 0 || hbits == 1 && inHash == 0 {
		t.Errorf("histogram samples: %d in slots + %d in the hash map, want %d timed samples - 1 pending (both maps used with 2 slots)", inSlots, inHash, timed)
	}
	wd := agg.Details()
	nonEmpty := func(m map[string]map[string][]exits.AddressCount) map[string]map[string][]exits.AddressCount {
		out := map[string]map[string][]exits.AddressCount{}
		for r, rows := range m {
			if len(rows) > 0 {
				out[r] = rows
			}
		}
		return out
	}
	if ga, wa := nonEmpty(snap.Details.Addresses), nonEmpty(wd.Addresses); !reflect.DeepEqual(ga, wa) || len(wa["DABT_LOW"]["uart"]) != 9 {
		t.Errorf("BPF device addresses %v, perf path %v (want the top 8 and other for the UART)", ga, wa)
	}
	phases := func(ps []exits.PhaseRows) map[string]map[string]uint64 {
		m := map[string]map[string]uint64{}
		for _, p := range ps {
			m[p.Phase] = map[string]uint64{}
			for _, r := range p.Rows {
				m[p.Phase][r.Reason] = r.Samples
			}
		}
		return m
	}
	gp, wp := phases(snap.Details.Phases), phases(wd.Phases)
	if len(wp) != 3 || !reflect.DeepEqual(gp, wp) {
		t.Errorf("BPF phases %v, perf path %v (want 3 phases)", gp, wp)
	}
	if snap.Details.Userspace == nil || snap.Details.Userspace.Source != "first_user_exit" {
		t.Errorf("BPF userspace start %+v, perf %+v", snap.Details.Userspace, wd.Userspace)
	}
	t.Logf("BPF: %+v; phases %v", got, gp)
}

// TestSecondariesPhase: the secondaries phase ends at the last
// secondary's first entry after the first CPU_ON (this thread is vCPU 0,
// another locked thread vCPU 1), not before.
func TestSecondariesPhase(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	namer, err := exits.NamerForFields(func(n string) bool { return n == "ret" || n == "esr_ec" })
	if err != nil {
		t.Fatal(err)
	}
	tidB, run, done := make(chan int), make(chan func()), make(chan struct{})
	defer close(run)
	go func() {
		runtime.LockOSThread()
		tidB <- unix.Gettid()
		for f := range run {
			f()
			done <- struct{}{}
		}
	}()
	b := <-tidB
	c := &Counter{cfg: Config{TGID: os.Getpid(), Layout: exits.Layout{VCPUs: 2}, TIDs: []int{unix.Gettid(), b}}, namer: namer}
	defer c.Close()
	mk := func(key, val, n uint32, typ ebpf.MapType) *ebpf.Map {
		m, err := ebpf.NewMap(&ebpf.MapSpec{Type: typ, KeySize: key, ValueSize: val, MaxEntries: n})
		if err != nil {
			t.Skipf("BPF maps: %v", err)
		}
		return m
	}
	c.rows, c.state = mk(32, rowValueSize, 64, ebpf.Hash), mk(4, stateSize, 8, ebpf.Hash)
	c.hists, c.zero = mk(24, histValueSize, 16, ebpf.Hash), mk(4, histValueSize, 1, ebpf.Array)
	if err := c.openSlots(64); err != nil {
		t.Skipf("BPF slot map: %v", err)
	}
	env := progEnv{tgid: os.Getpid(), raw: true, slotFD: c.slots.FD(), slotMask: 63, stateFD: c.state.FD(), rowFD: c.rows.FD(), histFD: c.hists.FD(), zeroFD: c.zero.FD(),
		code: rawArg(0), sub: rawArg(1), pc: rawArg(2), breakdown: true, detailArg: map[detailKind]arg{detailHVC: rawArg(1)}}
	if err := c.openPhases(&env); err != nil {
		t.Fatal(err)
	}
	exitP, err := env.exitProgram()
	if err != nil {
		t.Fatal(err)
	}
	hvcP, err := env.detailProgram(detailHVC)
	if err != nil {
		t.Fatal(err)
	}
	entryP := env.entryProgram()
	runProg(t, entryP)
	runProg(t, exitP, 2, 0x16, 0x4008_0000)
	runProg(t, hvcP, 0x4008_0000, 0xc400_0003) // CPU_ON (SMC64)
	runProg(t, entryP)
	if b := c.bounds(); b.CPUOn == 0 || b.AllIn != 0 {
		t.Fatalf("after CPU_ON: %+v, want CPUOn set, AllIn not", b)
	}
	run <- func() { runProg(t, entryP) }
	<-done
	if b := c.bounds(); b.AllIn < b.CPUOn || b.AllIn == 0 {
		t.Errorf("after vCPU 1's first entry: %+v, want AllIn set after CPUOn", b)
	}
	runProg(t, exitP, 0, 0, 0xffff_8000_0000_0000) // an IRQ: kernel_to_user
	runProg(t, entryP)
	snap, err := c.Snapshot(func(tid int) (int, bool) { return 0, true })
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range snap.Details.Phases {
		for _, r := range p.Rows {
			got = append(got, p.Phase+" "+r.Reason)
		}
	}
	// The CPU_ON exit opens the secondaries phase (as in the perf path).
	if want := []string{"secondaries HVC64", "kernel_to_user IRQ"}; !reflect.DeepEqual(got, want) {
		t.Errorf("phases %v, want %v", got, want)
	}
}

// TestClaimSlot: a thread not known up front (another VMM's) claims its
// slot on its first event, and its counts are read from there.
func TestClaimSlot(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	namer, err := exits.NamerForFields(func(n string) bool { return n == "ret" || n == "esr_ec" })
	if err != nil {
		t.Fatal(err)
	}
	c := &Counter{cfg: Config{TGID: os.Getpid(), NoBreakdown: true}, namer: namer}
	defer c.Close()
	if c.rows, err = ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Hash, KeySize: 32, ValueSize: rowValueSize, MaxEntries: 8}); err != nil {
		t.Skipf("BPF maps: %v", err)
	}
	if c.state, err = ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Hash, KeySize: 4, ValueSize: stateSize, MaxEntries: 8}); err != nil {
		t.Fatal(err)
	}
	if err := c.openSlots(numSlots); err != nil {
		t.Fatal(err)
	}
	env := progEnv{tgid: os.Getpid(), raw: true, slotFD: c.slots.FD(), slotMask: numSlots - 1, stateFD: c.state.FD(), rowFD: c.rows.FD(),
		histsOff: true, code: rawArg(0), sub: rawArg(1)}
	exitP, err := env.exitProgram()
	if err != nil {
		t.Fatal(err)
	}
	entryP := env.entryProgram()
	// Three WFx (one open row), an IRQ (the WFx row flushed to the map),
	// two WFx (the IRQ row flushed; the WFx one open again).
	for _, code := range []uint64{2, 2, 2, 0, 2, 2} {
		runProg(t, entryP)
		runProg(t, exitP, code, 0x01)
	}
	runProg(t, entryP)
	tid := unix.Gettid()
	if owner := c.slot(tid & (numSlots - 1)).Owner; owner != uint64(tid) {
		t.Fatalf("slot of thread %d owned by %d", tid, owner)
	}
	snap, err := c.Snapshot(func(int) (int, bool) { return 0, true })
	if err != nil {
		t.Fatal(err)
	}
	got := exits.Total(snap.VCPUs)
	want := map[string]uint64{"WFx": 5, "IRQ": 1}
	if got.Entries != 7 || got.Exits() != 6 || len(got.Reasons) != 2 {
		t.Errorf("counts %+v, want 7 entries and 6 exits: %v", got, want)
	}
	for _, r := range got.Reasons {
		if n := want[r.Reason]; r.Count != n || r.GuestCount != n || r.HandleCount != n {
			t.Errorf("%s: %d exits, %d and %d timed, want %d", r.Reason, r.Count, r.GuestCount, r.HandleCount, n)
		}
		// The merged open and flushed rows keep whole minima and maxima.
		for _, x := range [][4]uint64{{r.GuestMinNS, r.GuestSumNS, r.GuestMaxNS, r.GuestCount}, {r.HandleMinNS, r.HandleSumNS, r.HandleMaxNS, r.HandleCount}} {
			if x[0] == 0 || x[0] > x[2] || x[0]*x[3] > x[1] || x[2]*x[3] < x[1] {
				t.Errorf("%s: min %d sum %d max %d of %d", r.Reason, x[0], x[1], x[2], x[3])
			}
		}
	}
}

// TestCmpXchg: atomicOp's compare-and-exchange is one (cilium/ebpf
// encodes asm.CmpXchg.Mem alone as an atomic add): it leaves a value that
// is not the expected one, replaces one that is, and returns the old
// value in R0 both times.
func TestCmpXchg(t *testing.T) {
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 16, MaxEntries: 1})
	if err != nil {
		t.Skipf("BPF maps: %v", err)
	}
	defer m.Close()
	// ctx[0] is the expected value, ctx[1] the new one; the value is
	// {word, the R0 after}.
	insns := asm.Instructions{
		asm.LoadMem(asm.R6, asm.R1, 0, asm.DWord),
		asm.LoadMem(asm.R7, asm.R1, 8, asm.DWord),
		asm.StoreImm(asm.R10, -4, 0, asm.Word),
	}
	insns = append(insns, lookup(m.FD(), -4)...)
	insns = append(insns,
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.Mov.Reg(asm.R8, asm.R0),
		asm.Mov.Reg(asm.R0, asm.R6),
		atomicOp(asm.CmpXchg, asm.R8, asm.R7, asm.DWord, 0),
		asm.StoreMem(asm.R8, 8, asm.R0, asm.DWord),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("out"),
		asm.Return(),
	)
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.RawTracepoint, License: "GPL", Instructions: insns})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	defer p.Close()
	if err := m.Put(uint32(0), [2]uint64{5, 0}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ expect, swap, want, old uint64 }{{7, 9, 5, 5}, {5, 9, 9, 5}} {
		if _, err := p.Run(&ebpf.RunOptions{Context: []uint64{c.expect, c.swap}}); err != nil {
			t.Skipf("BPF_PROG_TEST_RUN: %v", err)
		}
		var v [2]uint64
		if err := m.Lookup(uint32(0), &v); err != nil {
			t.Fatal(err)
		}
		if v != [2]uint64{c.want, c.old} {
			t.Errorf("cmpxchg(expect %d, new %d): value %d, R0 %d; want %d and %d", c.expect, c.swap, v[0], v[1], c.want, c.old)
		}
	}
}
