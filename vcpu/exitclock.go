package vcpu

import "time"

// exitClock times a vCPU's exits with one cheap counter read each
// (newExitClock per architecture) and turns its readings into durations
// and into times on base's clock.
type exitClock struct {
	base         time.Time // taken together with baseTicks
	baseTicks    uint64
	nsPerTick    float64
	runtimeClock bool // ticks are nanoseconds since base
}

// since is the time from reading t0 to reading t1.
func (c *exitClock) since(t0, t1 uint64) time.Duration {
	return time.Duration(float64(t1-t0) * c.nsPerTick)
}

// at is the time of reading t, on base's (monotonic) clock.
func (c *exitClock) at(t uint64) time.Time { return c.base.Add(c.since(c.baseTicks, t)) }
