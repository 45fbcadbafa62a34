package runsummary

import "testing"

// TestCommandPhase: command runs from the userspace marker (command
// mode's init starting) to the command's status, is absent outside
// command mode, and comes back from a result file's phases.
func TestCommandPhase(t *testing.T) {
	m := NewMoments(1000, []int64{-1}, []int64{-1}, 5000, 9000, nil)
	if _, ok := m.Phases()[PhaseCommand]; ok {
		t.Errorf("a command phase without a command: %v", m.Phases())
	}
	m.CommandEnd = 8000
	p := m.Phases()
	if p[PhaseCommand] != 3000 {
		t.Errorf("command = %d ns, want 3000 (marker at 5000, status at 8000)", p[PhaseCommand])
	}
	if m.PhaseStart(PhaseCommand) != 5000 {
		t.Errorf("command starts at %d, want the marker's 5000", m.PhaseStart(PhaseCommand))
	}
	s := Summary{PhasesNS: p, ConsoleNS: map[string]int64{}, EnteredNS: []int64{1000}}
	if got := s.Moments().CommandEnd; got != 8000 {
		t.Errorf("CommandEnd from the result file = %d, want 8000", got)
	}
	m.CommandEnd = 4000 // before the marker: not a phase
	if _, ok := m.Phases()[PhaseCommand]; ok {
		t.Error("a command phase that runs backwards")
	}
}
