//go:build linux

package kvm

import (
	"unsafe"
)

// ioeventfd mirrors struct kvm_ioeventfd (include/uapi/linux/kvm.h).
type ioeventfd struct {
	Datamatch uint64
	Addr      uint64
	Len       uint32
	Fd        int32
	Flags     uint32
	_         [36]uint8
}

// KVM_IOEVENTFD_FLAG_DATAMATCH (api.rst 4.59): the eventfd fires only for
// a write of exactly Datamatch. (There is no PIO on arm64.)
const ioeventfdFlagDatamatch = 1 << 0

// IOEventFD makes a guest write of len bytes (4 for a virtio-mmio
// register) with value match at the MMIO address addr signal the eventfd
// fd inside KVM, without an exit to userspace (api.rst, KVM_IOEVENTFD).
// Writes of other values still exit to userspace.
func IOEventFD(vm uintptr, addr uint64, length uint32, match uint64, fd int) error {
	e := ioeventfd{Datamatch: match, Addr: addr, Len: length, Fd: int32(fd), Flags: ioeventfdFlagDatamatch}
	_, err := ioctl(vm, reqIOEventFD, uintptr(unsafe.Pointer(&e)))
	return err
}
