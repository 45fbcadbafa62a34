package runsummary

import (
	"testing"

	"github.com/mvm-dev/mvm/exits"
)

// TestExitPhaseNames: the exit profile's phases (exits.PhaseName) that
// are also run phases carry the run's names, so a report can put the
// exits of boot_to_smp beside the boot_to_smp duration.
func TestExitPhaseNames(t *testing.T) {
	for p, want := range map[int]string{exits.PhaseBootToSMP: PhaseBootToSMP, exits.PhaseSecondaries: PhaseSecondaries,
		exits.PhaseKernelToUser: PhaseKernelToUser} {
		if got := exits.PhaseName(p); got != want {
			t.Errorf("exit phase %d is %q, the run's is %q", p, got, want)
		}
	}
}
