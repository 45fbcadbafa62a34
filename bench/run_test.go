package bench

import (
	"testing"

	"github.com/mvm-dev/mvm/runsummary"
)

// Every name PhaseNames lists is accepted (console:NAME with any name), and
// nothing else.
func TestKnownPhase(t *testing.T) {
	for _, p := range PhaseNames() {
		if p == runsummary.ConsolePhasePrefix+"NAME" {
			p = runsummary.ConsolePhasePrefix + "login"
		}
		if !KnownPhase(p) {
			t.Errorf("%q is listed but not known", p)
		}
	}
	for _, p := range []string{"", "nope", runsummary.ConsolePhasePrefix, "Total", "total "} {
		if KnownPhase(p) {
			t.Errorf("%q is known", p)
		}
	}
}
