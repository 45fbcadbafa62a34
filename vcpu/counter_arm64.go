//go:build linux && arm64

package vcpu

// readCounter reads the generic timer's virtual count (counter_arm64.s).
func readCounter() uint64

// counterFreq is its frequency in Hz (CNTFRQ_EL0).
func counterFreq() uint64
