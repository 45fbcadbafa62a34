package exits

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
)

// The sources of exit numbers.
const (
	// SourceUserspace: KVM_RUN returns counted and timed by the vCPU run
	// loop (Recorder). Always available.
	SourceUserspace = "userspace"
	// SourceKVMStats: KVM's binary statistics (KVM_GET_STATS_FD) of the VM
	// and every vCPU, as deltas over the run. Needs only the VM fd (Linux
	// 5.14+).
	SourceKVMStats = "kvm_stats"
	// SourceTracepoint: the kvm:kvm_entry/kvm:kvm_exit tracepoints through
	// perf_event_open. Needs root or CAP_PERFMON, and tracefs.
	SourceTracepoint = "tracepoint"
)

// TotalVCPU is the vcpu value of rows summed over all vCPUs; VMVCPU marks
// KVM stats of the VM file descriptor itself.
const (
	TotalVCPU = "total"
	VMVCPU    = "vm"
)

// SourceStatus says whether a source contributed to the report and, if not,
// why.
type SourceStatus struct {
	// Name is one of the Source* constants.
	Name string `json:"name"`
	// Used is true when the report holds numbers from the source.
	Used bool `json:"used"`
	// Detail describes what the source measured.
	Detail string `json:"detail,omitempty"`
	// Reason says why an unused source could not be used.
	Reason string `json:"reason,omitempty"`
}

// Row is one reason's numbers for one vCPU (or the total) from one source.
//
// For userspace rows Time is the handling time in the VMM, from KVM_RUN's
// return to the next KVM_RUN, so time_* and handle_* agree. For tracepoint
// rows Time is what perf kvm stat calls Time on the architecture (arm64:
// guest time, kvm_entry -> kvm_exit; x86: handling time, kvm_exit -> next
// kvm_entry, see Report.PerfTime), Handle is always kvm_exit -> next
// kvm_entry and Guest always kvm_entry -> kvm_exit.
type Row struct {
	Source string `json:"source"`
	// VCPU is the vCPU index ("0", "1", ...) or "total".
	VCPU   string `json:"vcpu"`
	Reason string `json:"reason"`
	// Kind and Sub split a userspace reason ("MMIO/uart" = MMIO, uart).
	Kind string `json:"kind,omitempty"`
	Sub  string `json:"sub,omitempty"`
	// Count is the number of exits.
	Count uint64 `json:"count"`
	// TimeNS is the summed Time of TimeCount exits (those whose interval
	// could be measured); mean, min and max are over those.
	TimeNS     uint64 `json:"time_ns"`
	TimeCount  uint64 `json:"time_count"`
	TimeMeanNS uint64 `json:"time_mean_ns"`
	TimeMinNS  uint64 `json:"time_min_ns"`
	TimeMaxNS  uint64 `json:"time_max_ns"`
	// HandleNS is the summed handling latency of HandleCount exits.
	HandleNS     uint64 `json:"handle_ns"`
	HandleCount  uint64 `json:"handle_count"`
	HandleMeanNS uint64 `json:"handle_mean_ns"`
	HandleMinNS  uint64 `json:"handle_min_ns"`
	HandleMaxNS  uint64 `json:"handle_max_ns"`
	// GuestNS is the summed guest time before GuestCount exits
	// (tracepoint rows only).
	GuestNS    uint64 `json:"guest_ns,omitempty"`
	GuestCount uint64 `json:"guest_count,omitempty"`
	// Percentiles of guest and handling time (tracepoint total rows).
	Percentiles *Latency `json:"percentiles,omitempty"`
	// Breakdown splits a tracepoint reason below the exception class
	// (SYS64 by register, DABT_LOW by device, HVC64 and SMC64 by function
	// (SMC64 only for the SMCs the VMM handled), WFx into WFI and WFE); its
	// rows add up to Count.
	Breakdown []BreakdownRow `json:"breakdown,omitempty"`
	// Estimate, set by the sampled profile (mvm run --profile=light) on
	// its tracepoint rows, says what of the row is estimated from sampled
	// windows: EstimateCountTimes, or EstimateTimes where the count is the
	// stats fd's exact one (WFx, HVC64). Empty: the row is measured.
	Estimate string `json:"estimate,omitempty"`
}

