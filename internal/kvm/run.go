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
	// reason and mmio point into mem at exit_reason and the mmio member
	// of the exit union, set once at MapRun: ExitReason and MMIO are
	// read on every MMIO exit, and a typed pointer spares each read the
	// slice's bounds checks.
	reason *uint32
	mmio   *runMMIO
}

// runMMIO is kvm_run's mmio exit (include/uapi/linux/kvm.h: __u64
// phys_addr; __u8 data[8]; __u32 len; __u8 is_write).
type runMMIO struct {
	physAddr uint64
	data     [8]byte
	len      uint32
	isWrite  uint8
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
	r, err := newRun(mem)
	if err != nil {
		unix.Munmap(mem)
		return nil, err
	}
	return r, nil
}

// newRun wraps mem, a struct kvm_run (KVM_GET_VCPU_MMAP_SIZE bytes, a page
// or more).
func newRun(mem []byte) (*Run, error) {
	if len(mem) < runUnion+int(unsafe.Sizeof(runMMIO{})) {
		return nil, fmt.Errorf("mmap kvm_run: %d bytes, too small for struct kvm_run", len(mem))
	}
	return &Run{mem: mem, reason: (*uint32)(unsafe.Pointer(&mem[runExitReason])),
		mmio: (*runMMIO)(unsafe.Pointer(&mem[runUnion]))}, nil
}

// Unmap releases the mapping.
func (r *Run) Unmap() error {
	if r.mem == nil {
		return nil
	}
	err := unix.Munmap(r.mem)
	r.mem, r.reason, r.mmio = nil, nil, nil
	return err
}

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
func (r *Run) ExitReason() uint32 { return *r.reason }

// MMIO returns the mmio exit: guest-physical address, the data buffer (len
// bytes, to fill for a read) and whether it is a write.
func (r *Run) MMIO() (addr uint64, data []byte, write bool) {
	m := r.mmio
	return m.physAddr, m.data[:min(m.len, uint32(len(m.data)))], m.isWrite != 0
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
