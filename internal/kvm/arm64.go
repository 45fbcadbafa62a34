//go:build linux

package kvm

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// VCPUInit mirrors struct kvm_vcpu_init (arch/arm64/include/uapi/asm/kvm.h).
type VCPUInit struct {
	Target   uint32
	Features [7]uint32
}

// Feature bits of VCPUInit.Features[0].
const (
	FeaturePowerOff = 0 // KVM_ARM_VCPU_POWER_OFF: start in the powered-off state
	FeaturePSCI02   = 2 // KVM_ARM_VCPU_PSCI_0_2: in-kernel PSCI v0.2+
	FeaturePMUv3    = 3 // KVM_ARM_VCPU_PMU_V3: a PMUv3 emulated with the host's perf
)

// The PMU's vCPU device attributes (Documentation/virt/kvm/devices/vcpu.rst,
// section 1): set IRQ, then INIT, on every vCPU created with FeaturePMUv3,
// after the in-kernel vGIC is initialised and before the vCPU first runs
// (KVM_RUN fails with EINVAL on a vCPU whose PMU was not initialised).
const (
	VCPUGroupPMUv3Ctrl = 0 // KVM_ARM_VCPU_PMU_V3_CTRL
	PMUv3AttrIRQ       = 0 // KVM_ARM_VCPU_PMU_V3_IRQ: the overflow interrupt's INTID
	PMUv3AttrInit      = 1 // KVM_ARM_VCPU_PMU_V3_INIT
)

// SetPMUIRQ gives the vCPU's PMU its overflow interrupt: a PPI INTID, the
// same on every vCPU (vcpu.rst 1.1). KVM reads it as an int.
func SetPMUIRQ(vcpu *os.File, intid int32) error {
	return SetDeviceAttr(vcpu, VCPUGroupPMUv3Ctrl, PMUv3AttrIRQ, unsafe.Pointer(&intid))
}

// InitPMU initialises the vCPU's PMU (vcpu.rst 1.2); a second call fails
// with EBUSY. The PMU stays initialised across later KVM_ARM_VCPU_INITs
// of the vCPU, which reset its registers only.
func InitPMU(vcpu *os.File) error {
	return SetDeviceAttr(vcpu, VCPUGroupPMUv3Ctrl, PMUv3AttrInit, nil)
}

// PreferredTarget fills a VCPUInit with the host's preferred target
// (KVM_ARM_PREFERRED_TARGET on the VM fd).
func PreferredTarget(vm *os.File) (VCPUInit, error) {
	var vi VCPUInit
	_, err := ioctl(vm.Fd(), reqARMPreferredTgt, uintptr(unsafe.Pointer(&vi)))
	return vi, err
}

// InitVCPU issues KVM_ARM_VCPU_INIT, which also resets a vCPU that has run
// before to its architectural reset state.
func InitVCPU(vcpu *os.File, vi *VCPUInit) error {
	_, err := ioctl(vcpu.Fd(), reqARMVCPUInit, uintptr(unsafe.Pointer(vi)))
	return err
}

// oneReg mirrors struct kvm_one_reg.
type oneReg struct {
	ID   uint64
	Addr uint64
}

// GetOneReg reads the 64-bit register id of a vCPU (KVM_GET_ONE_REG).
func GetOneReg(vcpu *os.File, id RegID) (uint64, error) {
	var v uint64
	r := oneReg{ID: uint64(id), Addr: uint64(uintptr(unsafe.Pointer(&v)))}
	_, err := ioctl(vcpu.Fd(), reqGetOneReg, uintptr(unsafe.Pointer(&r)))
	return v, err
}

// SetOneReg writes the 64-bit register id of a vCPU (KVM_SET_ONE_REG).
func SetOneReg(vcpu *os.File, id RegID, v uint64) error {
	r := oneReg{ID: uint64(id), Addr: uint64(uintptr(unsafe.Pointer(&v)))}
	_, err := ioctl(vcpu.Fd(), reqSetOneReg, uintptr(unsafe.Pointer(&r)))
	return err
}

