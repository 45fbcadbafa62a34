package vcpu

import "time"

// exitClock times a vCPU's exits with one cheap counter read each
// (newExitClock per architecture) and turns its readings into durations
// and into times on base's clock.
type exitClock struct {
	base         time.Time // taken together with baseTicks
	baseTicks    uint64
	nsPerTick    float64
	runtimeClock bool   // ticks are nanoseconds since base
	rebaseTicks  uint64 // stale after this many ticks (0: never)
}

// stale reports whether reading t is far enough from the base that at()
// should be re-based: the counter runs at its nominal rate, while the
// runtime's monotonic clock (CLOCK_MONOTONIC) follows NTP's frequency
// corrections, up to 500 ppm; re-based every second, at() stays within
// 0.5 ms of time.Now.
func (c *exitClock) stale(t uint64) bool {
	return c.rebaseTicks != 0 && t-c.baseTicks > c.rebaseTicks
}

// since is the time from reading t0 to reading t1.
func (c *exitClock) since(t0, t1 uint64) time.Duration {
	return time.Duration(float64(t1-t0) * c.nsPerTick)
}

// at is the time of reading t, on base's (monotonic) clock.
func (c *exitClock) at(t uint64) time.Time { return c.base.Add(c.since(c.baseTicks, t)) }
