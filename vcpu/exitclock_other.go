//go:build !arm64

package vcpu

import "time"

// newExitClock: off arm64, the runtime's monotonic clock in nanoseconds.
func newExitClock() exitClock { return exitClock{base: time.Now(), nsPerTick: 1, runtimeClock: true} }

func (c *exitClock) ticks() uint64 { return uint64(time.Since(c.base)) }