// Row.Estimate values.
const (
	EstimateCountTimes = "count,times"
	EstimateTimes      = "times"
)

// StatRow is one KVM binary statistic over the run.
type StatRow struct {
	Source string `json:"source"`
	// VCPU is the vCPU index, "vm" for the VM's own stats, or "total" for
	// a cumulative vCPU stat summed over all vCPUs.
	VCPU string `json:"vcpu"`
	Name string `json:"name"`
	// Type, Unit, Base and Exponent are the descriptor's: the value in
	// Unit is raw * Base^Exponent.
	Type     string `json:"type"`
	Unit     string `json:"unit"`
	Base     int    `json:"base"`
	Exponent int    `json:"exponent"`
	// Delta is the change over the run for cumulative stats (the sample
	// count for histograms) and the final value for instant and peak ones.
	Delta uint64 `json:"delta"`
	// Value is the raw value at the end (histograms: the sum of buckets).
	Value uint64 `json:"value"`
	// Pretty is Delta rendered with its unit.
	Pretty string `json:"pretty"`
	// Buckets is a histogram's per-bucket delta.
	Buckets []uint64 `json:"buckets,omitempty"`
}

// Report is an exit profile of one VM run.
type Report struct {
	// Arch is the architecture the tracepoint reason names belong to.
	Arch string `json:"arch,omitempty"`
	// PerfTime is "guest" or "handle": what the tracepoint rows' Time is.
	PerfTime string `json:"perf_time,omitempty"`
	// DurationNS is the wall time the numbers cover.
	DurationNS uint64 `json:"duration_ns,omitempty"`
	// Sources lists every source, used or not.
	Sources []SourceStatus `json:"sources"`
	// Rows holds userspace and tracepoint rows, per vCPU and total.
	Rows []Row `json:"rows"`
	// TraceLost is the number of tracepoint records the kernel dropped;
	// when non-zero the tracepoint counts are lower bounds.
	TraceLost uint64 `json:"tracepoint_lost,omitempty"`
	// TraceReordered is the number of tracepoint records that reached
	// the aggregation after a later one of the same thread (a CPU's ring
	// read after the others had moved on, or a thread that moved between
	// CPUs whose clocks differ): counted, but not timed, and an exit
	// among them is not broken down (its key shows as unknown).
	TraceReordered uint64 `json:"tracepoint_reordered,omitempty"`
	// KVMStats holds the binary stats, per vCPU, VM and total.
	KVMStats []StatRow `json:"kvm_stats,omitempty"`
	// ByPhase splits the tracepoint totals by boot phase.
	ByPhase []PhaseRows `json:"by_phase,omitempty"`
	// Userspace says when the guest reached userspace, if it did.
	Userspace *UserspaceStart `json:"userspace_start,omitempty"`
	// GuestCode lists the guest functions the exits came from.
	GuestCode *GuestCode `json:"guest_code,omitempty"`
	// Sampling describes the windows of a sampled profile
	// (--profile=light); nil for an exact one.
	Sampling *Sampling `json:"sampling,omitempty"`
}

// Sampling is how a sampled profile (mvm run --profile=light) saw the
// exits: the kvm_exit tracepoint programs attached for Windows windows,
// AttachedNS in all, seeing SampledExits of the ExactExits the stats fd
// counted (Target was the fraction aimed at); SwitchNS is the time spent
// attaching, detaching and reading the stats fds and maps around the
// windows (wall time of the sampling thread, waits included), AttachNS and
// DetachNS the attach and detach calls alone.
type Sampling struct {
	Windows      int     `json:"windows"`
	AttachedNS   uint64  `json:"attached_ns"`
	SwitchNS     uint64  `json:"switch_ns"`
	AttachNS     uint64  `json:"attach_ns"`
	DetachNS     uint64  `json:"detach_ns"`
	SampledExits uint64  `json:"sampled_exits"`
	ExactExits   uint64  `json:"exact_exits"`
	Target       float64 `json:"target_fraction"`
}

