package kvm

// KVM's userspace ABI numbers, each defined here once for all of mvm: the
// ioctl requests, exit reasons, system-event types and capabilities of
// include/uapi/linux/kvm.h, and the ONE_REG register ids (RegID) of
// arch/arm64/include/uapi/asm/kvm.h. The other arm64 numbers (vCPU
// features, vGIC and SMCCC-filter attributes) are in arm64.go. This file has no build constraint and
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

// RegID is a ONE_REG register id, the id field of struct kvm_one_reg that
// KVM_GET_ONE_REG and KVM_SET_ONE_REG take (Documentation/virt/kvm/api.rst,
// "KVM_SET_ONE_REG", the arm64 section). On arm64 it is KVM_REG_ARM64 |
// the size | a register group | the index within the group
// (arch/arm64/include/uapi/asm/kvm.h). Every id mvm uses is 64 bits wide.
type RegID uint64

// The fields of an arm64 RegID (include/uapi/linux/kvm.h and
// arch/arm64/include/uapi/asm/kvm.h).
const (
	regARM64   RegID = 0x6000_0000_0000_0000 // KVM_REG_ARM64
	regSizeU64 RegID = 0x0030_0000_0000_0000 // KVM_REG_SIZE_U64
	// KVM_REG_ARM_CORE and KVM_REG_ARM64_SYSREG, shifted by
	// KVM_REG_ARM_COPROC_SHIFT (16).
	regGroupCore   RegID = 0x0010 << 16
	regGroupSysreg RegID = 0x0013 << 16

	regCoreBase = regARM64 | regSizeU64 | regGroupCore
	regSysBase  = regARM64 | regSizeU64 | regGroupSysreg
)

// CoreReg is the id of the 64-bit core register at byte offset off in
// struct kvm_regs: KVM_REG_ARM_CORE_REG counts the offset in 32-bit words.
// struct kvm_regs starts with struct user_pt_regs {u64 regs[31]; u64 sp;
// u64 pc; u64 pstate}, then sp_el1.
func CoreReg(off uint64) RegID { return regCoreBase | RegID(off/4) }

// SysReg is the id of system register S<op0>_<op1>_C<crn>_C<crm>_<op2>
// (ARM64_SYS_REG: op0<<14 | op1<<11 | CRn<<7 | CRm<<3 | op2, the encoding
// of its MRS/MSR instruction, DDI 0487 D23).
func SysReg(op0, op1, crn, crm, op2 uint8) RegID {
	return regSysBase | RegID(op0&3)<<14 | RegID(op1&7)<<11 | RegID(crn&15)<<7 | RegID(crm&15)<<3 | RegID(op2&7)
}

// RegX is the id of general-purpose register Xn (0..30).
func RegX(n int) RegID { return CoreReg(8 * uint64(n)) }

// The registers mvm reads and writes. Written out as constants (CoreReg
// and SysReg give the same values, TestRegIDs checks) so a register
// access on the exit path computes nothing.
const (
	RegSP     = regCoreBase | 31*8/4 // user_pt_regs.sp
	RegPC     = regCoreBase | 32*8/4 // user_pt_regs.pc
	RegPSTATE = regCoreBase | 33*8/4 // user_pt_regs.pstate
	RegSPEL1  = regCoreBase | 34*8/4 // kvm_regs.sp_el1

	RegMPIDREL1  = regSysBase | 3<<14 | 0<<11 | 0<<7 | 0<<3 | 5  // S3_0_C0_C0_5
	RegSCTLREL1  = regSysBase | 3<<14 | 0<<11 | 1<<7 | 0<<3 | 0  // S3_0_C1_C0_0
	RegELREL1    = regSysBase | 3<<14 | 0<<11 | 4<<7 | 0<<3 | 1  // S3_0_C4_C0_1
	RegESREL1    = regSysBase | 3<<14 | 0<<11 | 5<<7 | 2<<3 | 0  // S3_0_C5_C2_0
	RegFAREL1    = regSysBase | 3<<14 | 0<<11 | 6<<7 | 0<<3 | 0  // S3_0_C6_C0_0
	RegVBAREL1   = regSysBase | 3<<14 | 0<<11 | 12<<7 | 0<<3 | 0 // S3_0_C12_C0_0
	RegCNTVCTEL0 = regSysBase | 3<<14 | 3<<11 | 14<<7 | 0<<3 | 2 // S3_3_C14_C0_2
)

// Cap is a KVM_CHECK_EXTENSION capability number (KVM_CAP_*,
// include/uapi/linux/kvm.h).
type Cap int

// The capabilities mvm asks about.
const (
	CapIRQFD         Cap = 32  // KVM_CAP_IRQFD
	CapIOEventFD     Cap = 36  // KVM_CAP_IOEVENTFD
	CapMaxVCPUs      Cap = 66  // KVM_CAP_MAX_VCPUS
	CapARMPSCI02     Cap = 102 // KVM_CAP_ARM_PSCI_0_2
	CapARMPMUv3      Cap = 126 // KVM_CAP_ARM_PMU_V3
	CapARMVMIPASize  Cap = 165 // KVM_CAP_ARM_VM_IPA_SIZE
	CapBinaryStatsFD Cap = 203 // KVM_CAP_BINARY_STATS_FD
)

// StableAPIVersion is what KVM_GET_API_VERSION returns on every kernel
// with the stable API (KVM_API_VERSION, include/uapi/linux/kvm.h; api.rst
// 4.1: "applications should refuse to run if [it] returns a value other
// than 12").
const StableAPIVersion = 12
