//go:build linux

package kvm

import (
	"errors"
	"fmt"
	"os"

	hkvm "github.com/c35s/hype/kvm"
	"golang.org/x/sys/unix"
)

// DevicePath is where the KVM character device lives.
const DevicePath = "/dev/kvm"

// ErrNoKVM reports a host on which /dev/kvm cannot be used at all.
var ErrNoKVM = errors.New("KVM is not available")

// Open opens /dev/kvm and checks the API version. Its errors are one sentence
// saying what is wrong and what to do about it.
func Open() (*os.File, error) {
	f, err := os.OpenFile(DevicePath, os.O_RDWR|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("%w: %s does not exist (load the kvm module, or enable virtualization for this machine)", ErrNoKVM, DevicePath)
	case errors.Is(err, os.ErrPermission):
		return nil, fmt.Errorf("%w: no permission to open %s (run as root or join the group that owns it, usually kvm)", ErrNoKVM, DevicePath)
	case err != nil:
		return nil, fmt.Errorf("%w: open %s: %v", ErrNoKVM, DevicePath, err)
	}
	v, err := hkvm.GetAPIVersion(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: KVM_GET_API_VERSION: %v", ErrNoKVM, err)
	}
	if v != StableAPIVersion {
		f.Close()
		return nil, fmt.Errorf("%w: KVM API version %d, mvm needs %d", ErrNoKVM, v, StableAPIVersion)
	}
	return f, nil
}

// CheckExtension returns KVM_CHECK_EXTENSION's answer for cap on f (the
// system fd or a VM fd), 0 when the ioctl itself fails.
func CheckExtension(f interface{ Fd() uintptr }, c Cap) int {
	v, err := hkvm.CheckExtension(f, hkvm.Cap(c))
	if err != nil {
		return 0
	}
	return v
}

func ioctl(fd uintptr, req uintptr, arg uintptr) (uintptr, error) {
	r, _, errno := unix.Syscall(unix.SYS_IOCTL, fd, req, arg)
	if errno != 0 {
		return r, errno
	}
	return r, nil
}
