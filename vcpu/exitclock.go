//go:build linux

package vcpu

import "time"

// exitClock times a vCPU's exits from the generic timer's counter
// (CNTVCT_EL0, read in two instructions) instead of Go's monotonic clock:
// a KVM_RUN return is timed twice (returned, handled), and two vDSO
// clock_gettime calls through the runtime's trampoline were a few hundred
// instructions of each exit's userspace path (BenchmarkMMIOExit in the
// instruction-time lab, docs/profile.md).
//
// Times are offsets from the vCPU's origin on Go's monotonic clock, as
// before: the clock is anchored (a counter read beside a monotonic one)
// at its first read and again whenever 100 ms of counter have passed
// since, so the counter's rate and the monotonic clock's (which NTP may
// slew by up to 500 ppm) can part by at most 50 µs. Owned by the vCPU's
// thread.
type exitClock struct {
	origin      time.Time
	anchorTicks uint64
	anchorOff   time.Duration // the monotonic offset from origin at anchorTicks
	// mult is ns per tick in 32.32 fixed point; limit is 100 ms of ticks,
	// below which d*mult cannot overflow (d*mult < 1e8 * 2^32 < 2^64).
	mult, limit uint64
	// maxSkew is 2 µs of ticks: the widest anchor bracket taken as one
	// moment (two counter reads and a vDSO call take well under 1 µs).
	maxSkew uint64
}

func newExitClock(origin time.Time) exitClock {
	f := counterFreq()
	if f == 0 {
		// A firmware that left CNTFRQ_EL0 unset (Linux complains too):
		// every read re-anchors, on the monotonic clock alone.
		return exitClock{origin: origin}
	}
	return exitClock{origin: origin, mult: (uint64(1e9) << 32) / f, limit: f / 10, maxSkew: max(f/500000, 1)}
}

// anchor pairs a counter value with the monotonic offset of that moment.
// The monotonic read is bracketed by two counter reads and the pair taken
// at their midpoint; a bracket wider than maxSkew means the thread was
// preempted between the reads (seen in CI: 90 µs), which would offset
// every time until the next anchor, so it is read again.
func (c *exitClock) anchor() {
	if c.mult == 0 {
		c.anchorTicks, c.anchorOff = readCounter(), time.Since(c.origin)
		return
	}
	for try := 0; ; try++ {
		t0 := readCounter()
		off := time.Since(c.origin)
		t1 := readCounter()
		if t1-t0 <= c.maxSkew || try == 8 {
			c.anchorTicks, c.anchorOff = t0+(t1-t0)/2, off
			return
		}
	}
}

// now is the offset from origin of the current moment.
func (c *exitClock) now() time.Duration {
	d := readCounter() - c.anchorTicks
	if d >= c.limit {
		// Long since the anchor (or a counter that went back, which
		// wraps d): take the monotonic clock itself and anchor there.
		c.anchor()
		return c.anchorOff
	}
	return c.anchorOff + time.Duration(d*c.mult>>32)
}
