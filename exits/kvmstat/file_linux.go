//go:build linux

package kvmstat

import (
	"fmt"
	"os"

	"github.com/mvm-dev/mvm/internal/kvm"
)

// File is an open stats file with its descriptors parsed.
type File struct {
	f *os.File
	// Layout holds the header, id and descriptors, read once.
	Layout *StatsLayout
}

// Open gets the stats file of a VM or vCPU fd and parses its descriptors.
func Open(fd uintptr) (*File, error) {
	f, err := kvm.GetStatsFD(fd)
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
