//go:build linux

package vcpu

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mvm-dev/mvm/internal/kvm"
)

// This file is the part of a vCPU that needs no KVM: the exit record the
// run loop decodes from kvm_run, the Action a Handler answers with, the
// loop's own decision about exits no Handler sees, and the vCPU's
// lifecycle. Tests feed them synthetic exits on any Linux host.

// Exit is one KVM_RUN return, decoded from kvm_run (api.rst, "The kvm_run
// structure") and, for an SMCCC call, the argument registers mvm reads.
// Only the member for Reason is filled; the run loop reuses one Exit.
type Exit struct {
	// Reason is kvm_run.exit_reason (kvm.Exit*); kvm.ExitIntr also for a
	// KVM_RUN that returned EINTR or EAGAIN.
	Reason uint32
	// Errno is KVM_RUN's error other than EINTR and EAGAIN (0: none);
	// Reason is meaningless then.
	Errno unix.Errno
	// At is when KVM_RUN returned; set for a hypercall (a CPU_ON's
	// start is timed from it).
	At time.Time

	MMIO        MMIOExit
	Hypercall   HypercallExit
	SystemEvent SystemEventExit
	FailEntry   FailEntryExit
	Internal    InternalExit
}

// MMIOExit is KVM_EXIT_MMIO: a guest access to an address no memory slot
// and no in-kernel device covers.
type MMIOExit struct {
	Addr uint64
	// Data holds the Len bytes written, or receives the bytes a read
	// returns: in the run loop it is kvm_run.mmio.data itself, which KVM
	// copies into the guest's register on the next KVM_RUN (api.rst,
	// KVM_EXIT_MMIO), so filling it completes the read.
	Data  []byte
	Write bool
}

// HypercallExit is KVM_EXIT_HYPERCALL on arm64: an SMCCC call the SMCCC
// filter forwards to userspace (api.rst, KVM_ARM_VM_SMCCC_CTRL).
type HypercallExit struct {
	// FID is the SMCCC function ID (W0; kvm_run.hypercall.nr).
	FID uint32
	// SMC: the call was an SMC, not an HVC (KVM_HYPERCALL_EXIT_SMC).
	SMC bool
	// Args are X1..X3 for a function in the PSCI ranges, as many as
	// psci.Args says it takes (the rest zero); zero for other calls,
	// for which mvm reads no register.
	Args [3]uint64
}

// SystemEventExit is KVM_EXIT_SYSTEM_EVENT: KVM's own PSCI reporting
// SYSTEM_OFF or SYSTEM_RESET, a guest's crash report, a wake-up or
// suspend.
type SystemEventExit struct {
	Type  uint32 // kvm.SystemEvent*
	NData int
	Data  [16]uint64
}

// FailEntryExit is KVM_EXIT_FAIL_ENTRY.
type FailEntryExit struct {
	Reason uint64 // hardware_entry_failure_reason
	CPU    uint32 // the host CPU
}

// InternalExit is KVM_EXIT_INTERNAL_ERROR.
type InternalExit struct {
	Suberror uint32
	NData    int
	Data     [16]uint64
}

// Next tells the run loop what to do after an exit was handled.
type Next int

const (
	// Continue re-enters the guest.
	Continue Next = iota
	// PowerOff parks the vCPU in userspace until the next PowerOn.
	PowerOff
	// Halt ends this vCPU's loop (the VM is stopping).
	Halt
)

func (n Next) String() string {
	switch n {
	case Continue:
		return "continue"
	case PowerOff:
		return "power-off"
	case Halt:
		return "halt"
	}
	return fmt.Sprintf("Next(%d)", int(n))
}

// Action is a Handler's answer to an exit: what the run loop does next.
// A read's data is not here: the Handler writes it into Exit.MMIO.Data.
type Action struct {
	Next Next
	// Key classifies the exit for accounting; Exited receives it as
	// sub. -1: none (the exit counts under its kind's bare key).
	Key int
	// SetX0: write X0 before re-entering the guest (an SMCCC call's
	// return value; SMCCC returns in X0, and PSCI leaves X1-X3 to the
	// caller's expectations, so they are not written).
	SetX0 bool
	X0    uint64
}

// loopStep is the run loop's own decision about an exit.
type loopStep uint8

const (
	// stepHandle: the Handler answers it (MMIO, hypercall, system event).
	stepHandle loopStep = iota
	// stepReenter: an interrupted KVM_RUN (a kick, immediate_exit):
	// re-enter the guest.
	stepReenter
	// stepFault: stop the vCPU with a FaultError (faultText).
	stepFault
)

