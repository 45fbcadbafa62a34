package kvm

import "testing"

// The request numbers as the kernel spells them: the values the _IO/_IOW/
// _IOR/_IOWR macros of include/uapi/asm-generic/ioctl.h give for the
// definitions in include/uapi/linux/kvm.h (strace prints the same numbers),
// so a slip in a size or direction bit shows here, not as ENOTTY in the lab.
func TestRequestNumbers(t *testing.T) {
	for _, tt := range []struct {
		name      string
		got, want uint32
	}{
		{"KVM_RUN", ReqRun, 0xae80},
		{"KVM_GET_STATS_FD", ReqGetStatsFD, 0xaece},
		{"KVM_IRQ_LINE", reqIRQLine, 0x4008ae61},
		{"KVM_IOEVENTFD", reqIOEventFD, 0x4040ae79},
		{"KVM_GET_ONE_REG", reqGetOneReg, 0x4010aeab},
		{"KVM_SET_ONE_REG", reqSetOneReg, 0x4010aeac},
		{"KVM_ARM_VCPU_INIT", reqARMVCPUInit, 0x4020aeae},
		{"KVM_ARM_PREFERRED_TARGET", reqARMPreferredTgt, 0x8020aeaf},
		{"KVM_CREATE_DEVICE", reqCreateDevice, 0xc00caee0},
		{"KVM_SET_DEVICE_ATTR", reqSetDeviceAttr, 0x4018aee1},
		{"KVM_HAS_DEVICE_ATTR", reqHasDeviceAttr, 0x4018aee3},
	} {
		if tt.got != tt.want {
			t.Errorf("%s = %#x, want %#x", tt.name, tt.got, tt.want)
		}
	}
}
