package vmm

import (
	"time"

	"github.com/mvm-dev/mvm/exits"
)

// Summary is the JSON form of a run's result (mvm run --result-json), read
// by mvm bench. Times are nanoseconds; timeline entries are offsets from
// the VMM start (Config.Start). docs/boot-phases.md describes the fields.
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
	// UserspaceFrom says how kernel_to_user's end was found: "marker" or
	// "first_user_exit" (docs/boot-phases.md).
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

// MemorySummary is MemoryUse in bytes.
type MemorySummary struct {
	RSS           uint64 `json:"rss_bytes"`
	GuestResident uint64 `json:"guest_resident_bytes"`
	// Overhead is RSS minus resident guest RAM (Firecracker's measure).
	Overhead uint64 `json:"overhead_bytes"`
	// PrivateOverhead leaves out the shared executable text as well.
	PrivateOverhead uint64 `json:"private_overhead_bytes"`
}

// Summary condenses a result for JSON.
func (r Result) Summary() Summary {
	t := r.Timeline
	off := func(at time.Time) int64 {
		if at.IsZero() || t.Start.IsZero() {
			return -1
		}
		return int64(at.Sub(t.Start))
	}
	s := Summary{
		Exit: r.Exit, PSCI: r.PSCI, CPUs: len(t.CPUs), Reboots: r.Reboots,
		PhasesNS:     map[string]int64{},
		ConsoleNS:    map[string]int64{},
		Memory:       MemorySummary{r.Memory.RSS, r.Memory.GuestResident, r.Memory.Overhead(), r.Memory.PrivateOverhead()},
		Unmapped:     r.UnmappedAccesses,
		UnknownSMCCC: r.UnknownSMCCCCalls,
		Virtio:       r.VirtioProblems,

		PSCIRejectedCalls: totalRejected(r.PSCIRejected),
		PSCIRejected:      r.PSCIRejected,
		Profile:           r.Profile,
		ExitHeat:          r.ExitHeat,

		UserspaceFrom: t.UserspaceFrom,
	}
	if r.Config.Kernel != "" {
		c := r.Config
		s.Config = &c
	}
	if r.Host.OS != "" {
		h := r.Host
		s.Host = &h
	}
	if r.Err != nil {
		s.Error = r.Err.Error()
	}
	for name, d := range t.Phases() {
		s.PhasesNS[name] = int64(d)
	}
	for _, c := range t.CPUs {
		s.CPUOnNS = append(s.CPUOnNS, off(c.CPUOn))
		s.EnteredNS = append(s.EnteredNS, off(c.Entered))
		s.CPUOnExitNS = append(s.CPUOnExitNS, off(c.CPUOnExit))
		s.WokenNS = append(s.WokenNS, off(c.Woken))
		s.ResetNS = append(s.ResetNS, off(c.Reset))
	}
	s.MarksDropped = t.MarksDropped
	for _, m := range t.Marks {
		s.MarksNS = append(s.MarksNS, MarkSummary{m.Code, off(m.At)})
	}
	for k, v := range t.ConsoleMarks {
		s.ConsoleNS[k] = off(v)
	}
	return s
}