// decide is the run loop's decision about e before any Handler sees it.
func decide(e *Exit) loopStep {
	if e.Errno != 0 {
		return stepFault
	}
	switch e.Reason {
	case kvm.ExitMMIO, kvm.ExitHypercall, kvm.ExitSystemEvent:
		return stepHandle
	case kvm.ExitIntr:
		return stepReenter
	}
	return stepFault
}

// faultText is what and why for the FaultError of an exit decide says
// faults.
func faultText(e *Exit) (what, detail string) {
	switch {
	case e.Errno == unix.ENOSYS:
		// arm64 KVM's answer to a data abort it cannot emulate: no
		// valid instruction syndrome (ISV = 0), e.g. a load pair or a
		// writeback access to an MMIO address.
		return "KVM_RUN failed", "KVM cannot emulate the guest's MMIO access (no instruction syndrome: a load/store pair or writeback to a device address?)"
	case e.Errno != 0:
		return "KVM_RUN failed", e.Errno.Error()
	}
	switch e.Reason {
	case kvm.ExitFailEntry:
		return "KVM_EXIT_FAIL_ENTRY", fmt.Sprintf("hardware_entry_failure_reason %#x on host CPU %d", e.FailEntry.Reason, e.FailEntry.CPU)
	case kvm.ExitInternalError:
		return "KVM_EXIT_INTERNAL_ERROR", fmt.Sprintf("suberror %d data %#x", e.Internal.Suberror, e.Internal.Data[:e.Internal.NData])
	}
	return "unhandled exit", fmt.Sprintf("exit reason %d", e.Reason)
}

// State is where a vCPU is in its life; one value, owned by the vCPU's
// thread and read by others (Inspect).
type State uint32

const (
	// StateReset: initialised (KVM_ARM_VCPU_INIT) and no guest
	// instruction has run since; its loop is not running. New leaves a
	// vCPU here, and so does Reinit.
	StateReset State = iota
	// StateParked: in its loop, waiting in userspace for a power-on, in
	// its reset state.
	StateParked
	// StateOff: in its loop, waiting for a power-on after the guest's
	// CPU_OFF: rearmed for the next CPU_ON, not re-initialised (rearm).
	StateOff
	// StateRunning: powered on, in its KVM_RUN loop (or setting its
	// entry registers just before).
	StateRunning
	// StateStopped: its loop ended after guest instructions ran; the
	// next boot must initialise it again.
	StateStopped
)

func (s State) String() string {
	switch s {
	case StateReset:
		return "reset"
	case StateParked:
		return "parked"
	case StateOff:
		return "off"
	case StateRunning:
		return "running"
	case StateStopped:
		return "stopped"
	}
	return fmt.Sprintf("State(%d)", uint32(s))
}

// Waiting reports whether a vCPU in s is parked in its loop, waiting for
// a power-on: it has no guest position, and its registers are in reset
// state.
func (s State) Waiting() bool { return s == StateParked || s == StateOff }

// Event is something that moves a vCPU from one State to another.
type Event uint8

const (
	// EventInit: KVM_ARM_VCPU_INIT reset the vCPU.
	EventInit Event = iota
	// EventPark: the loop waits for a power-on.
	EventPark
	// EventWake: the loop took a power-on request.
	EventWake
	// EventPowerOff: the guest's CPU_OFF; the vCPU was rearmed and
	// waits for its next CPU_ON.
	EventPowerOff
	// EventHalt: the loop ended while the guest was running (a Halt, a
	// stop, a fault).
	EventHalt
	// EventStop: the loop ended while waiting.
	EventStop
)

func (e Event) String() string {
	switch e {
	case EventInit:
		return "init"
	case EventPark:
		return "park"
	case EventWake:
		return "wake"
	case EventPowerOff:
		return "power-off"
	case EventHalt:
		return "halt"
	case EventStop:
		return "stop"
	}
	return fmt.Sprintf("Event(%d)", uint8(e))
}

// Step is the lifecycle: the state after e happens in s, and whether e
// can happen in s at all.
func (s State) Step(e Event) (State, bool) {
	switch {
	case e == EventInit && (s == StateReset || s == StateStopped):
		return StateReset, true
	case e == EventPark && s == StateReset:
		return StateParked, true
	case e == EventWake && s.Waiting():
		return StateRunning, true
	case e == EventPowerOff && s == StateRunning:
		return StateOff, true
	case e == EventHalt && s == StateRunning:
		return StateStopped, true
	case e == EventStop && s == StateParked:
		// Stopped before any guest instruction: still in reset state.
		return StateReset, true
	case e == EventStop && s == StateOff:
		return StateStopped, true
	}
	return s, false
}

// After is the lifecycle event that a Handler's Next brings about in a
// running vCPU (Continue brings none: ok false).
func (n Next) After() (Event, bool) {
	switch n {
	case PowerOff:
		return EventPowerOff, true
	case Halt:
		return EventHalt, true
	}
	return 0, false
}
