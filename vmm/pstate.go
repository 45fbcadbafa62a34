package vmm

import "fmt"

// exceptionLevel names PSTATE's mode field M[4:0] (Arm ARM C5.2.18,
// SPSR_EL2 layout, which KVM's PSTATE register uses).
func exceptionLevel(pstate uint64) string {
	if pstate&0x10 != 0 { // M[4]: an AArch32 mode
		return "AArch32"
	}
	switch pstate & 0xf {
	case 0x0:
		return "EL0t"
	case 0x4:
		return "EL1t"
	case 0x5:
		return "EL1h"
	}
	return fmt.Sprintf("mode %#x", pstate&0x1f)
}
