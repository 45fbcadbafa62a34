package vmm

import (
	"errors"

	"github.com/mvm-dev/mvm/internal/fdt"
	"github.com/mvm-dev/mvm/internal/kvm"
)

// errNoPMU is the one line --pmu gets on a host without a guest PMU.
var errNoPMU = errors.New("--pmu: this host's KVM cannot give guests a PMU (no KVM_CAP_ARM_PMU_V3; the host needs a PMUv3 its kernel's perf drives, see 'mvm caps'): run without --pmu")

// checkPMU decides whether --pmu can be honoured; extension answers
// KVM_CHECK_EXTENSION for a capability number (0 when absent or when the
// ioctl fails). KVM_CAP_ARM_PMU_V3 is non-zero when the host's KVM can give
// vCPUs a PMUv3 (the host has a PMUv3 that its perf drives).
func checkPMU(extension func(capability kvm.Cap) int) error {
	if extension(kvm.CapARMPMUv3) <= 0 {
		return errNoPMU
	}
	return nil
}

// PMUNode is the PMU's device-tree node (bindings/arm/pmu.yaml): every
// vCPU has KVM's PMUv3 with its overflow interrupt on one PPI, INTID 23,
// level high. It has no registers in the memory map.
func PMUNode() DeviceNode {
	return DeviceNode{
		What: "PMU",
		Name: "pmu",
		Props: func(b *fdt.Builder, _ uint32) {
			b.PropString("compatible", "arm,armv8-pmuv3")
			b.PropCells("interrupts", dtIRQTypePPI, dtPMUPPI, dtIRQLevelHigh)
		},
	}
}
