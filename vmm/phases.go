package vmm

import (
	"time"

	"github.com/mvm-dev/mvm/runsummary"
)

// Moments derives the boot's moments from the timeline.
func (t Timeline) Moments() runsummary.Moments {
	off := func(at time.Time) int64 {
		if at.IsZero() || t.Start.IsZero() || at.Before(t.Start) {
			return -1
		}
		return int64(at.Sub(t.Start))
	}
	on, in := make([]int64, len(t.CPUs)), make([]int64, len(t.CPUs))
	for i, c := range t.CPUs {
		on[i], in[i] = off(c.CPUOn), off(c.Entered)
	}
	console := map[string]int64{}
	for k, at := range t.ConsoleMarks {
		console[k] = off(at)
	}
	m := runsummary.NewMoments(off(t.FirstRun), on, in, off(t.UserspaceMark), off(t.End), console)
	m.CommandEnd = off(t.CommandEnd)
	return m
}

// Phases computes the boot phases of a timeline (runsummary.Moments.Phases).
func (t Timeline) Phases() map[string]time.Duration {
	p := map[string]time.Duration{}
	for name, ns := range t.Moments().Phases() {
		p[name] = time.Duration(ns)
	}
	return p
}
