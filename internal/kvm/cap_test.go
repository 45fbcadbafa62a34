//go:build linux

package kvm

import (
	"testing"

	hkvm "github.com/c35s/hype/kvm"
)

// TestCapNumbers checks mvm's capability numbers against hype's table of
// include/uapi/linux/kvm.h, written independently of this package.
func TestCapNumbers(t *testing.T) {
	for _, tt := range []struct {
		name string
		got  Cap
		want hkvm.Cap
	}{
		{"KVM_CAP_IRQFD", CapIRQFD, hkvm.CapIRQFD},
		{"KVM_CAP_IOEVENTFD", CapIOEventFD, hkvm.CapIOEventFD},
		{"KVM_CAP_MAX_VCPUS", CapMaxVCPUs, hkvm.CapMaxVCPUs},
		{"KVM_CAP_ARM_PSCI_0_2", CapARMPSCI02, hkvm.CapARMPSCI02},
		{"KVM_CAP_ARM_PMU_V3", CapARMPMUv3, hkvm.CapARMPMUv3},
		{"KVM_CAP_ARM_VM_IPA_SIZE", CapARMVMIPASize, hkvm.CapARMVMIPASize},
		{"KVM_CAP_BINARY_STATS_FD", CapBinaryStatsFD, hkvm.CapBinaryStatsFD},
	} {
		if int(tt.got) != int(tt.want) {
			t.Errorf("%s = %d, hype has %d", tt.name, tt.got, tt.want)
		}
	}
	if StableAPIVersion != hkvm.StableAPIVersion {
		t.Errorf("StableAPIVersion = %d, hype has %d", StableAPIVersion, hkvm.StableAPIVersion)
	}
}
