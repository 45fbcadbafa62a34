//go:build linux

package vmm

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mvm-dev/mvm/devices"
	"github.com/mvm-dev/mvm/exits/userspace"
	"github.com/mvm-dev/mvm/internal/kvm"
	"github.com/mvm-dev/mvm/psci"
	"github.com/mvm-dev/mvm/runsummary"
	"github.com/mvm-dev/mvm/vcpu"
)

// These tests feed exitCore synthetic exits, as the run loop decodes them
// from kvm_run, on any Linux host (no /dev/kvm): the devices, the PSCI
// state machine and the counters are the real ones.

// PSCI function IDs and return codes as DEN0022D.b writes them (chapter 5),
// independent of package psci's constants.
const (
	fidCPUSuspend64 = 0xC400_0001
	fidCPUOff       = 0x8400_0002
	fidCPUOn64      = 0xC400_0003
	fidAffinityInfo = 0x8400_0004
	fidSystemOff    = 0x8400_0008
	fidSystemReset  = 0x8400_0009
	fidFeatures     = 0x8400_000A
	fidMemProtect   = 0x8400_0013 // optional; mvm does not implement it
	// An SMCCC vendor-specific hypervisor service call (OEN 6, DEN0028):
	// outside the PSCI ranges.
	fidVendorHyp = 0xC600_0001

	retSuccess      = 0
	retNotSupported = 0xFFFF_FFFF_FFFF_FFFF // -1
	retInvalidParam = 0xFFFF_FFFF_FFFF_FFFE // -2
	retAlreadyOn    = 0xFFFF_FFFF_FFFF_FFFC // -4
	retInvalidAddr  = 0xFFFF_FFFF_FFFF_FFF7 // -9
)

// testRAM is the guest RAM the core's PSCI accepts entry points in.
const testRAMSize = 64 << 20

type testCore struct {
	*exitCore
	marker *devices.Marker
	marks  []byte
	mu     sync.Mutex
	logBuf bytes.Buffer
}

