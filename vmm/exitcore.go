//go:build linux

package vmm

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/mvm-dev/mvm/devices"
	"github.com/mvm-dev/mvm/exits/userspace"
	"github.com/mvm-dev/mvm/internal/kvm"
	"github.com/mvm-dev/mvm/psci"
	"github.com/mvm-dev/mvm/runsummary"
	"github.com/mvm-dev/mvm/vcpu"
)

// exitCore is the VM's side of vCPU exits with no KVM in it: it routes
// MMIO to the device bus, serves PSCI (user mode) and system events, keeps
// the counters of a misbehaving guest, and answers every exit with what to
// do (handle). The VM embeds it; tests build one on any Linux host and
// feed it synthetic exits (exitcore_test.go).
type exitCore struct {
	log  *slog.Logger
	bus  devices.Bus
	pm   *psci.Machine // PSCI user mode only
	prof *vmProfile

	unmappedSeen  *logOnce // guest addresses logged
	unmappedCount atomic.Uint64
	unknownHVC    *logOnce // SMCCC function IDs logged
	unknownCount  atomic.Uint64
	psciRejected  *psciRejects // PSCI calls refused for their arguments
}

func newExitCore(log *slog.Logger) exitCore {
	return exitCore{log: log, unmappedSeen: newLogOnce(maxLoggedKeys), unknownHVC: newLogOnce(maxLoggedKeys),
		psciRejected: newPSCIRejects()}
}

// setUserPSCI gives the core a PSCI state machine for user mode, for the
// vCPUs with affinities mpidrs, whose RAM is where inRAM says.
// PendingAsOn makes racing CPU_ONs for one target see exactly one SUCCESS
// and ALREADY_ON for the rest, as KVM's in-kernel PSCI answers.
func (c *exitCore) setUserPSCI(mpidrs []uint64, inRAM func(addr uint64) bool) error {
	pm, err := psci.New(psci.Config{
		MPIDRs: mpidrs,
		// A CPU_ON or CPU_SUSPEND entry point must be inside guest
		// RAM and 4-byte aligned (A64 instructions are; a misaligned
		// PC would fault at the first fetch, DDI 0487 D1.9.1), so
		// INVALID_ADDRESS otherwise.
		ValidEntry:       func(addr uint64) bool { return addr%4 == 0 && inRAM(addr) },
		ExternalFeatures: []uint32{psci.SMCCCVersionFID},
		PendingAsOn:      true,
	})
	if err != nil {
		return fmt.Errorf("PSCI: %w", err)
	}
	c.pm = pm
	return nil
}

// endEvent is a guest-initiated end of the run.
type endEvent struct {
	kind runsummary.ExitKind
	err  error
}

// guestRegs reads a vCPU's registers beyond those in its exit record (the
// PC, for a log line); *vcpu.VCPU is one.
type guestRegs interface {
	Reg(id kvm.RegID) (uint64, error)
}

// exitAction is the answer to one exit: the vCPU's part (vcpu.Action: re-
// enter, park or halt; the X0 to write; the accounting key) and the VM's
// (start another vCPU, end the run), which VM.Exit carries out.
type exitAction struct {
	vcpu.Action
	// start, if start.ok: power on vCPU start.target (PSCI CPU_ON).
	start cpuStart
	// end, if not nil, ends the run (the first end of a run wins).
	end *endEvent
}

// cpuStart is a CPU_ON's target and where it starts.
type cpuStart struct {
	ok             bool
	target         int
	entry, context uint64
}

