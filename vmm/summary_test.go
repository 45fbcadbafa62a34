package vmm

import "testing"

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
