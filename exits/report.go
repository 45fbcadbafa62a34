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
}

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
	// KVMStats holds the binary stats, per vCPU, VM and total.
	KVMStats []StatRow `json:"kvm_stats,omitempty"`
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
