//go:build linux

package kvm

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// GetStatsFD issues KVM_GET_STATS_FD (Documentation/virt/kvm/api.rst, KVM_GET_STATS_FD) on a VM or vCPU file
// descriptor and returns the binary stats file, which exits/kvmstat
// parses. The file is read with pread (os.File.ReadAt); the kernel creates
// it close-on-exec.
func GetStatsFD(fd uintptr) (*os.File, error) {
	r, err := ioctl(fd, ReqGetStatsFD, 0)
	if err != nil {
		if errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.EINVAL) {
			return nil, fmt.Errorf("KVM_GET_STATS_FD on fd %d: %w (kernel without binary stats, Linux < 5.14?)", fd, err)
		}
		return nil, fmt.Errorf("KVM_GET_STATS_FD on fd %d: %w", fd, err)
	}
	return os.NewFile(r, fmt.Sprintf("kvm-stats-%d", fd)), nil
}
