package exits

import (
	"cmp"
	"slices"
)

// Boot phases of a kvm_exit aggregate: each exit belongs to the phase its
// kvm_exit time falls in (vmm_setup, before the first KVM_RUN, has no
// exits). Their names (PhaseName) are the run phases' (runsummary, which
// takes them from here; docs/boot-phases.md) plus after_userspace.
const (
	PhaseBootToSMP = iota
	PhaseSecondaries
	PhaseKernelToUser
	PhaseAfterUser
	NumPhases
)

// The names of the boot phases an exit can fall in. The first three are
// also run phases (durations of mvm's own timeline, runsummary), which take
// their names from here, so that a report can put the exits of boot_to_smp
// beside the boot_to_smp duration.
const (
	NameBootToSMP    = "boot_to_smp"
	NameSecondaries  = "secondaries"
	NameKernelToUser = "kernel_to_user"
	NameAfterUser    = "after_userspace"
)

// PhaseName names phase p (0..NumPhases-1).
func PhaseName(p int) string {
	return [NumPhases]string{NameBootToSMP, NameSecondaries, NameKernelToUser, NameAfterUser}[p]
}

// PhaseBounds are the boot phase boundaries on the CLOCK_MONOTONIC clock
// (0 until seen): the first kvm_entry, the first PSCI CPU_ON exit, the
// last secondary's first entry after it, userspace (the marker, else the
// first user-PC exit), the marker and the first user-PC exit; VCPUs is the
// number of vCPUs (0: not known, no phases).
type PhaseBounds struct {
	First, CPUOn, AllIn, User, Mark, FirstUser uint64
	VCPUs                                      int
}

// Bound names one boundary of PhaseBounds.
type Bound int

// The boundaries that start a phase.
const (
	BoundCPUOn Bound = iota
	BoundAllIn
	BoundUser
)

// PhaseStart is a boundary and the phase that starts there.
type PhaseStart struct {
	Bound Bound
	Phase int
}

// PhaseStarts lists the boundaries latest first: an exit belongs to the
// phase of the first one that is known and not after it; before every
// known one it is in boot_to_smp, or kernel_to_user with one vCPU (there
// are no secondaries). PhaseOf walks it, and the BPF programs compile it.
func PhaseStarts() []PhaseStart {
	return []PhaseStart{{BoundUser, PhaseAfterUser}, {BoundAllIn, PhaseKernelToUser}, {BoundCPUOn, PhaseSecondaries}}
}

// PhaseBeforeBounds is the phase of an exit before every known boundary.
func PhaseBeforeBounds(vcpus int) int {
	if vcpus == 1 {
		return PhaseKernelToUser
	}
	return PhaseBootToSMP
}

// At is the time of boundary k (0: not seen).
func (b PhaseBounds) At(k Bound) uint64 {
	switch k {
	case BoundCPUOn:
		return b.CPUOn
	case BoundAllIn:
		return b.AllIn
	case BoundUser:
		return b.User
	}
	return 0
}

// PhaseOf is the phase (0..NumPhases-1) of an exit at time at with the
// boundaries known so far.
func (b PhaseBounds) PhaseOf(at uint64) int {
	for _, s := range PhaseStarts() {
		if t := b.At(s.Bound); t != 0 && at >= t {
			return s.Phase
		}
	}
	return PhaseBeforeBounds(b.VCPUs)
}

// PhaseTotals are one reason's exits in one phase.
type PhaseTotals struct{ Count, GuestNS, HandleNS uint64 }

// Add adds o into t.
func (t *PhaseTotals) Add(o PhaseTotals) {
	t.Count += o.Count
	t.GuestNS += o.GuestNS
	t.HandleNS += o.HandleNS
}

// PhaseReport builds the report's phases, in boot order with their bounds
// relative to the first entry, and the userspace start, from the bounds
// and the per-phase totals (per phase, reason -> totals).
func PhaseReport(b PhaseBounds, per [NumPhases]map[string]PhaseTotals) ([]PhaseRows, *UserspaceStart) {
	rel := func(t uint64) int64 {
		if t == 0 || t < b.First {
			return -1
		}
		return int64(t - b.First)
	}
	starts := [NumPhases]uint64{PhaseBootToSMP: b.First}
	for _, s := range PhaseStarts() {
		starts[s.Phase] = b.At(s.Bound)
	}
	var out []PhaseRows
	// Without the number of vCPUs (a VMM attached to while it runs) there
	// are no phases to tell.
	for ph := 0; ph < NumPhases && b.VCPUs > 0; ph++ {
		pm := per[ph]
		if len(pm) == 0 {
			continue
		}
		pr := PhaseRows{Phase: PhaseName(ph), StartNS: rel(starts[ph]), EndNS: -1}
		if ph == PhaseBootToSMP || pr.StartNS < 0 {
			pr.StartNS = max(pr.StartNS, 0)
		}
		for next := ph + 1; next < NumPhases; next++ {
			if starts[next] != 0 && len(per[next]) > 0 {
				pr.EndNS = rel(starts[next])
				break
			}
		}
		for reason, acc := range pm {
			pr.Rows = append(pr.Rows, PhaseRow{Reason: reason, Samples: acc.Count, TimeNS: acc.GuestNS, HandleNS: acc.HandleNS})
		}
		slices.SortFunc(pr.Rows, func(x, y PhaseRow) int {
			return cmp.Or(cmp.Compare(y.Samples, x.Samples), cmp.Compare(x.Reason, y.Reason))
		})
		out = append(out, pr)
	}
	var u *UserspaceStart
	if b.User != 0 {
		u = &UserspaceStart{Source: "first_user_exit", AtNS: rel(b.User), FirstUserExitNS: rel(b.FirstUser)}
		if b.Mark != 0 {
			u.Source = "marker"
		}
	}
	return out, u
}
