//go:build linux

package kvm

import (
	"os"
	"unsafe"
)

// Device types for KVM_CREATE_DEVICE (enum kvm_device_type).
const (
	DevTypeARMVGICv2 = 5
	DevTypeARMVGICv3 = 7
)

// createDevice mirrors struct kvm_create_device.
type createDevice struct {
	Type  uint32
	Fd    uint32
	Flags uint32
}

// DeviceAttr mirrors struct kvm_device_attr.
type DeviceAttr struct {
	Flags uint32
	Group uint32
	Attr  uint64
	Addr  uint64 // userspace address of the value
}

// KVM_CREATE_DEVICE_TEST: only test whether the device type is supported.
const createDeviceTest = 1

// CreateDevice creates an in-kernel device of type typ on the VM and returns
// its fd.
func CreateDevice(vm *os.File, typ uint32) (*os.File, error) {
	cd := createDevice{Type: typ}
	if _, err := ioctl(vm.Fd(), reqCreateDevice, uintptr(unsafe.Pointer(&cd))); err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(cd.Fd), "kvm-device"), nil
}

// CanCreateDevice asks KVM whether CreateDevice(vm, typ) would succeed.
func CanCreateDevice(vm *os.File, typ uint32) bool {
	cd := createDevice{Type: typ, Flags: createDeviceTest}
	_, err := ioctl(vm.Fd(), reqCreateDevice, uintptr(unsafe.Pointer(&cd)))
	return err == nil
}

// SetDeviceAttr issues KVM_SET_DEVICE_ATTR on a device or VM fd. val points
// at the attribute's value (nil for attributes without one).
func SetDeviceAttr(f *os.File, group uint32, attr uint64, val unsafe.Pointer) error {
	a := DeviceAttr{Group: group, Attr: attr, Addr: uint64(uintptr(val))}
	_, err := ioctl(f.Fd(), reqSetDeviceAttr, uintptr(unsafe.Pointer(&a)))
	return err
}

// HasDeviceAttr reports whether KVM_HAS_DEVICE_ATTR accepts group/attr.
func HasDeviceAttr(f *os.File, group uint32, attr uint64) bool {
	a := DeviceAttr{Group: group, Attr: attr}
	_, err := ioctl(f.Fd(), reqHasDeviceAttr, uintptr(unsafe.Pointer(&a)))
	return err == nil
}

// IRQ line types for KVM_IRQ_LINE on arm64 (api.rst, KVM_IRQ_LINE):
// irq = type<<24 | vcpu_index<<16 | number.
const (
	IRQTypeCPU = 0
	IRQTypeSPI = 1
	IRQTypePPI = 2
)

// IRQLine raises (level true) or lowers an interrupt line: for an SPI, intid
// is the GIC INTID (32..1019).
func IRQLine(vm *os.File, typ, vcpu, intid uint32, level bool) error {
	v := struct{ IRQ, Level uint32 }{IRQ: typ<<24 | (vcpu&0xff)<<16 | intid&0xffff}
	if level {
		v.Level = 1
	}
	_, err := ioctl(vm.Fd(), reqIRQLine, uintptr(unsafe.Pointer(&v)))
	return err
}
