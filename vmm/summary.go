package vmm

import (
	"time"

	"github.com/mvm-dev/mvm/runsummary"
)

// Summary condenses a result for JSON.
func (r Result) Summary() runsummary.Summary {
	t := r.Timeline
	off := func(at time.Time) int64 {
		if at.IsZero() || t.Start.IsZero() {
			return -1
		}
		return int64(at.Sub(t.Start))
	}
	s := runsummary.Summary{
		Exit: r.Exit, PSCI: r.PSCI, CPUs: len(t.CPUs), Reboots: r.Reboots,
		PhasesNS:     map[string]int64{},
		ConsoleNS:    map[string]int64{},
		Memory:       runsummary.MemorySummary{RSS: r.Memory.RSS, GuestResident: r.Memory.GuestResident, Overhead: r.Memory.Overhead(), PrivateOverhead: r.Memory.PrivateOverhead()},
		Unmapped:     r.UnmappedAccesses,
		UnknownSMCCC: r.UnknownSMCCCCalls,
		Virtio:       r.VirtioProblems,

		PSCIRejectedCalls: totalRejected(r.PSCIRejected),
		PSCIRejected:      r.PSCIRejected,
		Profile:           r.Profile,
		ExitHeat:          r.ExitHeat,

		UserspaceFrom: t.UserspaceFrom,
	}
	if r.Config.Kernel != "" {
		c := r.Config
		s.Config = &c
	}
	if r.Host.OS != "" {
		h := r.Host
		s.Host = &h
	}
	if r.Err != nil {
		s.Error = r.Err.Error()
	}
	for name, d := range t.Phases() {
		s.PhasesNS[name] = int64(d)
	}
	for _, c := range t.CPUs {
		s.CPUOnNS = append(s.CPUOnNS, off(c.CPUOn))
		s.EnteredNS = append(s.EnteredNS, off(c.Entered))
		s.CPUOnExitNS = append(s.CPUOnExitNS, off(c.CPUOnExit))
		s.WokenNS = append(s.WokenNS, off(c.Woken))
		s.ResetNS = append(s.ResetNS, off(c.Reset))
	}
	s.MarksDropped = t.MarksDropped
	for _, m := range t.Marks {
		s.MarksNS = append(s.MarksNS, runsummary.MarkSummary{Code: m.Code, AtNS: off(m.At)})
	}
	for k, v := range t.ConsoleMarks {
		s.ConsoleNS[k] = off(v)
	}
	return s
}
