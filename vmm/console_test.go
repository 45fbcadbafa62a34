package vmm

import (
	"io"
	"maps"
	"slices"
	"testing"

	"github.com/mvm-dev/mvm/runsummary"
)

// Each marker records the first line it matches, written byte by byte as
// the UART does; the literal-prefix shortcut changes nothing: an anchored
// marker, one that is case-insensitive (no literal prefix) and the built-in
// one all match where the regexp does, and no earlier.
func TestConsoleWatcherMarks(t *testing.T) {
	var ms []ConsoleMarker
	for _, spec := range []string{"done=^smp test done$", "init=(?i)run /INIT", "late=late"} {
		m, err := ParseConsoleMarker(spec)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	c := newConsoleWatcher(io.Discard, append(DefaultConsoleMarkers(), ms...))
	lines := []string{
		"smp: Brought up all nodes", // the prefix, not a match
		"x smp test done",
		"[    0.1] smp: Brought up 1 node, 4 CPUs",
		"Run /init as init process",
		"smp test done",
		"not yet",
	}
	seen := map[string]int{}
	for i, l := range lines {
		for _, b := range []byte(l + "\n") {
			c.Write([]byte{b})
		}
		for k := range c.marks() {
			if _, ok := seen[k]; !ok {
				seen[k] = i
			}
		}
	}
	want := map[string]int{runsummary.ConsoleMarkSMP: 2, "init": 3, "done": 4}
	if !maps.Equal(seen, want) {
		t.Errorf("first matching line per marker %v, want %v", seen, want)
	}
	if got := slices.Sorted(maps.Keys(c.marks())); !slices.Equal(got, []string{"done", "init", runsummary.ConsoleMarkSMP}) {
		t.Errorf("marks %v", got)
	}
}
