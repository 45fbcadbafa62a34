//go:build linux && arm64

package vmm

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/mvm-dev/mvm/exits/userspace"
	"github.com/mvm-dev/mvm/psci"
	"github.com/mvm-dev/mvm/runsummary"
	"github.com/mvm-dev/mvm/vcpu"
)

// newPSCI builds the PSCI state machine for user mode. PendingAsOn makes
// racing CPU_ONs for one target see exactly one SUCCESS and ALREADY_ON for
// the rest, as KVM's in-kernel PSCI answers.
func (m *VM) newPSCI(mpidrs []uint64) error {
	pm, err := psci.New(psci.Config{
		MPIDRs:           mpidrs,
		ValidEntry:       m.validEntry,
		ExternalFeatures: []uint32{psci.SMCCCVersionFID},
		PendingAsOn:      true,
	})
	if err != nil {
		return fmt.Errorf("PSCI: %w", err)
	}
	m.pm = pm
	return nil
}

// Hypercall implements vcpu.Handler: an SMCCC call forwarded by the filter
// (psci.FilterRanges: the PSCI ranges only). A call PSCI does not serve
// (outside those ranges, or a function psci does not implement) is
// answered NOT_SUPPORTED, counted (unknown_smccc_calls) and logged once per
// function ID, for the first maxLoggedKeys IDs.
func (m *VM) Hypercall(v *vcpu.VCPU, fid uint32, smc bool) vcpu.Next {
	v.ExitKey = m.prof.hypercallKey(fid)
	if smc {
		m.prof.noteSMC(fid)
	}
	if m.pm == nil || !psci.InRange(fid) {
		m.unknownHypercall(v, fid)
		return vcpu.Continue
	}
	var x [4]uint64
	for i := 1; i <= psci.Args(fid); i++ {
		var err error
		if x[i], err = v.X(i); err != nil {
			m.end(runsummary.ExitFault, fmt.Errorf("vCPU %d: read X%d for PSCI call %s: %w", v.ID, i, psci.Name(fid), err))
			return vcpu.Halt
		}
	}
	r, err := m.pm.Handle(v.ID, fid, x[1], x[2], x[3])
	if err != nil {
		// Only a VMM bug gets here (a call from a vCPU PSCI holds off).
		m.log.Error("PSCI call rejected", "vcpu", v.ID, "function", psci.Name(fid), "err", err)
		r = psci.Result{X0: psci.NotSupported.X0()}
	}
	if r.Action == psci.ActionStartCPU {
		// Wake the target before the caller's own register write, so
		// that write overlaps the target's wake-up instead of
		// preceding it.
		req := vcpu.PowerOnRequest{Entry: r.Entry, Context: r.ContextID, Exited: v.LastExit, Issued: time.Now()}
		if !m.cpus[r.Target].v.PowerOn(req) {
			// PSCI moved the target OFF -> ON_PENDING just now, so
			// no request can be queued for it; reaching this is a bug.
			m.log.Error("CPU_ON: target already has a pending start", "target", r.Target)
		}
	}
	if s, ok := r.Rejected(); ok {
		m.rejectedPSCI(v, fid, s, x[1], x[2])
	}
	if r.X0 == psci.NotSupported.X0() && fid != psci.FnPSCIFeatures {
		// A function mvm does not implement (PSCI_FEATURES answers
		// NOT_SUPPORTED about others as a matter of course).
		m.notSupported(v, fid)
	}
	// PSCI returns its result in X0 only; SMCCC lets X1-X3 be anything
	// after such a call, so they are not written (three ioctls saved).
	if err := v.SetX(0, r.X0); err != nil {
		m.end(runsummary.ExitFault, fmt.Errorf("vCPU %d: write X0 for PSCI call %s: %w", v.ID, psci.Name(fid), err))
		return vcpu.Halt
	}
	switch r.Action {
	case psci.ActionCPUOff:
		m.prof.rec[v.ID].SetState(userspace.StateOff)
		return vcpu.PowerOff
	case psci.ActionSystemOff:
		m.end(runsummary.ExitPowerOff, nil)
		return vcpu.Halt
	case psci.ActionSystemReset:
		m.end(runsummary.ExitReset, nil)
		return vcpu.Halt
	case psci.ActionSuspend:
		// Re-entering at once is a correct (early) wake-up.
	}
	return vcpu.Continue
}

func (m *VM) unknownHypercall(v *vcpu.VCPU, fid uint32) {
	m.notSupported(v, fid)
	if err := v.SetX(0, psci.NotSupported.X0()); err != nil {
		m.log.Error("write X0", "vcpu", v.ID, "err", err)
	}
}

// notSupported counts an SMCCC call answered NOT_SUPPORTED and logs the
// first of each function ID (of the first few IDs).
func (m *VM) notSupported(v *vcpu.VCPU, fid uint32) {
	m.unknownCount.Add(1)
	if log, filled := m.unknownHVC.first(uint64(fid)); log {
		m.log.Warn("guest made an SMCCC call mvm does not implement; answered NOT_SUPPORTED (logged once per function)",
			"vcpu", v.ID, "function", fmt.Sprintf("%#x", fid))
		if filled {
			m.log.Warn("guest made many unknown SMCCC calls: further ones are counted (unknown_smccc_calls), not logged", "logged", maxLoggedKeys)
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
func (m *VM) rejectedPSCI(v *vcpu.VCPU, fid uint32, s psci.Status, x1, x2 uint64) {
	if !m.psciRejected.add(fid, s) {
		return
	}
	level := slog.LevelWarn
	if fid == psci.FnAffinityInfo || fid == psci.FnAffinityInfo64 {
		level = slog.LevelInfo
	}
	m.log.Log(context.Background(), level, "guest made a PSCI call with invalid arguments; answered as the spec says (logged once per function and result, counted in psci_rejected)",
		"vcpu", v.ID, "function", psci.Name(fid), "result", s.String(), "x1", fmt.Sprintf("%#x", x1), "x2", fmt.Sprintf("%#x", x2))
}

// validEntry is whether a CPU_ON or CPU_SUSPEND entry point can be: inside
// guest RAM and 4-byte aligned (A64 instructions are; a misaligned PC
// would fault at the first fetch, DDI 0487 D1.9.1), so INVALID_ADDRESS
// otherwise.
func (m *VM) validEntry(addr uint64) bool { return addr%4 == 0 && m.ram.contains(addr) }
