//go:build linux

package kvmstat

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/mvm-dev/mvm/internal/kvm"
)

// GetStatsFD issues KVM_GET_STATS_FD on a VM or vCPU file descriptor and
// returns the stats file. The file is read with pread (os.File.ReadAt);
// the kernel creates it close-on-exec.
func GetStatsFD(fd uintptr) (*os.File, error) {
	r, _, errno := unix.Syscall(unix.SYS_IOCTL, fd, kvm.ReqGetStatsFD, 0)
	if errno != 0 {
		if errors.Is(errno, unix.ENOTTY) || errors.Is(errno, unix.EINVAL) {
			return nil, fmt.Errorf("KVM_GET_STATS_FD on fd %d: %w (kernel without binary stats, Linux < 5.14?)", fd, errno)
		}
		return nil, fmt.Errorf("KVM_GET_STATS_FD on fd %d: %w", fd, errno)
	}
	return os.NewFile(r, fmt.Sprintf("kvm-stats-%d", fd)), nil
}

// File is an open stats file with its descriptors parsed.
type File struct {
	f *os.File
	// Layout holds the header, id and descriptors, read once.
	Layout *StatsLayout
}

// Open gets the stats file of a VM or vCPU fd and parses its descriptors.
func Open(fd uintptr) (*File, error) {
	f, err := GetStatsFD(fd)
	if err != nil {
		return nil, err
	}
	l, err := ParseStats(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("parse stats of fd %d: %w", fd, err)
	}
	return &File{f: f, Layout: l}, nil
}

// FromFile takes an already open stats file — such as another VMM's,
// copied with pidfd_getfd, since KVM answers KVM_GET_STATS_FD only to the
// VM's creator — and parses its descriptors. The File owns f from then on
// (on error f is closed).
func FromFile(f *os.File) (*File, error) {
	l, err := ParseStats(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("parse stats file %s: %w", f.Name(), err)
	}
	return &File{f: f, Layout: l}, nil
}

// Snapshot reads the current values (one pread of the data block).
func (s *File) Snapshot() (*StatsSnapshot, error) {
	snap, err := s.Layout.Read(s.f)
	if err != nil {
		return nil, fmt.Errorf("read stats %s: %w", s.Layout.ID, err)
	}
	return snap, nil
}

// Close closes the stats file.
func (s *File) Close() error {
	if err := s.f.Close(); err != nil {
		return fmt.Errorf("close stats %s: %w", s.Layout.ID, err)
	}
	return nil
}
