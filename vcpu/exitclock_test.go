//go:build linux

package vcpu

import (
	"testing"
	"time"
)

// The counter clock must follow the monotonic clock: every reading within a
// few µs of time.Since, across re-anchoring, and never going back.
func TestExitClockFollowsMonotonic(t *testing.T) {
	origin := time.Now()
	c := newExitClock(origin)
	c.anchor()
	var last time.Duration
	deadline := time.Now().Add(300 * time.Millisecond) // spans re-anchors (100 ms)
	for n := 0; time.Now().Before(deadline); n++ {
		before := time.Since(origin)
		got := c.now()
		after := time.Since(origin)
		const slack = 50 * time.Microsecond
		if got < before-slack || got > after+slack {
			t.Fatalf("reading %d: %v, outside the monotonic clock's %v..%v", n, got, before, after)
		}
		if got < last-slack {
			t.Fatalf("reading %d: %v went back from %v", n, got, last)
		}
		last = got
		if n%1000 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
}
