package vmm

import (
	"time"
)

// Phase names, in boot order; docs/boot-phases.md defines where each clock
// starts and stops.
const (
	PhaseVMMSetup     = "vmm_setup"      // VMM start -> boot vCPU's first KVM_RUN
	PhaseBootToSMP    = "boot_to_smp"    // first KVM_RUN -> first CPU_ON serviced
	PhaseSecondaries  = "secondaries"    // first CPU_ON -> last secondary's first guest entry
	PhaseSMPConsole   = "smp_console"    // first KVM_RUN -> console line "smp: Brought up"
	PhaseKernelToUser = "kernel_to_user" // first KVM_RUN -> userspace boot marker
	PhaseTotal        = "total"          // VMM start -> VM exit
)

// PhaseNames lists the phases in boot order.
func PhaseNames() []string {
	return []string{PhaseVMMSetup, PhaseBootToSMP, PhaseSecondaries, PhaseSMPConsole, PhaseKernelToUser, PhaseTotal}
}

// Phases computes the boot phases of a timeline. A phase whose start or end
// was not observed is absent (not zero): secondaries with one vCPU or with
// KVM's in-kernel PSCI (mvm does not see CPU_ON then), kernel_to_user
// without a userspace marker, smp_console when the kernel did not print
// the line (quiet).
func (t Timeline) Phases() map[string]time.Duration {
	p := map[string]time.Duration{}
	set := func(name string, from, to time.Time) {
		if !from.IsZero() && !to.IsZero() && !to.Before(from) {
			p[name] = to.Sub(from)
		}
	}
	set(PhaseVMMSetup, t.Start, t.FirstRun)
	set(PhaseTotal, t.Start, t.End)
	var firstOn, lastIn time.Time
	all := len(t.CPUs) > 1
	for i, c := range t.CPUs {
		if i == 0 {
			continue
		}
		if c.CPUOn.IsZero() || c.Entered.IsZero() {
			all = false
			continue
		}
		if firstOn.IsZero() || c.CPUOn.Before(firstOn) {
			firstOn = c.CPUOn
		}
		if c.Entered.After(lastIn) {
			lastIn = c.Entered
		}
	}
	set(PhaseBootToSMP, t.FirstRun, firstOn)
	if all {
		set(PhaseSecondaries, firstOn, lastIn)
	}
	if at, ok := t.ConsoleMarks[ConsoleMarkSMP]; ok {
		set(PhaseSMPConsole, t.FirstRun, at)
	}
	set(PhaseKernelToUser, t.FirstRun, t.UserspaceMark)
	return p
}