// newTestCore builds the exit core of a 4-vCPU VM (MPIDR affinities 0-3)
// with PSCI in mvm, a PL031 and the boot marker on the bus, and a logger
// that keeps its lines.
func newTestCore(t *testing.T) *testCore {
	t.Helper()
	tc := &testCore{}
	log := slog.New(slog.NewTextHandler(&tc.logBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := newExitCore(log)
	tc.exitCore = &c
	tc.marker = devices.NewMarker(func(code byte, _ time.Time) {
		tc.mu.Lock()
		tc.marks = append(tc.marks, code)
		tc.mu.Unlock()
	})
	rtc := devices.NewPL031(devices.HostClock{}, func(bool) {})
	t.Cleanup(rtc.Close)
	if err := c.bus.Add(RTCBase, RTCSize, rtc); err != nil {
		t.Fatal(err)
	}
	if err := c.bus.Add(MarkerBase, MarkerSize, tc.marker); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range c.bus.Devices() {
		names = append(names, d.Name())
	}
	p, err := newProfile(log, 4, names)
	if err != nil {
		t.Fatal(err)
	}
	c.prof = p
	inRAM := func(a uint64) bool { return a >= RAMBase && a < RAMBase+testRAMSize }
	if err := c.setUserPSCI([]uint64{0, 1, 2, 3}, inRAM); err != nil {
		t.Fatal(err)
	}
	return tc
}

// key is the accounting key the core registered for kind/sub.
func (tc *testCore) key(t *testing.T, kind userspace.Kind, sub string) int {
	t.Helper()
	k, ok := tc.prof.schema.Lookup(kind, sub)
	if !ok {
		t.Fatalf("no exit key %v/%s", kind, sub)
	}
	return int(k)
}

// logLines counts the log lines that contain s.
func (tc *testCore) logLines(s string) int {
	n := 0
	for _, l := range strings.Split(tc.logBuf.String(), "\n") {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}

// regs is a vCPU's register file as the core may read it (the PC).
type regs map[kvm.RegID]uint64

func (r regs) Reg(id kvm.RegID) (uint64, error) {
	v, ok := r[id]
	if !ok {
		return 0, errors.New("register not in the test's file")
	}
	return v, nil
}

var guestPC = regs{kvm.RegPC: 0x4008_1234}

func mmioExit(addr uint64, write bool, data ...byte) *vcpu.Exit {
	return &vcpu.Exit{Reason: kvm.ExitMMIO, MMIO: vcpu.MMIOExit{Addr: addr, Data: data, Write: write}}
}

func hvc(fid uint32, args ...uint64) *vcpu.Exit {
	e := &vcpu.Exit{Reason: kvm.ExitHypercall, Hypercall: vcpu.HypercallExit{FID: fid}}
	copy(e.Hypercall.Args[:], args)
	return e
}

// lifecycle is where a running vCPU goes after answer a.
func lifecycle(t *testing.T, a exitAction) vcpu.State {
	t.Helper()
	s := vcpu.StateRunning
	if ev, ok := a.Next.After(); ok {
		var legal bool
		if s, legal = s.Step(ev); !legal {
			t.Fatalf("answer %v is no lifecycle event of a running vCPU", a.Next)
		}
	}
	return s
}

func TestExitCoreMMIO(t *testing.T) {
	tc := newTestCore(t)

	// A write to the boot marker reaches it, and the guest goes on.
	a := tc.handle(0, mmioExit(MarkerBase, true, devices.MarkUserspace), guestPC)
	if a.Next != vcpu.Continue || a.SetX0 || a.start.ok || a.end != nil {
		t.Errorf("marker write: %+v, want continue and nothing else", a)
	}
	if want := tc.key(t, userspace.KindMMIO, "marker"); a.Key != want {
		t.Errorf("marker write counted under key %d, want mmio/marker (%d)", a.Key, want)
	}
	if len(tc.marks) != 1 || tc.marks[0] != devices.MarkUserspace {
		t.Errorf("marker saw %v, want one %#x", tc.marks, devices.MarkUserspace)
	}

	// A read from the PL031 completes with the device's data: its
	// PrimeCell ID0 at 0xFE0+0x10 reads 0x0D (PL031 TRM, DDI 0224, 3.3.9).
	e := mmioExit(RTCBase+0xFF0, false, 0xEE, 0xEE, 0xEE, 0xEE)
	a = tc.handle(1, e, guestPC)
	if a.Next != vcpu.Continue || a.Key != tc.key(t, userspace.KindMMIO, "pl031") {
		t.Errorf("PL031 read: %+v", a)
	}
	if !bytes.Equal(e.MMIO.Data, []byte{0x0D, 0, 0, 0}) {
		t.Errorf("PL031 CellID0 read returned % x, want 0d 00 00 00", e.MMIO.Data)
	}

	// A write to the PL031's match register (RTCMR, 0x04) is read back.
	tc.handle(0, mmioExit(RTCBase+0x04, true, 0x78, 0x56, 0x34, 0x12), guestPC)
	e = mmioExit(RTCBase+0x04, false, 0, 0, 0, 0)
	tc.handle(0, e, guestPC)
	if !bytes.Equal(e.MMIO.Data, []byte{0x78, 0x56, 0x34, 0x12}) {
		t.Errorf("RTCMR reads % x after writing 78 56 34 12", e.MMIO.Data)
	}
	if n := tc.unmappedCount.Load(); n != 0 {
		t.Errorf("unmapped_accesses = %d after device accesses only", n)
	}
}

func TestExitCoreUnmappedMMIO(t *testing.T) {
	tc := newTestCore(t)
	const hole = 0x0A00_0000 // between the devices and RAM: nothing there
	unmapped := tc.key(t, userspace.KindMMIO, "unmapped")

	e := mmioExit(hole, false, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF)
	a := tc.handle(2, e, guestPC)
	if a.Next != vcpu.Continue || a.Key != unmapped || a.end != nil {
		t.Errorf("unmapped read: %+v, want continue counted as mmio/unmapped", a)
	}
	if !bytes.Equal(e.MMIO.Data, make([]byte, 8)) {
		t.Errorf("unmapped read returned % x, want zeros", e.MMIO.Data)
	}
	if a := tc.handle(2, mmioExit(hole, true, 1, 2), guestPC); a.Next != vcpu.Continue || a.Key != unmapped {
		t.Errorf("unmapped write: %+v", a)
	}
	tc.handle(0, mmioExit(hole+8, false, 0), guestPC)
	if n := tc.unmappedCount.Load(); n != 3 {
		t.Errorf("unmapped_accesses = %d after 3 accesses", n)
	}
	// Logged once per address, with the PC the guest was at.
	if n := tc.logLines("unmapped address"); n != 2 {
		t.Errorf("%d log lines about unmapped addresses for 2 addresses:\n%s", n, tc.logBuf.String())
	}
	if !strings.Contains(tc.logBuf.String(), "pc=0x40081234") {
		t.Errorf("the log does not name the guest's PC:\n%s", tc.logBuf.String())
	}

	// A guest that walks the address space: every access counted, the
	// log bounded.
	for i := uint64(0); i < 100; i++ {
		tc.handle(0, mmioExit(hole+0x1000*(i+2), false, 0), guestPC)
	}
	if n := tc.unmappedCount.Load(); n != 103 {
		t.Errorf("unmapped_accesses = %d after 103 accesses", n)
	}
	if n := tc.logLines("unmapped address"); n > maxLoggedKeys+1 {
		t.Errorf("%d log lines about unmapped addresses; the log should stop after %d", n, maxLoggedKeys)
	}
}

// TestExitCorePSCI runs one table of calls in order against one VM, so
// each row starts from the PSCI state the rows before it left.
func TestExitCorePSCI(t *testing.T) {
	tc := newTestCore(t)
	const entry = RAMBase + 0x8_0000
	type want struct {
		next    vcpu.Next
		x0      uint64
		start   int // target vCPU of a CPU_ON, -1: none
		end     runsummary.ExitKind
		state   vcpu.State // where the calling vCPU goes
		target  psci.State // the PSCI state of vCPU 1 afterwards
		rejects uint64     // psci_rejected total afterwards
		unknown uint64     // unknown_smccc_calls afterwards
	}
	rows := []struct {
		name   string
		caller int
		exit   *vcpu.Exit
		before func()
		want   want
	}{
		{"CPU_ON to an off CPU", 0, hvc(fidCPUOn64, 1, entry, 0xC0FFEE),
			nil, want{vcpu.Continue, retSuccess, 1, "", vcpu.StateRunning, psci.StateOnPending, 0, 0}},
		{"CPU_ON to a pending CPU", 0, hvc(fidCPUOn64, 1, entry, 0),
			nil, want{vcpu.Continue, retAlreadyOn, -1, "", vcpu.StateRunning, psci.StateOnPending, 0, 0}},
		{"CPU_ON to an on CPU", 0, hvc(fidCPUOn64, 1, entry, 0),
			func() {
				if err := tc.pm.Started(1); err != nil {
					t.Fatal(err)
				}
			}, want{vcpu.Continue, retAlreadyOn, -1, "", vcpu.StateRunning, psci.StateOn, 0, 0}},
		{"CPU_ON to itself", 1, hvc(fidCPUOn64, 1, entry, 0),
			nil, want{vcpu.Continue, retAlreadyOn, -1, "", vcpu.StateRunning, psci.StateOn, 0, 0}},
		{"CPU_ON to an MPIDR no vCPU has", 0, hvc(fidCPUOn64, 0x100, entry, 0),
			nil, want{vcpu.Continue, retInvalidParam, -1, "", vcpu.StateRunning, psci.StateOn, 1, 0}},
		{"CPU_ON with an entry outside RAM", 0, hvc(fidCPUOn64, 2, 0x1000, 0),
			nil, want{vcpu.Continue, retInvalidAddr, -1, "", vcpu.StateRunning, psci.StateOn, 2, 0}},
		{"CPU_ON with a misaligned entry", 0, hvc(fidCPUOn64, 2, entry+2, 0),
			nil, want{vcpu.Continue, retInvalidAddr, -1, "", vcpu.StateRunning, psci.StateOn, 3, 0}},
		{"AFFINITY_INFO of an MPIDR no vCPU has", 0, hvc(fidAffinityInfo, 0x400, 0),
			nil, want{vcpu.Continue, retInvalidParam, -1, "", vcpu.StateRunning, psci.StateOn, 4, 0}},
		{"CPU_SUSPEND standby (WFI)", 1, hvc(fidCPUSuspend64, 0, 0, 0),
			nil, want{vcpu.Continue, retSuccess, -1, "", vcpu.StateRunning, psci.StateOn, 4, 0}},
		{"CPU_SUSPEND with reserved bits", 1, hvc(fidCPUSuspend64, 1<<31, 0, 0),
			nil, want{vcpu.Continue, retInvalidParam, -1, "", vcpu.StateRunning, psci.StateOn, 5, 0}},
		{"CPU_OFF", 1, hvc(fidCPUOff),
			nil, want{vcpu.PowerOff, 0, -1, "", vcpu.StateOff, psci.StateOff, 5, 0}},
		{"a call from a vCPU that is off (a VMM bug)", 2, hvc(fidAffinityInfo, 0, 0),
			nil, want{vcpu.Continue, retNotSupported, -1, "", vcpu.StateRunning, psci.StateOff, 5, 1}},
		{"an optional function mvm lacks", 0, hvc(fidMemProtect, 1),
			nil, want{vcpu.Continue, retNotSupported, -1, "", vcpu.StateRunning, psci.StateOff, 5, 2}},
		{"PSCI_FEATURES of it", 0, hvc(fidFeatures, fidMemProtect),
			nil, want{vcpu.Continue, retNotSupported, -1, "", vcpu.StateRunning, psci.StateOff, 5, 2}},
		{"an unknown hypercall", 0, hvc(fidVendorHyp, 1, 2, 3),
			nil, want{vcpu.Continue, retNotSupported, -1, "", vcpu.StateRunning, psci.StateOff, 5, 3}},
		{"SYSTEM_RESET", 0, hvc(fidSystemReset),
			nil, want{vcpu.Halt, 0, -1, runsummary.ExitReset, vcpu.StateStopped, psci.StateOff, 5, 3}},
		{"SYSTEM_OFF", 0, hvc(fidSystemOff),
			nil, want{vcpu.Halt, 0, -1, runsummary.ExitPowerOff, vcpu.StateStopped, psci.StateOff, 5, 3}},
	}
	for _, r := range rows {
		if r.before != nil {
			r.before()
		}
		a := tc.handle(r.caller, r.exit, guestPC)
		w := r.want
		if a.Next != w.next {
			t.Errorf("%s: %v, want %v", r.name, a.Next, w.next)
		}
		// SYSTEM_OFF and SYSTEM_RESET do not return: X0 is not checked.
		if !a.SetX0 || (w.end == "" && w.next != vcpu.PowerOff && a.X0 != w.x0) {
			t.Errorf("%s: X0 %#x (written %v), want %#x", r.name, a.X0, a.SetX0, w.x0)
		}
		switch {
		case w.start >= 0 && (!a.start.ok || a.start.target != w.start || a.start.entry != entry || a.start.context != r.exit.Hypercall.Args[2]):
			t.Errorf("%s: start %+v, want vCPU %d at %#x with context %#x", r.name, a.start, w.start, uint64(entry), r.exit.Hypercall.Args[2])
		case w.start < 0 && a.start.ok:
			t.Errorf("%s: starts vCPU %d", r.name, a.start.target)
		}
		switch {
		case w.end == "" && a.end != nil:
			t.Errorf("%s: ends the run: %v", r.name, a.end.kind)
		case w.end != "" && (a.end == nil || a.end.kind != w.end):
			t.Errorf("%s: end %+v, want %v", r.name, a.end, w.end)
		}
		if got := lifecycle(t, a); got != w.state {
			t.Errorf("%s: the caller goes to %v, want %v", r.name, got, w.state)
		}
		if st, _ := tc.pm.State(1); st != w.target {
			t.Errorf("%s: vCPU 1 is %v in PSCI, want %v", r.name, st, w.target)
		}
		if n := totalRejected(tc.psciRejected.counts()); n != w.rejects {
			t.Errorf("%s: psci_rejected = %d, want %d", r.name, n, w.rejects)
		}
		if n := tc.unknownCount.Load(); n != w.unknown {
			t.Errorf("%s: unknown_smccc_calls = %d, want %d", r.name, n, w.unknown)
		}
		fn := psci.Name(r.exit.Hypercall.FID)
		if !psci.InRange(r.exit.Hypercall.FID) {
			fn = "other"
		}
		if want := tc.key(t, userspace.KindHypercall, fn); a.Key != want {
			t.Errorf("%s: counted under key %d, want hypercall/%s (%d)", r.name, a.Key, fn, want)
		}
	}
	if st := tc.prof.rec[1].State(); st != userspace.StateOff {
		t.Errorf("vCPU 1's accounting state after CPU_OFF is %v", st)
	}
	// Once per function ID: AFFINITY_INFO (from the vCPU that was off),
	// MEM_PROTECT, the vendor call; PSCI_FEATURES is not counted.
	if n := tc.logLines("SMCCC call mvm does not implement"); n != 3 {
		t.Errorf("%d log lines about unknown SMCCC calls for 3 function IDs:\n%s", n, tc.logBuf.String())
	}
}

// TestExitCoreKernelPSCI: with PSCI in KVM no machine is set, and a
// forwarded call (none should be) is answered NOT_SUPPORTED and counted.
func TestExitCoreKernelPSCI(t *testing.T) {
	tc := newTestCore(t)
	tc.pm = nil
	a := tc.handle(0, hvc(fidCPUOn64, 1, RAMBase, 0), guestPC)
	if a.Next != vcpu.Continue || !a.SetX0 || a.X0 != retNotSupported || a.start.ok {
		t.Errorf("CPU_ON without PSCI in mvm: %+v", a)
	}
	if n := tc.unknownCount.Load(); n != 1 {
		t.Errorf("unknown_smccc_calls = %d", n)
	}
}

func TestExitCoreSystemEvents(t *testing.T) {
	tc := newTestCore(t)
	for _, tt := range []struct {
		name string
		typ  uint32
		next vcpu.Next
		end  runsummary.ExitKind
		key  string // "" : counted under the kind's bare key (-1)
	}{
		// KVM_SYSTEM_EVENT_* (include/uapi/linux/kvm.h).
		{"shutdown", 1, vcpu.Halt, runsummary.ExitPowerOff, "SHUTDOWN"},
		{"reset", 2, vcpu.Halt, runsummary.ExitReset, "RESET"},
		{"crash", 3, vcpu.Halt, runsummary.ExitCrash, "CRASH"},
		{"wakeup", 4, vcpu.Continue, "", "WAKEUP"},
		{"suspend", 5, vcpu.Continue, "", "SUSPEND"},
		{"unknown type", 99, vcpu.Continue, "", ""},
	} {
		e := &vcpu.Exit{Reason: kvm.ExitSystemEvent, SystemEvent: vcpu.SystemEventExit{Type: tt.typ, NData: 1, Data: [16]uint64{0xDEAD}}}
		a := tc.handle(3, e, guestPC)
		if a.Next != tt.next || a.SetX0 || a.start.ok {
			t.Errorf("%s: %+v, want %v", tt.name, a, tt.next)
		}
		switch {
		case tt.end == "" && a.end != nil:
			t.Errorf("%s: ends the run (%v)", tt.name, a.end.kind)
		case tt.end != "" && (a.end == nil || a.end.kind != tt.end):
			t.Errorf("%s: end %+v, want %v", tt.name, a.end, tt.end)
		}
		if tt.end == runsummary.ExitCrash && (a.end.err == nil || !strings.Contains(a.end.err.Error(), "vCPU 3") || !strings.Contains(a.end.err.Error(), "0xdead")) {
			t.Errorf("crash: error %v does not name the vCPU and the event data", a.end.err)
		}
		want := -1
		if tt.key != "" {
			want = tc.key(t, userspace.KindSystemEvent, tt.key)
		}
		if a.Key != want {
			t.Errorf("%s: key %d, want %d", tt.name, a.Key, want)
		}
		if tt.next == vcpu.Halt && lifecycle(t, a) != vcpu.StateStopped {
			t.Errorf("%s: the vCPU does not stop", tt.name)
		}
	}
}

// TestExitCoreForeignExit: an exit the run loop should never hand over
// stops the VM with a fault instead of being ignored.
func TestExitCoreForeignExit(t *testing.T) {
	tc := newTestCore(t)
	a := tc.handle(0, &vcpu.Exit{Reason: kvm.ExitIO}, guestPC)
	if a.Next != vcpu.Halt || a.end == nil || a.end.kind != runsummary.ExitFault || a.end.err == nil {
		t.Errorf("port I/O exit: %+v, want halt with a fault", a)
	}
}

// FuzzExitCore feeds the exit core exits a hostile guest can cause: any
// MMIO address, size and data, any SMCCC function ID and arguments, any
// system-event type, from any vCPU. Whatever comes in, the core must
// answer without panicking, with a defined next step; a read must come
// back filled (zeros where nothing is mapped), every SMCCC call must get
// an X0, and the counters only grow.
func FuzzExitCore(f *testing.F) {
	f.Add(uint8(0), uint64(MarkerBase), uint8(1), true, uint32(fidCPUOn64), uint64(1), uint64(RAMBase), uint64(0), uint32(1))
	f.Add(uint8(1), uint64(RTCBase+0xFF0), uint8(4), false, uint32(fidCPUOff), uint64(0), uint64(0), uint64(0), uint32(2))
	f.Add(uint8(2), uint64(0x0A00_0000), uint8(8), false, uint32(fidVendorHyp), uint64(7), uint64(8), uint64(9), uint32(99))
	f.Add(uint8(3), uint64(RTCBase+0x04), uint8(4), true, uint32(fidSystemReset), ^uint64(0), ^uint64(0), ^uint64(0), uint32(3))
	f.Fuzz(func(t *testing.T, cpu uint8, addr uint64, size uint8, write bool, fid uint32, x1, x2, x3 uint64, event uint32) {
		tc := newTestCore(t)
		id := int(cpu % 4)
		if id != 0 && cpu&0x80 != 0 {
			// Some calls come from a secondary that is ON.
			if _, err := tc.pm.Handle(0, fidCPUOn64, uint64(id), RAMBase, 0); err == nil {
				_ = tc.pm.Started(id)
			}
		}
		n := int(size%8) + 1
		data := make([]byte, n)
		for i := range data {
			data[i] = 0xA5
		}
		e := mmioExit(addr, write, data...)
		a := tc.handle(id, e, guestPC)
		if a.Next != vcpu.Continue || a.SetX0 || a.start.ok || a.end != nil {
			t.Fatalf("MMIO %#x: %+v, want continue and nothing else", addr, a)
		}
		if dev, _, _ := tc.bus.Lookup(addr); dev == nil && !write && !bytes.Equal(e.MMIO.Data, make([]byte, n)) {
			t.Fatalf("unmapped read of %#x returned % x", addr, e.MMIO.Data)
		}
		before := tc.unknownCount.Load()
		a = tc.handle(id, hvc(fid, x1, x2, x3), guestPC)
		if !a.SetX0 || a.Next < vcpu.Continue || a.Next > vcpu.Halt {
			t.Fatalf("SMCCC %#x: %+v", fid, a)
		}
		if (a.Next == vcpu.Halt) != (a.end != nil) {
			t.Fatalf("SMCCC %#x: halts %v but ends the run %v", fid, a.Next == vcpu.Halt, a.end != nil)
		}
		if a.start.ok && (a.start.target < 0 || a.start.target >= 4 || a.start.entry%4 != 0) {
			t.Fatalf("SMCCC %#x starts vCPU %d at %#x", fid, a.start.target, a.start.entry)
		}
		if tc.unknownCount.Load() < before {
			t.Fatal("unknown_smccc_calls went down")
		}
		se := &vcpu.Exit{Reason: kvm.ExitSystemEvent, SystemEvent: vcpu.SystemEventExit{Type: event, NData: int(x1 % 17)}}
		if a := tc.handle(id, se, guestPC); (a.Next == vcpu.Halt) != (a.end != nil) || a.SetX0 {
			t.Fatalf("system event %d: %+v", event, a)
		}
	})
}