// handle decides what exit e of vCPU cpu means. It may change device and
// PSCI state and counters, log, and fill a read's data, but touches no
// vCPU: regs is read only for a log line's PC.
func (c *exitCore) handle(cpu int, e *vcpu.Exit, regs guestRegs) exitAction {
	switch e.Reason {
	case kvm.ExitMMIO:
		return exitAction{Action: c.mmio(cpu, &e.MMIO, regs)}
	case kvm.ExitHypercall:
		return c.hypercall(cpu, &e.Hypercall)
	case kvm.ExitSystemEvent:
		return c.systemEvent(cpu, &e.SystemEvent)
	}
	// The run loop hands over no other exit (vcpu's decide).
	return exitAction{Action: vcpu.Action{Next: vcpu.Halt, Key: -1},
		end: &endEvent{kind: runsummary.ExitFault, err: fmt.Errorf("vCPU %d: exit reason %d reached the VM's exit handler", cpu, e.Reason)}}
}

// mmio routes a guest access to its device. An MMIO access never starts a
// vCPU or ends the run, so the answer is the vCPU's part alone. Small
// enough to be inlined into VM.Exit's hot path; an address with no device
// goes to unmapped.
func (c *exitCore) mmio(cpu int, m *vcpu.MMIOExit, regs guestRegs) vcpu.Action {
	dev, off, idx := c.bus.Lookup(m.Addr)
	if dev == nil {
		return c.unmapped(cpu, m, regs)
	}
	if m.Write {
		dev.Write(off, m.Data)
	} else {
		dev.Read(off, m.Data)
	}
	return vcpu.Action{Next: vcpu.Continue, Key: c.prof.mmioKey(idx)}
}

// unmapped answers an access to an address with no device: it reads as
// zero and drops writes; the guest goes on, and the access is counted
// (unmapped_accesses) and logged once per address, for the first
// maxLoggedKeys addresses.
func (c *exitCore) unmapped(cpu int, m *vcpu.MMIOExit, regs guestRegs) vcpu.Action {
	c.unmappedCount.Add(1)
	if !m.Write {
		clear(m.Data)
	}
	if log, filled := c.unmappedSeen.first(m.Addr); log {
		pc, _ := regs.Reg(kvm.RegPC)
		c.log.Warn("guest accessed an unmapped address (reads return 0; logged once per address)",
			"vcpu", cpu, "addr", fmt.Sprintf("%#x", m.Addr), "write", m.Write, "size", len(m.Data), "pc", fmt.Sprintf("%#x", pc))
		if filled {
			c.log.Warn("guest accessed many unmapped addresses: further ones are counted (unmapped_accesses), not logged", "logged", maxLoggedKeys)
		}
	}
	return vcpu.Action{Next: vcpu.Continue, Key: int(c.prof.unmapped)}
}

// systemEvent: KVM's own PSCI (kernel mode) reports SYSTEM_OFF/RESET this
// way, and a guest crash report arrives here too.
func (c *exitCore) systemEvent(cpu int, s *vcpu.SystemEventExit) exitAction {
	a := exitAction{Action: vcpu.Action{Next: vcpu.Halt, Key: c.prof.systemEventKey(s.Type)}}
	switch s.Type {
	case kvm.SystemEventShutdown:
		a.end = &endEvent{kind: runsummary.ExitPowerOff}
	case kvm.SystemEventReset:
		a.end = &endEvent{kind: runsummary.ExitReset}
	case kvm.SystemEventCrash:
		a.end = &endEvent{kind: runsummary.ExitCrash, err: fmt.Errorf("guest reported a crash on vCPU %d (system event data %#x)", cpu, s.Data[:s.NData])}
	default:
		// WAKEUP and SUSPEND: resume the guest, as a VMM that does not
		// implement system suspend must.
		a.Next = vcpu.Continue
	}
	return a
}