// GetOneRegOwn is GetOneReg for the vCPU's own thread (the one that runs
// its KVM_RUN), with the vCPU fd as a number, made as a raw system call:
// no entersyscall/exitsyscall in the Go runtime around it. That is right
// only for a call that cannot block: KVM_GET_ONE_REG takes the vCPU's
// mutex, which on the vCPU's own thread no other ioctl holds (mvm makes
// every vCPU ioctl there), and copies one register (virt/kvm/kvm_main.c,
// kvm_vcpu_ioctl). A raw call keeps its P, so one that blocked would
// stall the garbage collector's stop-the-world (under mvm's
// asyncpreemptoff=1 nothing would interrupt it): KVM_RUN never goes this
// way. On the CPU_ON path (the caller's X1-X3, the target's PC) the
// runtime's transitions are a measurable share of each call.
func GetOneRegOwn(fd uintptr, id RegID) (uint64, error) {
	var v uint64
	r := oneReg{ID: uint64(id), Addr: uint64(uintptr(unsafe.Pointer(&v)))}
	if _, _, errno := unix.RawSyscall(unix.SYS_IOCTL, fd, reqGetOneReg, uintptr(unsafe.Pointer(&r))); errno != 0 {
		return 0, errno
	}
	return v, nil
}

// SetOneRegOwn is SetOneReg for the vCPU's own thread, as a raw system
// call: GetOneRegOwn says when that is right.
func SetOneRegOwn(fd uintptr, id RegID, v uint64) error {
	r := oneReg{ID: uint64(id), Addr: uint64(uintptr(unsafe.Pointer(&v)))}
	if _, _, errno := unix.RawSyscall(unix.SYS_IOCTL, fd, reqSetOneReg, uintptr(unsafe.Pointer(&r))); errno != 0 {
		return errno
	}
	return nil
}

// PSTATE for entering a guest kernel: EL1h with D, A, I and F masked
// (Documentation/arch/arm64/booting.rst).
const PSTATEBoot = 0x3c5

// vGIC device attribute groups and attributes
// (Documentation/virt/kvm/devices/arm-vgic-v3.rst).
const (
	VGICGroupAddr  = 0
	VGICGroupNrIRQ = 3
	VGICGroupCtrl  = 4

	VGICv3AddrDist   = 2 // KVM_VGIC_V3_ADDR_TYPE_DIST
	VGICv3AddrRedist = 3 // KVM_VGIC_V3_ADDR_TYPE_REDIST
	VGICCtrlInit     = 0 // KVM_DEV_ARM_VGIC_CTRL_INIT
)

// SMCCC filter (Documentation/virt/kvm/devices/vm.rst, KVM_ARM_VM_SMCCC_CTRL;
// Linux 6.4+).
const (
	VMGroupSMCCCCtrl   = 0
	VMAttrSMCCCFilter  = 0
	SMCCCActionHandle  = 0
	SMCCCActionDeny    = 1
	SMCCCActionForward = 2 // KVM_SMCCC_FILTER_FWD_TO_USER
)

// SMCCCFilter mirrors struct kvm_smccc_filter.
type SMCCCFilter struct {
	Base        uint32
	NrFunctions uint32
	Action      uint8
	_           [15]uint8
}

// HasSMCCCFilter reports whether the VM accepts an SMCCC filter.
func HasSMCCCFilter(vm *os.File) bool {
	return HasDeviceAttr(vm, VMGroupSMCCCCtrl, VMAttrSMCCCFilter)
}

// SetSMCCCFilter installs one filter range on the VM; it must happen before
// any vCPU has run (EBUSY after).
func SetSMCCCFilter(vm *os.File, f SMCCCFilter) error {
	return SetDeviceAttr(vm, VMGroupSMCCCCtrl, VMAttrSMCCCFilter, unsafe.Pointer(&f))
}

// HypercallExitSMC is KVM_HYPERCALL_EXIT_SMC, bit 0 of kvm_run.hypercall.flags
// (arch/arm64/include/uapi/asm/kvm.h): the forwarded call was an SMC, not
// an HVC.
const HypercallExitSMC = 1 << 0
