//go:build linux

package kvm

import (
	"os"

	hkvm "github.com/c35s/hype/kvm"
	"golang.org/x/sys/unix"
)

// The generic VM and vCPU ioctls, issued through hype's kvm package: this
// package is the only one in mvm that calls it, so the rest of mvm sees
// one KVM API whose file descriptors are plain *os.File.

// CreateVM issues KVM_CREATE_VM on the system fd with machine type 0 (the
// default IPA size, 40 bits on arm64; api.rst, KVM_CREATE_VM) and returns
// the VM's fd.
func CreateVM(sys *os.File) (*os.File, error) {
	vm, err := hkvm.CreateVM(sys)
	if err != nil {
		return nil, err
	}
	return vm.File, nil
}

// CreateVCPU issues KVM_CREATE_VCPU for vCPU id on the VM and returns the
// vCPU's fd. KVM binds the vCPU to the thread that first runs it.
func CreateVCPU(vm *os.File, id int) (*os.File, error) {
	v, err := hkvm.CreateVCPU(&hkvm.VM{File: vm}, id)
	if err != nil {
		return nil, err
	}
	return v.File, nil
}

// SetUserMemoryRegion makes size bytes of this process at userAddr the
// guest-physical range at guestAddr, in memory slot slot
// (KVM_SET_USER_MEMORY_REGION, struct kvm_userspace_memory_region).
func SetUserMemoryRegion(vm *os.File, slot uint32, guestAddr, size, userAddr uint64) error {
	r := hkvm.UserspaceMemoryRegion{Slot: slot, GuestPhysAddr: guestAddr, MemorySize: size, UserspaceAddr: userAddr}
	return hkvm.SetUserMemoryRegion(&hkvm.VM{File: vm}, &r)
}

// IRQFD makes a write to the eventfd fd inject interrupt gsi (api.rst,
// KVM_IRQFD; on arm64 the GSI of an SPI is its INTID - 32).
func IRQFD(vm *os.File, fd int, gsi uint32) error {
	cfg := hkvm.IRQFDConfig{Fd: uint32(fd), GSI: gsi}
	return hkvm.IRQFD(&hkvm.VM{File: vm}, &cfg)
}

// RunVCPU issues one KVM_RUN on the vCPU: it returns when the guest exits to
// userspace (the exit is in the vCPU's Run), or with EINTR when a signal
// arrives or kvm_run.immediate_exit is set.
func RunVCPU(vcpu *os.File) error {
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, vcpu.Fd(), ReqRun, 0)
	if errno != 0 {
		return errno
	}
	return nil
}
