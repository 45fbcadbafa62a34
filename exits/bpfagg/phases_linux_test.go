//go:build linux

package bpfagg

import (
	"testing"

	"github.com/mvm-dev/mvm/exits"
)

// TestBoundOffsets: every boundary the exit model's phase starts name has
// its own word in the phase map, inside the value and apart from the
// words that are no boundaries (vCPU count, secondaries entered, marker),
// so a boundary added to exits.PhaseStarts fails here, not in a program.
func TestBoundOffsets(t *testing.T) {
	seen := map[int16]exits.Bound{}
	for _, s := range exits.PhaseStarts() {
		off := boundOffset(s.Bound)
		if off < 0 || off+8 > phaseSize || off%8 != 0 {
			t.Errorf("boundary %d at offset %d, outside the %d-byte value", s.Bound, off, phaseSize)
		}
		if off == gVCPUs || off == gSecIn || off == gMark || off == gFirst {
			t.Errorf("boundary %d shares offset %d with a word that is no phase start", s.Bound, off)
		}
		if b, dup := seen[off]; dup {
			t.Errorf("boundaries %d and %d share offset %d", b, s.Bound, off)
		}
		seen[off] = s.Bound
	}
}
