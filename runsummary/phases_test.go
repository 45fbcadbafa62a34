package runsummary

import (
	"encoding/json"
	"os"
	"slices"
	"testing"
)

func TestSortPhases(t *testing.T) {
	ps := []string{"process_cpu", PhaseTotal, "console:b", "process_wall", PhaseSMPConsole, "console:a", PhaseVMMSetup, PhaseSecondariesConsole, PhaseSecondaries}
	SortPhases(ps, "process_wall", "process_cpu")
	want := []string{PhaseVMMSetup, PhaseSecondaries, PhaseSecondariesConsole, PhaseSMPConsole, PhaseTotal, "console:a", "console:b", "process_wall", "process_cpu"}
	if !slices.Equal(ps, want) {
		t.Errorf("sorted %v, want %v", ps, want)
	}
}

// The boot vCPU's first KVM_RUN is its entered_ns; -1 when not observed.
func TestSummaryFirstRun(t *testing.T) {
	for _, tt := range []struct {
		name string
		s    Summary
		want int64
	}{
		{"none", Summary{}, -1},
		{"one vCPU", Summary{CPUOnNS: []int64{-1}, EnteredNS: []int64{50}}, 50},
		{"not entered", Summary{CPUOnNS: []int64{-1}, EnteredNS: []int64{-1}}, -1},
	} {
		if got := tt.s.FirstRunNS(); got != tt.want {
			t.Errorf("%s: FirstRunNS %d, want %d", tt.name, got, tt.want)
		}
	}
}

// A result file comes from outside (mvm report reads any file): whatever
// it holds, its moments give no negative phase, every phase they give has
// a start no later than its end, and asking for them does not panic.
func FuzzSummaryMoments(f *testing.F) {
	if seed, err := os.ReadFile("testdata/run.json"); err == nil {
		f.Add(seed)
	} else {
		f.Fatal(err)
	}
	f.Add([]byte(`{"cpu_on_ns":[-1,5,7],"entered_ns":[3,6,2],"phases_ns":{"kernel_to_user":-9,"total":1},"console_marks_ns":{"smp":4,"x":-1}}`))
	f.Add([]byte(`{"entered_ns":[],"cpu_on_ns":[-1]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var s Summary
		if json.Unmarshal(data, &s) != nil {
			return
		}
		m := s.Moments()
		for name, d := range m.Phases() {
			st := m.PhaseStart(name)
			if d < 0 || st < 0 {
				t.Errorf("%s: %d ns from %d", name, d, st)
			}
		}
		if m.PhaseStart("no such phase") != -1 {
			t.Error("a phase the file does not have has a start")
		}
	})
}
