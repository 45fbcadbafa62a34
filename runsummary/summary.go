package runsummary

import (
	"github.com/mvm-dev/mvm/exits"
)

// ExitKind is how a VM run ended.
type ExitKind string

const (
	ExitPowerOff ExitKind = "poweroff" // guest PSCI SYSTEM_OFF
	ExitReset    ExitKind = "reset"    // guest SYSTEM_RESET with --on-reset exit
	ExitCrash    ExitKind = "crash"    // guest reported a crash (system event)
	ExitFault    ExitKind = "fault"    // a vCPU could not continue
	ExitStopped  ExitKind = "stopped"  // the host stopped the VM (signal, context)
)

// Summary is the JSON form of a run's result (mvm run --result-json), read
// by mvm bench and mvm report. Times are nanoseconds; timeline entries are
// offsets from the VMM start. docs/boot-phases.md describes the fields.
type Summary struct {
	Exit     ExitKind         `json:"exit"`
	Error    string           `json:"error,omitempty"`
	PSCI     PSCIMode         `json:"psci"`
	CPUs     int              `json:"cpus"`
	Reboots  int              `json:"reboots"`
	PhasesNS map[string]int64 `json:"phases_ns"`
	// CPUOnNS and EnteredNS are per vCPU (index = vCPU id); -1 where not
	// observed. For vCPU 0 CPUOnNS is -1 and EnteredNS is the first run.
	CPUOnNS   []int64 `json:"cpu_on_ns"`
	EnteredNS []int64 `json:"entered_ns"`
	// The CPU_ON path of each secondary (PSCI user mode), step by step
	// (docs/boot-phases.md): the caller's hypercall exit, the target's
	// thread awake with the request, its PC and X0 set; -1 where absent.
	CPUOnExitNS  []int64          `json:"cpu_on_exit_ns,omitempty"`
	WokenNS      []int64          `json:"woken_ns,omitempty"`
	ResetNS      []int64          `json:"reset_ns,omitempty"`
	MarksNS      []MarkSummary    `json:"marks"`
	MarksDropped uint64           `json:"marks_dropped,omitempty"` // writes past devices.MaxMarks
	ConsoleNS    map[string]int64 `json:"console_marks_ns"`
	Memory       MemorySummary    `json:"memory"`
	Unmapped     uint64           `json:"unmapped_accesses"`
	UnknownSMCCC uint64           `json:"unknown_smccc_calls"`
	Virtio       uint64           `json:"virtio_problems"`
	// PSCIRejectedCalls is the sum of PSCIRejected's counts.
	PSCIRejectedCalls uint64          `json:"psci_rejected_calls"`
	PSCIRejected      []PSCIRejection `json:"psci_rejected,omitempty"`
	// UserspaceFrom says how kernel_to_user's end was found:
	// UserspaceFromMarker or UserspaceFromFirstUserExit.
	UserspaceFrom string `json:"userspace_from,omitempty"`
	// Profile is the exit profile (mvm run --profile), as its JSON.
	Profile *exits.Report `json:"profile,omitempty"`
	// ExitHeat is every vCPU's userspace exits in time buckets.
	ExitHeat *ExitHeat `json:"exit_heat,omitempty"`
	// Config is what was booted, Host where (absent in results of older
	// mvm versions).
	Config *RunConfig `json:"config,omitempty"`
	Host   *Host      `json:"host,omitempty"`
}

// Where kernel_to_user's end (Summary.UserspaceFrom) came from: the
// userspace boot marker (precise) or, without one, the first exit from a
// guest user address seen by the tracepoint profile (a late edge).
const (
	UserspaceFromMarker        = "marker"
	UserspaceFromFirstUserExit = "first_user_exit"
)

// FirstRunNS is the boot vCPU's first KVM_RUN, where the kernel phases'
// clocks start; -1 if not observed.
func (s *Summary) FirstRunNS() int64 {
	if len(s.EnteredNS) > 0 && s.EnteredNS[0] >= 0 {
		return s.EnteredNS[0]
	}
	return -1
}

// MarkSummary is one boot-marker write.
type MarkSummary struct {
	Code byte  `json:"code"`
	AtNS int64 `json:"at_ns"`
}

// MemorySummary is mvm's memory at the end of a run, in bytes.
type MemorySummary struct {
	RSS           uint64 `json:"rss_bytes"`
	GuestResident uint64 `json:"guest_resident_bytes"`
	// Overhead is RSS minus resident guest RAM (Firecracker's measure).
	Overhead uint64 `json:"overhead_bytes"`
	// PrivateOverhead leaves out the shared executable text as well.
	PrivateOverhead uint64 `json:"private_overhead_bytes"`
}

// PSCIRejection counts the PSCI calls of one function that were refused
// for their arguments with one result (psci.Result.Rejected): CPU_ON to
// an MPIDR no vCPU has (INVALID_PARAMETERS), an entry point outside RAM
// or misaligned (INVALID_ADDRESS), and the like.
type PSCIRejection struct {
	Function string `json:"function"` // psci.Name: the same for SMC32 and SMC64
	Result   string `json:"result"`   // the PSCI return code's name
	Count    uint64 `json:"count"`
}

// RunConfig is the part of a VM's configuration a report shows: what was
// booted and how.
type RunConfig struct {
	Kernel string `json:"kernel"`
	// KernelFormat and KernelTree are what mvm found at Kernel (the
	// kernel loader's format name and build tree).
	KernelFormat string `json:"kernel_format,omitempty"`
	KernelTree   string `json:"kernel_tree,omitempty"`
	Initrd       string `json:"initrd,omitempty"`
	Cmdline      string `json:"cmdline,omitempty"`
	CPUs         int    `json:"cpus"`
	Memory       uint64 `json:"memory_bytes"`
	// PSCI is the mode asked for (Summary.PSCI is the one used).
	PSCI    PSCIMode `json:"psci"`
	Profile bool     `json:"profile,omitempty"`
}

// HeatBuckets bounds the buckets per vCPU in ExitHeat. A run starts with
// narrow buckets and doubles their width (merging neighbours) whenever an
// exit falls past the last one, so a run of any length fits and the
// resolution is always at least 1/HeatBuckets of the run.
const HeatBuckets = 256

// ExitHeat is the exit heat map: Counts[vcpu][bucket] is the number of
// userspace exits (KVM_RUN returns, EINTR included) of that vCPU in
// [bucket*BucketNS, (bucket+1)*BucketNS) from the VMM start. Trailing
// buckets with no exit on any vCPU are left out.
type ExitHeat struct {
	BucketNS int64      `json:"bucket_ns"`
	Counts   [][]uint64 `json:"counts"`
}
