package kvm

// KVM's userspace ABI numbers, each defined here once for all of mvm: the
// ioctl requests, exit reasons and system-event types of
// include/uapi/linux/kvm.h. The arm64 ones (ONE_REG ids, vCPU features,
// vGIC and SMCCC-filter attributes) are in arm64.go, from
// arch/arm64/include/uapi/asm/kvm.h. This file has no build constraint and
// issues no ioctl, so packages that only name exits (exits/userspace) or match
// syscall arguments (internal/kvmproc) import the numbers without issuing
// an ioctl.

// Linux's _IOC encoding (include/uapi/asm-generic/ioctl.h), the same on amd64
// and arm64: dir<<30 | size<<16 | type<<8 | nr.
const (
	iocWrite = 1
	iocRead  = 2
	kvmIO    = 0xAE // KVMIO
)

// ioctl request numbers (include/uapi/linux/kvm.h). _IO requests carry no
// size or direction bits, so ReqRun and ReqGetStatsFD are the same number
// on every architecture.
const (
	ReqRun        = kvmIO<<8 | 0x80 // KVM_RUN, _IO(KVMIO, 0x80)
	ReqGetStatsFD = kvmIO<<8 | 0xce // KVM_GET_STATS_FD, _IO(KVMIO, 0xce)

	reqIRQLine         = iocWrite<<30 | 8<<16 | kvmIO<<8 | 0x61            // KVM_IRQ_LINE, struct kvm_irq_level
	reqIOEventFD       = iocWrite<<30 | 64<<16 | kvmIO<<8 | 0x79           // KVM_IOEVENTFD, struct kvm_ioeventfd
	reqGetOneReg       = iocWrite<<30 | 16<<16 | kvmIO<<8 | 0xab           // KVM_GET_ONE_REG, struct kvm_one_reg
	reqSetOneReg       = iocWrite<<30 | 16<<16 | kvmIO<<8 | 0xac           // KVM_SET_ONE_REG, struct kvm_one_reg
	reqARMVCPUInit     = iocWrite<<30 | 32<<16 | kvmIO<<8 | 0xae           // KVM_ARM_VCPU_INIT, struct kvm_vcpu_init
	reqARMPreferredTgt = iocRead<<30 | 32<<16 | kvmIO<<8 | 0xaf            // KVM_ARM_PREFERRED_TARGET, struct kvm_vcpu_init
	reqCreateDevice    = (iocRead|iocWrite)<<30 | 12<<16 | kvmIO<<8 | 0xe0 // KVM_CREATE_DEVICE, struct kvm_create_device
	reqSetDeviceAttr   = iocWrite<<30 | 24<<16 | kvmIO<<8 | 0xe1           // KVM_SET_DEVICE_ATTR, struct kvm_device_attr
	reqHasDeviceAttr   = iocWrite<<30 | 24<<16 | kvmIO<<8 | 0xe3           // KVM_HAS_DEVICE_ATTR, struct kvm_device_attr
)

// Exit reasons: kvm_run.exit_reason, KVM_EXIT_*.
const (
	ExitUnknown       = 0
	ExitException     = 1
	ExitIO            = 2
	ExitHypercall     = 3
	ExitDebug         = 4
	ExitHLT           = 5
	ExitMMIO          = 6
	ExitShutdown      = 8
	ExitFailEntry     = 9
	ExitIntr          = 10
	ExitInternalError = 17
	ExitSystemEvent   = 24
	ExitARMNISV       = 28
)

// System event types: kvm_run.system_event.type, KVM_SYSTEM_EVENT_*.
const (
	SystemEventShutdown = 1
	SystemEventReset    = 2
	SystemEventCrash    = 3
	SystemEventWakeup   = 4
	SystemEventSuspend  = 5
	SystemEventSEVTerm  = 6
	SystemEventTDXFatal = 7
)

// RunRequests are the ioctl requests mvm issues on KVM fds after the VM is
// set up, while it runs and reboots: KVM_RUN, register access, vCPU resets
// (KVM_ARM_VCPU_INIT on CPU_ON and reboot), interrupt lines and device
// attributes. The seccomp allow-list admits these and no other KVM ioctl:
// a request added to the run path belongs here.
func RunRequests() []uint32 {
	return []uint32{ReqRun, reqGetOneReg, reqSetOneReg, reqARMVCPUInit, reqIRQLine, reqSetDeviceAttr, reqHasDeviceAttr}
}
