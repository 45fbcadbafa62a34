//go:build linux && arm64

package vmm

import (
	"time"

	"github.com/mvm-dev/mvm/exits/userspace"
	"github.com/mvm-dev/mvm/internal/kvm"
	"github.com/mvm-dev/mvm/runsummary"
	"github.com/mvm-dev/mvm/vcpu"
)

// This file is the VM's side of vCPU exits (vcpu.Handler): what needs the
// running VM (its vCPUs, timeline and end event); exitCore decides the
// exits themselves.

// Entering implements vcpu.Handler: a vCPU is about to enter the guest
// after a power-on.
func (m *VM) Entering(v *vcpu.VCPU) {
	// v.Entered: taken on the vCPU's counter clock just before this call
	// (vcpu.VCPU.Now), not a second clock read on the way into the guest.
	now := v.Entered
	m.mu.Lock()
	if v.ID == 0 && m.timeline.FirstRun.IsZero() {
		m.timeline.FirstRun = now
	}
	if c := &m.timeline.CPUs[v.ID]; c.Entered.IsZero() {
		c.Entered, c.Woken, c.Reset = now, v.Woken, v.Reset
		if v.ID != 0 && m.psci == runsummary.PSCIUser {
			c.CPUOnExit, c.CPUOn = v.LastOn.Exited, v.LastOn.Issued
		}
	}
	m.mu.Unlock()
	m.prof.rec[v.ID].SetState(userspace.StateRunning)
	// Exited's times are offsets from the vCPU's origin, the heat map
	// counts from the VM's.
	m.heat.setOrigin(v.ID, v.Origin())
	if m.pm != nil && v.ID != 0 {
		// A secondary was ON_PENDING since its CPU_ON. The boot CPU is
		// ON from the start: asking would only build an error (and
		// bring fmt's code back into a running VM, docs/footprint.md).
		if err := m.pm.Started(v.ID); err != nil {
			m.log.Error("PSCI start bookkeeping", "vcpu", v.ID, "err", err)
		}
	}
}

// Exit implements vcpu.Handler: exitCore decides, and the VM carries out
// what the vCPU cannot do itself: start another vCPU, end the run.
func (m *VM) Exit(v *vcpu.VCPU, e *vcpu.Exit) vcpu.Action {
	if e.Reason == kvm.ExitMMIO {
		// The hot path: straight to the bus (handle would route it
		// there too, through an answer with nothing else in it).
		return m.mmio(v.ID, &e.MMIO, v)
	}
	a := m.handle(v.ID, e, v)
	if a.start.ok {
		// Posted before the loop writes the caller's X0, so that write
		// overlaps the target's wake-up instead of preceding it.
		req := vcpu.PowerOnRequest{Entry: a.start.entry, Context: a.start.context, Exited: e.At, Issued: v.Now()}
		if !m.cpus[a.start.target].v.PowerOn(req) {
			// PSCI moved the target OFF -> ON_PENDING just now, so
			// no request can be queued for it; reaching this is a bug.
			m.log.Error("CPU_ON: target already has a pending start", "target", a.start.target)
		}
	}
	if a.end != nil {
		m.end(a.end.kind, a.end.err)
	}
	return a.Action
}

// Exited implements vcpu.Handler.
func (m *VM) Exited(v *vcpu.VCPU, reason uint32, sub int, handle, done time.Duration) {
	m.prof.record(v.ID, reason, sub, handle)
	m.heat.add(v.ID, done)
}
