//go:build linux && arm64

package vmm

import (
	"fmt"
	"time"

	"github.com/mvm-dev/mvm/exits/userspace"
	"github.com/mvm-dev/mvm/internal/kvm"
	"github.com/mvm-dev/mvm/runsummary"
	"github.com/mvm-dev/mvm/vcpu"
)

// This file is the VM's side of vCPU exits (vcpu.Handler): device MMIO,
// PSCI hypercalls, system events and accounting.

// Entering implements vcpu.Handler: a vCPU is about to enter the guest
// after a power-on.
func (m *VM) Entering(v *vcpu.VCPU) {
	now := time.Now()
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
	if m.pm != nil && v.ID != 0 {
		// A secondary was ON_PENDING since its CPU_ON. The boot CPU is
		// ON from the start: asking would only build an error (and
		// bring fmt's code back into a running VM, docs/footprint.md).
		if err := m.pm.Started(v.ID); err != nil {
			m.log.Error("PSCI start bookkeeping", "vcpu", v.ID, "err", err)
		}
	}
}

// MMIO implements vcpu.Handler.
func (m *VM) MMIO(v *vcpu.VCPU, addr uint64, data []byte, write bool) {
	if dev, off, idx := m.bus.Lookup(addr); dev != nil {
		v.ExitKey = m.prof.mmioKey(idx)
		if write {
			dev.Write(off, data)
		} else {
			dev.Read(off, data)
		}
		return
	}
	// Nothing here: reads as zero, writes are dropped, the guest goes on.
	v.ExitKey = int(m.prof.unmapped)
	m.unmappedCount.Add(1)
	if !write {
		clear(data)
	}
	if log, filled := m.unmappedSeen.first(addr); log {
		pc, _ := v.Reg(kvm.RegPC)
		m.log.Warn("guest accessed an unmapped address (reads return 0; logged once per address)",
			"vcpu", v.ID, "addr", fmt.Sprintf("%#x", addr), "write", write, "size", len(data), "pc", fmt.Sprintf("%#x", pc))
		if filled {
			m.log.Warn("guest accessed many unmapped addresses: further ones are counted (unmapped_accesses), not logged", "logged", maxLoggedKeys)
		}
	}
}

// SystemEvent implements vcpu.Handler: KVM's own PSCI (kernel mode) reports
// SYSTEM_OFF/RESET this way, and a guest crash report arrives here too.
func (m *VM) SystemEvent(v *vcpu.VCPU, typ uint32, data []uint64) vcpu.Next {
	v.ExitKey = m.prof.systemEventKey(typ)
	switch typ {
	case kvm.SystemEventShutdown:
		m.end(runsummary.ExitPowerOff, nil)
	case kvm.SystemEventReset:
		m.end(runsummary.ExitReset, nil)
	case kvm.SystemEventCrash:
		m.end(runsummary.ExitCrash, fmt.Errorf("guest reported a crash on vCPU %d (system event data %#x)", v.ID, data))
	default:
		// WAKEUP and SUSPEND: resume the guest, as a VMM that does not
		// implement system suspend must.
		return vcpu.Continue
	}
	return vcpu.Halt
}

// Exited implements vcpu.Handler.
func (m *VM) Exited(v *vcpu.VCPU, reason uint32, sub int, handle time.Duration, done time.Time) {
	m.prof.record(v.ID, reason, sub, handle)
	m.heat.add(v.ID, done)
}