// hypercall serves an SMCCC call forwarded by the filter
// (psci.FilterRanges: the PSCI ranges only). A call PSCI does not serve
// (outside those ranges, or a function psci does not implement) is
// answered NOT_SUPPORTED, counted (unknown_smccc_calls) and logged once per
// function ID, for the first maxLoggedKeys IDs.
func (c *exitCore) hypercall(cpu int, h *vcpu.HypercallExit) exitAction {
	fid := h.FID
	a := exitAction{Action: vcpu.Action{Next: vcpu.Continue, Key: c.prof.hypercallKey(fid), SetX0: true}}
	if h.SMC {
		c.prof.noteSMC(fid)
	}
	if c.pm == nil || !psci.InRange(fid) {
		c.notSupported(cpu, fid)
		a.X0 = psci.NotSupported.X0()
		return a
	}
	r, err := c.pm.Handle(cpu, fid, h.Args[0], h.Args[1], h.Args[2])
	if err != nil {
		// Only a VMM bug gets here (a call from a vCPU PSCI holds off).
		c.log.Error("PSCI call rejected", "vcpu", cpu, "function", psci.Name(fid), "err", err)
		r = psci.Result{X0: psci.NotSupported.X0()}
	}
	if s, ok := r.Rejected(); ok {
		c.rejectedPSCI(cpu, fid, s, h.Args[0], h.Args[1])
	}
	if r.X0 == psci.NotSupported.X0() && fid != psci.FnPSCIFeatures {
		// A function mvm does not implement (PSCI_FEATURES answers
		// NOT_SUPPORTED about others as a matter of course).
		c.notSupported(cpu, fid)
	}
	// PSCI returns its result in X0 only; SMCCC lets X1-X3 be anything
	// after such a call, so they are not written (three ioctls saved).
	a.X0 = r.X0
	switch r.Action {
	case psci.ActionStartCPU:
		a.start = cpuStart{ok: true, target: r.Target, entry: r.Entry, context: r.ContextID}
	case psci.ActionCPUOff:
		c.prof.rec[cpu].SetState(userspace.StateOff)
		a.Next = vcpu.PowerOff
	case psci.ActionSystemOff:
		a.Next, a.end = vcpu.Halt, &endEvent{kind: runsummary.ExitPowerOff}
	case psci.ActionSystemReset:
		a.Next, a.end = vcpu.Halt, &endEvent{kind: runsummary.ExitReset}
	case psci.ActionSuspend:
		// Re-entering at once is a correct (early) wake-up, as WFI may
		// be (DEN0022D.b 5.4.2; the package psci doc).
	}
	return a
}

// notSupported counts an SMCCC call answered NOT_SUPPORTED and logs the
// first of each function ID (of the first few IDs).
func (c *exitCore) notSupported(cpu int, fid uint32) {
	c.unknownCount.Add(1)
	if log, filled := c.unknownHVC.first(uint64(fid)); log {
		c.log.Warn("guest made an SMCCC call mvm does not implement; answered NOT_SUPPORTED (logged once per function)",
			"vcpu", cpu, "function", fmt.Sprintf("%#x", fid))
		if filled {
			c.log.Warn("guest made many unknown SMCCC calls: further ones are counted (unknown_smccc_calls), not logged", "logged", maxLoggedKeys)
		}
	}
}

// rejectedPSCI counts a PSCI call refused for its arguments (a CPU_ON to
// an MPIDR no vCPU has, an entry point outside RAM, ...) and logs the
// first of each function and result. The keys are few (psciRejects), so
// unlike unknown function IDs they need no cap. AFFINITY_INFO of an MPIDR
// no vCPU has is how a guest may count its vCPUs (kvm-unit-tests' and
// mvm's own payloads do: the first INVALID_PARAMETERS ends the count), so
// that one is logged at info, not warn.
func (c *exitCore) rejectedPSCI(cpu int, fid uint32, s psci.Status, x1, x2 uint64) {
	if !c.psciRejected.add(fid, s) {
		return
	}
	level := slog.LevelWarn
	if fid == psci.FnAffinityInfo || fid == psci.FnAffinityInfo64 {
		level = slog.LevelInfo
	}
	c.log.Log(context.Background(), level, "guest made a PSCI call with invalid arguments; answered as the spec says (logged once per function and result, counted in psci_rejected)",
		"vcpu", cpu, "function", psci.Name(fid), "result", s.String(), "x1", fmt.Sprintf("%#x", x1), "x2", fmt.Sprintf("%#x", x2))
}
