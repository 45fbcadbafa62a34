package vmm

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// uintptrOf is the host address of a mapping's first byte, for memory slots.
func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }

// mincore reports which pages of m are resident (mincore(2)); x/sys/unix has
// no wrapper for it on every architecture.
func mincore(m []byte, vec []byte) error {
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		return errno
	}
	return nil
}
