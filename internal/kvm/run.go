//go:build linux

package kvm

import (
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	hkvm "github.com/c35s/hype/kvm"
	"golang.org/x/sys/unix"
)

// Offsets into struct kvm_run: the fixed header is 32 bytes on every
// architecture, then the exit union.
const (
	runImmediateExit = 1
	runExitReason    = 8
	runUnion         = 32
)

// Run is a vCPU's mmap'd struct kvm_run. It is read and written by the
// thread that runs the vCPU, except ImmediateExit, which a kicker sets.
type Run struct {
	mem []byte
}

// MapRun maps the kvm_run structure of a vCPU.
func MapRun(sys *os.File, vcpu *os.File) (*Run, error) {
	size, err := hkvm.GetVCPUMmapSize(sys)
	if err != nil {
		return nil, fmt.Errorf("KVM_GET_VCPU_MMAP_SIZE: %w", err)
	}
	mem, err := unix.Mmap(int(vcpu.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap kvm_run: %w", err)
	}
	return &Run{mem: mem}, nil
}

// Unmap releases the mapping.
func (r *Run) Unmap() error {
	if r.mem == nil {
		return nil
	}
	err := unix.Munmap(r.mem)
	r.mem = nil
	return err
}

func (r *Run) u8(off int) *uint8   { return (*uint8)(unsafe.Pointer(&r.mem[off])) }
func (r *Run) u32(off int) *uint32 { return (*uint32)(unsafe.Pointer(&r.mem[off])) }
func (r *Run) u64(off int) *uint64 { return (*uint64)(unsafe.Pointer(&r.mem[off])) }

// SetImmediateExit sets kvm_run.immediate_exit: KVM_RUN then returns EINTR at
// once instead of entering the guest. Safe to call from another thread.
func (r *Run) SetImmediateExit(v bool) {
	// immediate_exit is byte 1 of the first word; byte 0
	// (request_interrupt_window) and bytes 2-3 (padding) are unused on
	// arm64, so one atomic store of the whole word sets it without
	// tearing or reordering against the kicker's signal.
	var w uint32
	if v {
		w = 1 << (8 * runImmediateExit)
	}
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&r.mem[0])), w)
}

// ExitReason is kvm_run.exit_reason.
func (r *Run) ExitReason() uint32 { return *r.u32(runExitReason) }

// MMIO returns the mmio exit: guest-physical address, the data buffer (len
// bytes, to fill for a read) and whether it is a write.
func (r *Run) MMIO() (addr uint64, data []byte, write bool) {
	addr = *r.u64(runUnion)
	n := *r.u32(runUnion + 16)
	if n > 8 {
		n = 8
	}
	return addr, r.mem[runUnion+8 : runUnion+8+int(n)], *r.u8(runUnion + 20) != 0
}

// Hypercall returns the hypercall exit's function id (nr) and flags.
func (r *Run) Hypercall() (nr uint64, flags uint64) {
	return *r.u64(runUnion), *r.u64(runUnion + 64)
}

// SystemEvent returns the system event exit's type and copies its data
// words (at most 16, kvm_run.system_event.ndata) into data, returning how
// many.
func (r *Run) SystemEvent(data *[16]uint64) (typ uint32, n int) {
	typ = *r.u32(runUnion)
	n = int(min(*r.u32(runUnion + 4), uint32(len(data))))
	for i := range n {
		data[i] = *r.u64(runUnion + 8 + 8*i)
	}
	return typ, n
}

// FailEntry returns hardware_entry_failure_reason and the physical CPU.
func (r *Run) FailEntry() (reason uint64, cpu uint32) {
	return *r.u64(runUnion), *r.u32(runUnion + 8)
}

// InternalError returns the suberror and copies its data words into data,
// returning how many.
func (r *Run) InternalError(data *[16]uint64) (suberror uint32, n int) {
	return r.SystemEvent(data) // same layout: u32, u32 ndata, u64 data[16]
}