// SetSource records a source as used (err == nil) or unavailable with err
// as the reason, replacing an earlier status of the same source.
func (r *Report) SetSource(name, detail string, err error) {
	st := SourceStatus{Name: name, Used: err == nil, Detail: detail}
	if err != nil {
		st.Reason = err.Error()
	}
	for i := range r.Sources {
		if r.Sources[i].Name == name {
			r.Sources[i] = st
			return
		}
	}
	r.Sources = append(r.Sources, st)
}

// MergeRow adds r's numbers into the total row t (counts and sums add,
// minima and maxima combine, means are recomputed).
func MergeRow(t, r *Row) {
	if r.TimeCount > 0 {
		if t.TimeCount == 0 || r.TimeMinNS < t.TimeMinNS {
			t.TimeMinNS = r.TimeMinNS
		}
		t.TimeMaxNS = max(t.TimeMaxNS, r.TimeMaxNS)
	}
	if r.HandleCount > 0 {
		if t.HandleCount == 0 || r.HandleMinNS < t.HandleMinNS {
			t.HandleMinNS = r.HandleMinNS
		}
		t.HandleMaxNS = max(t.HandleMaxNS, r.HandleMaxNS)
	}
	t.Count += r.Count
	t.TimeNS += r.TimeNS
	t.TimeCount += r.TimeCount
	t.HandleNS += r.HandleNS
	t.HandleCount += r.HandleCount
	t.GuestNS += r.GuestNS
	t.GuestCount += r.GuestCount
	t.TimeMeanNS = MeanNS(t.TimeNS, t.TimeCount)
	t.HandleMeanNS = MeanNS(t.HandleNS, t.HandleCount)
}

// SortRows orders rows by vCPU (numerically, total last), then count
// descending, then reason, and returns them.
func SortRows(rows []Row) []Row {
	slices.SortStableFunc(rows, func(a, b Row) int {
		if c := cmp.Compare(VCPUOrder(a.VCPU), VCPUOrder(b.VCPU)); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return cmp.Compare(a.Reason, b.Reason)
	})
	return rows
}

// VCPUOrder is the sort key of a vcpu label: "vm" first, then the vCPUs
// by index, then "total".
func VCPUOrder(v string) int {
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return n
	}
	if v == VMVCPU {
		return -1
	}
	return int(^uint(0) >> 1) // total last
}

