package vcpu

import (
	"testing"
	"time"
)

// Readings map to durations and times by the counter's frequency, from the
// base taken with the first reading; the clock of this architecture moves
// forward and agrees with the runtime's within a millisecond over 20 ms.
func TestExitClock(t *testing.T) {
	base := time.Now()
	c := exitClock{base: base, baseTicks: 1000, nsPerTick: 40} // 25 MHz
	if got := c.since(1000, 1025); got != time.Microsecond {
		t.Errorf("25 ticks at 25 MHz = %v, want 1µs", got)
	}
	if got := c.at(1000 + 25_000_000); !got.Equal(base.Add(time.Second)) {
		t.Errorf("at(base + 1 s of ticks) = %v, want %v", got, base.Add(time.Second))
	}
	real := newExitClock()
	t0 := real.ticks()
	w := time.Now()
	time.Sleep(20 * time.Millisecond)
	d, wall := real.since(t0, real.ticks()), time.Since(w)
	if d <= 0 || d-wall > time.Millisecond || wall-d > time.Millisecond {
		t.Errorf("20 ms sleep: exit clock %v, runtime clock %v", d, wall)
	}
}
