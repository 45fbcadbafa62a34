package vcpu

import "time"

// counter reads CNTVCT_EL0 (counter_arm64.s).
func counter() uint64

// counterFreq reads CNTFRQ_EL0, the counter's frequency in Hz.
func counterFreq() uint64

// newExitClock starts a clock on the architected counter: one MRS per
// reading. The vDSO's clock_gettime reads the same counter but also its
// data page, and right after a KVM_RUN that page read was the expensive
// part in the lab (BenchmarkMMIOExit's CPU profile: 5.7% of the vCPU loop
// in two clock reads per exit; a nested world switch empties the
// emulator's TLB). A host kernel that traps EL0 counter reads (erratum
// workarounds) emulates them, so the read is slow there, never wrong.
func newExitClock() exitClock {
	f := counterFreq()
	if f == 0 {
		// No frequency (firmware left CNTFRQ unset): the runtime's clock.
		return exitClock{base: time.Now(), nsPerTick: 1, runtimeClock: true}
	}
	base := time.Now()
	return exitClock{base: base, baseTicks: counter(), nsPerTick: 1e9 / float64(f)}
}

func (c *exitClock) ticks() uint64 {
	if c.runtimeClock {
		return uint64(time.Since(c.base))
	}
	return counter()
}
