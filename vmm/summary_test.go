package vmm

import "testing"

// The reference points the phases start from: vCPU 0's CPU_ON never counts
// (it is -1 by definition), and unobserved entries (-1) are passed over.
func TestSummaryMoments(t *testing.T) {
	for _, tt := range []struct {
		name                 string
		s                    Summary
		firstRun, on, lastIn int64
	}{
		{"none", Summary{}, -1, -1, -1},
		{"one vCPU", Summary{CPUOnNS: []int64{-1}, EnteredNS: []int64{50}}, 50, -1, -1},
		{"not entered", Summary{CPUOnNS: []int64{-1}, EnteredNS: []int64{-1}}, -1, -1, -1},
		{"secondaries", Summary{CPUOnNS: []int64{7, 300, -1, 200}, EnteredNS: []int64{50, 320, -1, 250}}, 50, 200, 320},
	} {
		s := tt.s
		if got := s.FirstRunNS(); got != tt.firstRun {
			t.Errorf("%s: FirstRunNS %d, want %d", tt.name, got, tt.firstRun)
		}
		if got := s.FirstCPUOnNS(); got != tt.on {
			t.Errorf("%s: FirstCPUOnNS %d, want %d", tt.name, got, tt.on)
		}
		if got := s.LastEnteredNS(); got != tt.lastIn {
			t.Errorf("%s: LastEnteredNS %d, want %d", tt.name, got, tt.lastIn)
		}
	}
}
