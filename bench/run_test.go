package bench

import (
	"testing"

	"github.com/mvm-dev/mvm/vmm"
)

// Every name PhaseNames lists is accepted (console:NAME with any name), and
// nothing else.
func TestKnownPhase(t *testing.T) {
	for _, p := range PhaseNames() {
		if p == vmm.ConsolePhasePrefix+"NAME" {
			p = vmm.ConsolePhasePrefix + "login"
		}
		if !KnownPhase(p) {
			t.Errorf("%q is listed but not known", p)
		}
	}
	for _, p := range []string{"", "nope", vmm.ConsolePhasePrefix, "Total", "total "} {
		if KnownPhase(p) {
			t.Errorf("%q is known", p)
		}
	}
}
