package vmm

import (
	"errors"
	"time"

	"github.com/mvm-dev/mvm/devices"
	"github.com/mvm-dev/mvm/exits"
	"github.com/mvm-dev/mvm/runsummary"
)

// Result is what a VM run produced.
type Result struct {
	Exit runsummary.ExitKind
	// Err is why the guest stopped, for runsummary.ExitFault and
	// ExitCrash, as one line: a vCPU's fault names the vCPU, what happened
	// and its PC and PSTATE (vcpu.FaultError), so a command can print it
	// as it is.
	Err      error
	Reboots  int
	Timeline Timeline
	// UnmappedAccesses counts guest MMIO to addresses with no device.
	UnmappedAccesses uint64
	// UnknownSMCCCCalls counts forwarded SMCCC calls mvm does not
	// implement (answered NOT_SUPPORTED).
	UnknownSMCCCCalls uint64
	// PSCIRejected counts the PSCI calls mvm refused for their arguments,
	// by function and result (PSCI in userspace only; KVM's own PSCI
	// answers are not seen).
	PSCIRejected []runsummary.PSCIRejection
	// VirtioProblems counts driver errors the virtio devices saw (each
	// kind logged once).
	VirtioProblems uint64
	// PSCI is the PSCI mode the run used (user or kernel).
	PSCI runsummary.PSCIMode
	// Memory is measured when the guest stops, before anything is freed.
	Memory MemoryUse
	// Profile is the exit profile (with Config.Profile), else nil.
	Profile *exits.Report
	// ExitHeat is every vCPU's userspace exits over time (nil if none).
	ExitHeat *runsummary.ExitHeat
	// Config is what ran, Host where.
	Config runsummary.RunConfig
	Host   runsummary.Host
}

// RunConfig condenses the configuration for the result.
func (c Config) RunConfig() runsummary.RunConfig {
	return runsummary.RunConfig{Kernel: c.Kernel, Initrd: c.Initrd, Cmdline: c.Cmdline, CPUs: c.CPUs,
		Memory: c.Memory, PSCI: c.PSCI, Profile: c.Profile}
}

// MemoryUse is mvm's memory at the end of a run.
type MemoryUse struct {
	RSS           uint64 // resident set of the whole mvm process
	GuestResident uint64 // guest RAM pages resident in host memory
	// Anonymous is the process's resident anonymous memory (guest RAM
	// included unless GuestMemfd, the executable's shared text not).
	Anonymous uint64
	// GuestMemfd is set when guest RAM is a shared memfd (--share): its
	// pages are shared memory (RssShmem), not counted in Anonymous.
	GuestMemfd bool `json:",omitempty"`
}

// PrivateOverhead is mvm's own anonymous memory: heap, stacks, runtime —
// what each additional VM costs, without the executable's text, which
// every mvm process on a host shares.
func (m MemoryUse) PrivateOverhead() uint64 {
	if m.GuestMemfd {
		return m.Anonymous
	}
	if m.Anonymous < m.GuestResident {
		return 0
	}
	return m.Anonymous - m.GuestResident
}

// Overhead is what mvm itself keeps resident besides guest RAM.
func (m MemoryUse) Overhead() uint64 {
	if m.RSS < m.GuestResident {
		return 0
	}
	return m.RSS - m.GuestResident
}

// Timeline is the boot timeline of the last boot on the monotonic clock
// (time.Time values carry Go's monotonic reading).
type Timeline struct {
	Start    time.Time // VMM start (Config.Start)
	FirstRun time.Time // boot vCPU's first KVM_RUN
	// CPUs has one entry per vCPU. For a secondary in PSCI user mode,
	// CPUOn is when the guest's CPU_ON for it was serviced and Entered when
	// it then first entered the guest; both zero if it never came up.
	CPUs []CPUTimeline
	// UserspaceMark is the first write of code 0x41 (or Firecracker's 123)
	// to the boot-marker device; Marks has the first devices.MaxMarks
	// marker writes and MarksDropped counts the rest.
	UserspaceMark time.Time
	// UserspaceFrom says where UserspaceMark came from: the marker
	// (precise) or, without one, the first exit from a guest user address
	// seen by the tracepoint profile (a late edge);
	// runsummary.UserspaceFromMarker or UserspaceFromFirstUserExit.
	UserspaceFrom string
	Marks         []devices.Mark
	MarksDropped  uint64
	// ConsoleMarks holds, per console marker name, when a console line
	// first matched it (runsummary.ConsoleMarkSMP is built in).
	ConsoleMarks map[string]time.Time
	// CommandEnd is when command mode's status came in (MarkCommandEnd).
	CommandEnd time.Time
	End        time.Time // VM exit
}

// CPUTimeline is one vCPU's bring-up. With PSCI in userspace a secondary's
// CPU_ON path is timed step by step (docs/boot-phases.md, "The CPU_ON
// path"): the caller's KVM_RUN returned with the hypercall (CPUOnExit),
// mvm serviced it and posted the start (CPUOn), the target's thread took
// it (Woken), set its registers (Reset) and is about to enter (Entered).
type CPUTimeline struct {
	CPUOnExit time.Time
	CPUOn     time.Time
	Woken     time.Time
	Reset     time.Time
	Entered   time.Time
}

// ErrNeedsARM64 is returned by New on hosts that cannot run arm64 guests.
var ErrNeedsARM64 = errors.New("mvm runs arm64 guests on arm64 KVM: this host is not arm64 (use an arm64 Linux host with /dev/kvm, or 'make demo' to run mvm in the emulated arm64 lab)")
