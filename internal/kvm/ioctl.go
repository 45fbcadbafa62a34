//go:build linux

package kvm

// Linux's _IOC encoding (include/uapi/asm-generic/ioctl.h), the same on amd64
// and arm64: dir<<30 | size<<16 | type<<8 | nr.
const (
	iocWrite = 1
	iocRead  = 2
	kvmIO    = 0xAE
)

// ioctl request numbers, from include/uapi/linux/kvm.h.
const (
	reqIRQLine         = iocWrite<<30 | 8<<16 | kvmIO<<8 | 0x61            // struct kvm_irq_level
	reqGetOneReg       = iocWrite<<30 | 16<<16 | kvmIO<<8 | 0xab           // struct kvm_one_reg
	reqSetOneReg       = iocWrite<<30 | 16<<16 | kvmIO<<8 | 0xac           // struct kvm_one_reg
	reqARMVCPUInit     = iocWrite<<30 | 32<<16 | kvmIO<<8 | 0xae           // struct kvm_vcpu_init
	reqARMPreferredTgt = iocRead<<30 | 32<<16 | kvmIO<<8 | 0xaf            // struct kvm_vcpu_init
	reqCreateDevice    = (iocRead|iocWrite)<<30 | 12<<16 | kvmIO<<8 | 0xe0 // struct kvm_create_device
	reqSetDeviceAttr   = iocWrite<<30 | 24<<16 | kvmIO<<8 | 0xe1           // struct kvm_device_attr
	reqHasDeviceAttr   = iocWrite<<30 | 24<<16 | kvmIO<<8 | 0xe3           // struct kvm_device_attr
	reqRun             = kvmIO<<8 | 0x80                                   // _IO(KVMIO, 0x80)
)

// RunRequests are the ioctl requests mvm issues on KVM fds after the VM is
// set up, while it runs and reboots: KVM_RUN, register access, vCPU resets
// (KVM_ARM_VCPU_INIT on CPU_ON and reboot), interrupt lines and device
// attributes. The seccomp allow-list admits these and no other KVM ioctl:
// a request added to the run path belongs here.
func RunRequests() []uint32 {
	return []uint32{reqRun, reqGetOneReg, reqSetOneReg, reqARMVCPUInit, reqIRQLine, reqSetDeviceAttr, reqHasDeviceAttr}
}
