//go:build linux

package kvm

import (
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestOneRegOwnErrno: the raw-call register accessors return the ioctl's
// errno as their error, as GetOneReg and SetOneReg do, and a failed read
// returns 0. No KVM needed: a KVM ioctl on /dev/null fails with ENOTTY, on
// a number no fd has (above any RLIMIT_NOFILE) with EBADF. (On a real
// vCPU, BenchmarkVCPUOps in vmm first checks that a system register KVM
// does not expose gives ENOENT.)
func TestOneRegOwnErrno(t *testing.T) {
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, c := range []struct {
		name string
		fd   uintptr
		want unix.Errno
	}{{"/dev/null", f.Fd(), unix.ENOTTY}, {"no open fd", 1 << 30, unix.EBADF}} {
		v, err := GetOneRegOwn(c.fd, RegPC)
		if !errors.Is(err, c.want) || v != 0 {
			t.Errorf("GetOneRegOwn on %s = %#x, %v; want 0, %v", c.name, v, err, c.want)
		}
		if err := SetOneRegOwn(c.fd, RegPC, 0x4000_0000); !errors.Is(err, c.want) {
			t.Errorf("SetOneRegOwn on %s = %v; want %v", c.name, err, c.want)
		}
	}
	// The ordinary accessor fails the same way, so a caller may use
	// either.
	if _, err := GetOneReg(f, RegPC); !errors.Is(err, unix.ENOTTY) {
		t.Errorf("GetOneReg on /dev/null = %v; want ENOTTY", err)
	}
}
