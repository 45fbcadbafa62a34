package runsummary

import (
	"slices"
	"strings"

	"github.com/mvm-dev/mvm/exits"
)

// Phase names, in boot order; docs/boot-phases.md defines where each clock
// starts and stops. The phases an exit can also fall in take their names
// from the exit model (exits.PhaseName).
const (
	PhaseVMMSetup    = "vmm_setup"           // VMM start -> boot vCPU's first KVM_RUN
	PhaseBootToSMP   = exits.NameBootToSMP   // first KVM_RUN -> first CPU_ON serviced
	PhaseSecondaries = exits.NameSecondaries // first CPU_ON -> last secondary's first guest entry
	// PhaseSecondariesConsole: first CPU_ON -> the kernel's console line
	// "smp: Brought up ...". Needs PSCI in userspace (for CPU_ON) and a
	// console that prints the line (not with quiet).
	PhaseSecondariesConsole = "secondaries_console"
	PhaseSMPConsole         = "smp_console"          // first KVM_RUN -> console line "smp: Brought up"
	PhaseKernelToUser       = exits.NameKernelToUser // first KVM_RUN -> userspace boot marker
	// PhaseCommand: userspace boot marker (command mode's init starting)
	// -> the command's status reaching mvm (mvm run -- CMD only).
	PhaseCommand = "command"
	PhaseTotal   = "total" // VMM start -> VM exit
	// ConsolePhasePrefix + NAME: first KVM_RUN -> the first console line
	// matching --marker NAME=REGEX (any marker but the built-in smp).
	ConsolePhasePrefix = "console:"
)

// ConsoleMarkSMP is the built-in console marker (a key of
// Summary.ConsoleNS): the kernel's line "smp: Brought up N nodes, M CPUs"
// after secondary bring-up, which ends smp_console and
// secondaries_console.
const ConsoleMarkSMP = "smp"

// PhaseNames lists the fixed phases in boot order (console:NAME phases
// are named by their markers).
func PhaseNames() []string {
	return []string{PhaseVMMSetup, PhaseBootToSMP, PhaseSecondaries, PhaseSecondariesConsole, PhaseSMPConsole, PhaseKernelToUser, PhaseCommand, PhaseTotal}
}

// Moments are the instants the boot phases run between, in nanoseconds
// since the VMM started; -1 where not observed.
type Moments struct {
	FirstRun   int64 // the boot vCPU's first KVM_RUN
	FirstCPUOn int64 // the first CPU_ON serviced for a secondary
	// AllIn is the last secondary's first guest entry, and only when
	// every secondary came up by a CPU_ON mvm serviced.
	AllIn     int64
	Userspace int64 // the userspace boot marker (or first user exit)
	// CommandEnd is when command mode's status came in (-1 outside
	// command mode); NewMoments leaves it -1 for the caller to set.
	CommandEnd int64
	End        int64 // VM exit
	// Console holds, per console marker, when a line first matched it.
	Console map[string]int64
}

// NewMoments derives the Moments from the per-vCPU records (index = vCPU
// id; vCPU 0's CPU_ON does not count), all in nanoseconds since the VMM
// start and -1 where not observed: the one place that says which CPU_ON
// and which entry the phases' clocks use, for a live timeline (vmm) and a
// result file (Summary.Moments) alike.
func NewMoments(firstRun int64, cpuOn, entered []int64, user, end int64, console map[string]int64) Moments {
	m := Moments{FirstRun: firstRun, FirstCPUOn: -1, AllIn: -1, Userspace: user, CommandEnd: -1, End: end, Console: map[string]int64{}}
	all := len(cpuOn) > 1
	last := int64(-1)
	for i := 1; i < len(cpuOn); i++ {
		on, in := cpuOn[i], int64(-1)
		if i < len(entered) {
			in = entered[i]
		}
		if on < 0 || in < 0 {
			all = false
			continue
		}
		if m.FirstCPUOn < 0 || on < m.FirstCPUOn {
			m.FirstCPUOn = on
		}
		last = max(last, in)
	}
	if all {
		m.AllIn = last
	}
	for k, v := range console {
		if v >= 0 {
			m.Console[k] = v
		}
	}
	return m
}

// phaseSpan is where a phase's clock starts and stops.
type phaseSpan struct{ from, to int64 }

// spans defines every phase this boot has both ends of, whatever their
// order; Phases keeps those that do not run backwards.
func (m Moments) spans() map[string]phaseSpan {
	s := map[string]phaseSpan{
		PhaseVMMSetup:     {0, m.FirstRun},
		PhaseBootToSMP:    {m.FirstRun, m.FirstCPUOn},
		PhaseSecondaries:  {m.FirstCPUOn, m.AllIn},
		PhaseKernelToUser: {m.FirstRun, m.Userspace},
		PhaseCommand:      {m.Userspace, m.CommandEnd},
		PhaseTotal:        {0, m.End},
	}
	for name, at := range m.Console {
		if name == ConsoleMarkSMP {
			s[PhaseSMPConsole] = phaseSpan{m.FirstRun, at}
			s[PhaseSecondariesConsole] = phaseSpan{m.FirstCPUOn, at}
			continue
		}
		s[ConsolePhasePrefix+name] = phaseSpan{m.FirstRun, at}
	}
	for name, sp := range s {
		if sp.from < 0 || sp.to < 0 || sp.to < sp.from {
			delete(s, name)
		}
	}
	return s
}

// Phases computes the boot phases, in nanoseconds. A phase whose start or
// end was not observed is absent (not zero): secondaries with one vCPU or
// with KVM's in-kernel PSCI (mvm does not see CPU_ON then), kernel_to_user
// without a userspace marker, smp_console and secondaries_console when the
// kernel did not print the line (quiet).
func (m Moments) Phases() map[string]int64 {
	p := map[string]int64{}
	for name, sp := range m.spans() {
		p[name] = sp.to - sp.from
	}
	return p
}

// PhaseStart is where phase name's clock started, or -1 if this boot has
// no such phase.
func (m Moments) PhaseStart(name string) int64 {
	if sp, ok := m.spans()[name]; ok {
		return sp.from
	}
	return -1
}

// Moments derives the boot's moments from a result file, by the same rules
// as a live timeline's (NewMoments). The userspace moment is not in the
// file on its own; it follows from kernel_to_user.
func (s *Summary) Moments() Moments {
	first := s.FirstRunNS()
	user, end := int64(-1), int64(-1)
	if d, ok := s.PhasesNS[PhaseKernelToUser]; ok && first >= 0 {
		user = first + d
	}
	if d, ok := s.PhasesNS[PhaseTotal]; ok {
		end = d
	}
	m := NewMoments(first, s.CPUOnNS, s.EnteredNS, user, end, s.ConsoleNS)
	if d, ok := s.PhasesNS[PhaseCommand]; ok && user >= 0 {
		m.CommandEnd = user + d
	}
	return m
}

// SortPhases orders phase names for output: the fixed phases in boot
// order, then console:NAME phases and any other names in name order, then
// the names in last (mvm bench's process measures), in that order.
func SortPhases(ps []string, last ...string) {
	rank := func(p string) int {
		if i := slices.Index(PhaseNames(), p); i >= 0 {
			return i
		}
		if i := slices.Index(last, p); i >= 0 {
			return 1000 + i
		}
		return 500
	}
	slices.SortStableFunc(ps, func(a, b string) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		return strings.Compare(a, b)
	})
}