// WriteJSON writes the report as indented JSON. Field names are stable:
// rows carry source, vcpu, reason, count, time_ns, handle_ns (and the
// counts, means, minima and maxima of both); kvm_stats rows carry source,
// vcpu, name, delta, value and the unit description.
func (r *Report) WriteJSON(w io.Writer) error {
	out := *r
	if out.Rows == nil {
		out.Rows = []Row{}
	}
	if out.Sources == nil {
		out.Sources = []SourceStatus{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(&out); err != nil {
		return fmt.Errorf("write exit report JSON: %w", err)
	}
	return nil
}

// ReadJSON decodes a report WriteJSON wrote (mvm run --result-json embeds
// the same object as "profile").
func ReadJSON(r io.Reader) (*Report, error) {
	var rep Report
	if err := json.NewDecoder(r).Decode(&rep); err != nil {
		return nil, fmt.Errorf("read exit report JSON: %w", err)
	}
	return &rep, nil
}

// RowsOf returns the rows of one source and vcpu label ("" matches every
// vcpu), in report order.
func (r *Report) RowsOf(source, vcpu string) []Row {
	var out []Row
	for _, row := range r.Rows {
		if row.Source == source && (vcpu == "" || row.VCPU == vcpu) {
			out = append(out, row)
		}
	}
	return out
}

// MeanNS divides without panicking on zero.
func MeanNS(sum, n uint64) uint64 {
	if n == 0 {
		return 0
	}
	return sum / n
}

// Percentiles are the p50, p90 and p99 of a latency distribution and its
// maximum, in nanoseconds, read from a bounded log-linear histogram
// (exits/hist: within about 3% of the sample value).
type Percentiles struct {
	P50 uint64 `json:"p50"`
	P90 uint64 `json:"p90"`
	P99 uint64 `json:"p99"`
	Max uint64 `json:"max"`
}

// Latency holds the percentiles of the guest time before the exits and of
// their handling time (tracepoint rows).
type Latency struct {
	Guest  Percentiles `json:"guest"`
	Handle Percentiles `json:"handle"`
}

// BreakdownRow is one part of a reason: a system register access, a
// device, an SMCCC function, WFI or WFE. The rows of a reason add up to
// it.
type BreakdownRow struct {
	// Key names the part ("ICC_SGI1R_EL1 write", "gicr", "CPU_ON",
	// "WFI"); "unknown" counts exits without the detail event, "other"
	// those past the bound on distinct keys.
	Key     string `json:"key"`
	Samples uint64 `json:"samples"`
	// TimeNS is the summed Time as in the reason's row (perf's Time),
	// HandleNS the summed handling time.
	TimeNS   uint64 `json:"time_ns"`
	HandleNS uint64 `json:"handle_ns"`
	// Percentiles are present on total rows.
	Percentiles *Latency `json:"percentiles,omitempty"`
	// Addresses are the most frequent guest-physical addresses of a
	// device row (total rows).
	Addresses []AddressCount `json:"addresses,omitempty"`
}

// AddressCount is how many exits one guest-physical address caused.
type AddressCount struct {
	Addr    string `json:"addr"`
	Samples uint64 `json:"samples"`
}

// PhaseRows are the tracepoint totals of one boot phase.
type PhaseRows struct {
	// Phase is boot_to_smp, secondaries, kernel_to_user or
	// after_userspace (docs/boot-phases.md; vmm_setup has no exits).
	Phase string `json:"phase"`
	// StartNS and EndNS are the phase's bounds in ns since the first
	// kvm_entry of the run; EndNS is -1 for the phase the run ended in.
	StartNS int64      `json:"start_ns"`
	EndNS   int64      `json:"end_ns"`
	Rows    []PhaseRow `json:"rows"`
}

// PhaseRow is one reason within a phase.
type PhaseRow struct {
	Reason   string `json:"reason"`
	Samples  uint64 `json:"samples"`
	TimeNS   uint64 `json:"time_ns"`
	HandleNS uint64 `json:"handle_ns"`
}

// UserspaceStart says when the guest reached userspace and how mvm knows.
type UserspaceStart struct {
	// Source is "marker" (the guest wrote 0x41 to the boot-marker
	// device: precise) or "first_user_exit" (the first kvm_exit whose
	// guest PC is a user address, in the TTBR0 half: userspace started at
	// or before it, so this is a late edge).
	Source string `json:"source"`
	// AtNS is the time in ns since the first kvm_entry of the run.
	AtNS int64 `json:"at_ns"`
	// FirstUserExitNS is the first user-PC exit (-1 if none was seen).
	FirstUserExitNS int64 `json:"first_user_exit_ns"`
}

// GuestCode is where in the guest the exits came from.
type GuestCode struct {
	// Symbols is the symbol file used ("" without --guest-symbols: the
	// functions are raw PCs).
	Symbols string `json:"symbols,omitempty"`
	// KASLROffset is what mvm added to the file's addresses, and
	// KASLRFrom how it found it.
	KASLROffset string `json:"kaslr_offset,omitempty"`
	KASLRFrom   string `json:"kaslr_from,omitempty"`
	// Note says what could not be done (e.g. no VBAR_EL1 to find the
	// KASLR offset with).
	Note    string            `json:"note,omitempty"`
	Reasons []GuestCodeReason `json:"reasons"`
}

// GuestCodeReason lists the guest functions (or PCs) one reason's exits
// came from, most frequent first.
type GuestCodeReason struct {
	Reason    string      `json:"reason"`
	Functions []GuestFunc `json:"functions"`
	// Other counts the exits of PCs past the bound on distinct PCs or
	// below the listed top.
	Other uint64 `json:"other,omitempty"`
}

// GuestFunc is one function ("el0_svc_common+0x8c" style names are
// folded to the function: "el0_svc_common") or raw PC ("0xffff8000...").
type GuestFunc struct {
	Function string `json:"function"`
	Samples  uint64 `json:"samples"`
	// TopPC is the most frequent exit PC inside it, as symbol+0xoff.
	TopPC string `json:"top_pc,omitempty"`
}
