//go:build linux && !arm64

package vcpu

import "golang.org/x/sys/unix"

// readCounter stands in for CNTVCT_EL0 where there is none (vcpu builds
// on the x86 host for its unit tests): CLOCK_MONOTONIC in nanoseconds.
func readCounter() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}

// counterFreq is readCounter's frequency.
func counterFreq() uint64 { return 1e9 }
