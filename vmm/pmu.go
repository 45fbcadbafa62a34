package vmm

import "errors"

// capARMPMUv3 is KVM_CAP_ARM_PMU_V3 (include/uapi/linux/kvm.h): non-zero
// when the host's KVM can give vCPUs a PMUv3 (the host has a PMUv3 that
// its perf drives).
const capARMPMUv3 = 126

// errNoPMU is the one line --pmu gets on a host without a guest PMU.
var errNoPMU = errors.New("--pmu: this host's KVM cannot give guests a PMU (no KVM_CAP_ARM_PMU_V3; the host needs a PMUv3 its kernel's perf drives, see 'mvm caps'): run without --pmu")

// checkPMU decides whether --pmu can be honoured; extension answers
// KVM_CHECK_EXTENSION for a capability number (0 when absent or when the
// ioctl fails).
func checkPMU(extension func(capability int) int) error {
	if extension(capARMPMUv3) <= 0 {
		return errNoPMU
	}
	return nil
}
