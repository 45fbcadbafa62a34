package exits

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
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
	// PerVCPU makes WriteTable print a table per vCPU before the totals
	// (JSON always has both).
	PerVCPU bool `json:"-"`
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

// AddUserspace adds the rows of the recorders' snapshots (per vCPU and
// total) and marks the userspace source used.
func (r *Report) AddUserspace(snaps []RecorderSnapshot) {
	r.Rows = append(r.Rows, UserspaceRows(snaps)...)
	r.SetSource(SourceUserspace, "KVM_RUN returns counted and timed by the vCPU run loops", nil)
}

// AddTracepoint adds the rows of a tracepoint aggregate (per vCPU and
// total) and marks the tracepoint source used.
func (r *Report) AddTracepoint(n Namer, vs []TraceVCPU) {
	r.Arch = n.Arch()
	r.PerfTime = n.PerfTime().String()
	r.Rows = append(r.Rows, TracepointRows(n, vs)...)
	for _, v := range vs {
		r.TraceLost += v.Lost
	}
	r.SetSource(SourceTracepoint, "kvm:kvm_entry and kvm:kvm_exit samples of every vCPU thread (perf_event_open)", nil)
}

// AddKVMStats adds stat rows (see StatRows) and marks the source used.
func (r *Report) AddKVMStats(rows []StatRow) {
	r.KVMStats = append(r.KVMStats, rows...)
	r.SetSource(SourceKVMStats, "KVM_GET_STATS_FD of the VM and every vCPU, deltas over the run", nil)
}

// UserspaceRows turns recorder snapshots into per-vCPU rows and total rows.
func UserspaceRows(snaps []RecorderSnapshot) []Row {
	var rows []Row
	totals := make(map[string]*Row)
	for _, s := range snaps {
		for _, k := range s.Keys {
			row := Row{
				Source:       SourceUserspace,
				VCPU:         strconv.Itoa(s.VCPU),
				Reason:       k.Name,
				Kind:         k.Kind.String(),
				Sub:          k.Sub,
				Count:        k.Count,
				TimeNS:       k.SumNS,
				TimeCount:    k.Count,
				TimeMinNS:    k.MinNS,
				TimeMaxNS:    k.MaxNS,
				HandleNS:     k.SumNS,
				HandleCount:  k.Count,
				HandleMinNS:  k.MinNS,
				HandleMaxNS:  k.MaxNS,
				TimeMeanNS:   k.MeanNS(),
				HandleMeanNS: k.MeanNS(),
			}
			rows = append(rows, row)
			t, ok := totals[k.Name]
			if !ok {
				t = &Row{Source: SourceUserspace, VCPU: TotalVCPU, Reason: k.Name, Kind: row.Kind, Sub: row.Sub}
				totals[k.Name] = t
			}
			mergeRow(t, &row)
		}
	}
	return append(sortRows(rows), sortedTotals(totals)...)
}

// TracepointRows turns a tracepoint aggregate into per-vCPU rows and total
// rows, with Time chosen by the namer's PerfTime.
func TracepointRows(n Namer, vs []TraceVCPU) []Row {
	var rows []Row
	for _, v := range vs {
		for _, s := range v.Reasons {
			rows = append(rows, traceRow(n, strconv.Itoa(v.VCPU), s))
		}
	}
	for _, s := range TotalTrace(vs).Reasons {
		rows = append(rows, traceRow(n, TotalVCPU, s))
	}
	return rows
}

func traceRow(n Namer, vcpu string, s TraceStats) Row {
	row := Row{
		Source:       SourceTracepoint,
		VCPU:         vcpu,
		Reason:       s.Reason,
		Count:        s.Count,
		HandleNS:     s.HandleSumNS,
		HandleCount:  s.HandleCount,
		HandleMeanNS: meanNS(s.HandleSumNS, s.HandleCount),
		HandleMinNS:  s.HandleMinNS,
		HandleMaxNS:  s.HandleMaxNS,
		GuestNS:      s.GuestSumNS,
		GuestCount:   s.GuestCount,
	}
	if n.PerfTime() == GuestTime {
		row.TimeNS, row.TimeCount = s.GuestSumNS, s.GuestCount
		row.TimeMinNS, row.TimeMaxNS = s.GuestMinNS, s.GuestMaxNS
	} else {
		row.TimeNS, row.TimeCount = s.HandleSumNS, s.HandleCount
		row.TimeMinNS, row.TimeMaxNS = s.HandleMinNS, s.HandleMaxNS
	}
	row.TimeMeanNS = meanNS(row.TimeNS, row.TimeCount)
	return row
}

func mergeRow(t, r *Row) {
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
	t.TimeMeanNS = meanNS(t.TimeNS, t.TimeCount)
	t.HandleMeanNS = meanNS(t.HandleNS, t.HandleCount)
}

func sortedTotals(m map[string]*Row) []Row {
	rows := make([]Row, 0, len(m))
	for _, r := range m {
		rows = append(rows, *r)
	}
	return sortRows(rows)
}

// sortRows orders by vCPU (numerically, total last), then count
// descending, then reason.
func sortRows(rows []Row) []Row {
	slices.SortStableFunc(rows, func(a, b Row) int {
		if c := cmp.Compare(vcpuOrder(a.VCPU), vcpuOrder(b.VCPU)); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return cmp.Compare(a.Reason, b.Reason)
	})
	return rows
}

func vcpuOrder(v string) int {
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return n
	}
	if v == VMVCPU {
		return -1
	}
	return int(^uint(0) >> 1) // total last
}

// StatRows turns one stats file's deltas into rows labelled vcpu.
func StatRows(vcpu string, deltas []StatDelta) []StatRow {
	rows := make([]StatRow, 0, len(deltas))
	for _, d := range deltas {
		base := 10
		if d.Desc.Base() == BasePow2 {
			base = 2
		}
		row := StatRow{
			Source:   SourceKVMStats,
			VCPU:     vcpu,
			Name:     d.Desc.Name,
			Type:     d.Desc.Type().String(),
			Unit:     d.Desc.Unit().String(),
			Base:     base,
			Exponent: int(d.Desc.Exponent),
		}
		if d.Desc.IsHistogram() {
			row.Buckets = append([]uint64(nil), d.Values...)
			row.Delta = d.Sum()
			for _, v := range d.After {
				row.Value += v
			}
			row.Pretty = strconv.FormatUint(row.Delta, 10) + " samples"
		} else {
			row.Delta = d.Value()
			if len(d.After) > 0 {
				row.Value = d.After[0]
			}
			row.Pretty = d.Desc.Format(row.Delta)
		}
		rows = append(rows, row)
	}
	return rows
}

// TotalStatRows sums the cumulative and histogram stats of per-vCPU rows
// (not "vm" or "total" rows) into rows with vcpu "total".
func TotalStatRows(rows []StatRow) []StatRow {
	var out []StatRow
	idx := make(map[string]int)
	for _, r := range rows {
		if r.VCPU == VMVCPU || r.VCPU == TotalVCPU {
			continue
		}
		if r.Type != StatCumulative.String() && r.Type != StatLinearHist.String() && r.Type != StatLogHist.String() {
			continue
		}
		i, ok := idx[r.Name]
		if !ok {
			t := r
			t.VCPU = TotalVCPU
			t.Buckets = append([]uint64(nil), r.Buckets...)
			idx[r.Name] = len(out)
			out = append(out, t)
			continue
		}
		t := &out[i]
		t.Delta += r.Delta
		t.Value += r.Value
		for j := range r.Buckets {
			if j < len(t.Buckets) {
				t.Buckets[j] += r.Buckets[j]
			}
		}
	}
	for i := range out {
		out[i].Pretty = prettyStatRow(out[i])
	}
	return out
}

func prettyStatRow(r StatRow) string {
	if r.Buckets != nil {
		return strconv.FormatUint(r.Delta, 10) + " samples"
	}
	var flags uint32
	for _, u := range []StatUnit{UnitNone, UnitBytes, UnitSeconds, UnitCycles, UnitBoolean} {
		if u.String() == r.Unit {
			flags |= uint32(u) << statsUnitShift
		}
	}
	if r.Base == 2 {
		flags |= uint32(BasePow2) << statsBaseShift
	}
	return StatDesc{Flags: flags, Exponent: int16(r.Exponent)}.Format(r.Delta)
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

// WriteTable writes the report as perf-kvm-stat-like tables: the sources,
// then per source the reasons sorted by samples (per vCPU if PerVCPU, then
// the total), then the KVM stats.
func (r *Report) WriteTable(w io.Writer) error {
	ew := &errWriter{w: w}
	r.writeTable(ew)
	if ew.err != nil {
		return fmt.Errorf("write exit report table: %w", ew.err)
	}
	return nil
}

func (r *Report) writeTable(w *errWriter) {
	fmt.Fprintf(w, "Exit profile")
	if r.DurationNS > 0 {
		fmt.Fprintf(w, " over %s", StatDesc{Flags: uint32(UnitSeconds) << statsUnitShift, Exponent: -9}.Format(r.DurationNS))
	}
	fmt.Fprintf(w, "\n\nSources:\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, s := range r.Sources {
		state, why := "used", s.Detail
		if !s.Used {
			state, why = "unavailable", s.Reason
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", s.Name, state, why)
	}
	tw.Flush()

	for _, src := range []string{SourceTracepoint, SourceUserspace} {
		rows := r.rowsOf(src)
		if len(rows) == 0 {
			continue
		}
		for _, vcpu := range r.tableVCPUs(rows) {
			var sel []Row
			for _, row := range rows {
				if row.VCPU == vcpu {
					sel = append(sel, row)
				}
			}
			fmt.Fprintf(w, "\n%s\n\n", r.tableTitle(src, vcpu))
			writeRows(w, sel)
		}
	}
	if r.TraceLost > 0 {
		fmt.Fprintf(w, "\nThe kernel dropped %d tracepoint records: tracepoint counts are lower bounds.\n", r.TraceLost)
	}
	r.writeStats(w)
}

func (r *Report) rowsOf(src string) []Row {
	var rows []Row
	for _, row := range r.Rows {
		if row.Source == src {
			rows = append(rows, row)
		}
	}
	return rows
}

// tableVCPUs lists the vCPUs to print a table for: each vCPU when PerVCPU,
// then the total.
func (r *Report) tableVCPUs(rows []Row) []string {
	var vs []string
	seen := make(map[string]bool)
	for _, row := range rows {
		if seen[row.VCPU] || (!r.PerVCPU && row.VCPU != TotalVCPU) {
			continue
		}
		seen[row.VCPU] = true
		vs = append(vs, row.VCPU)
	}
	slices.SortStableFunc(vs, func(a, b string) int { return cmp.Compare(vcpuOrder(a), vcpuOrder(b)) })
	return vs
}

func (r *Report) tableTitle(src, vcpu string) string {
	who := "all vCPUs"
	if vcpu != TotalVCPU {
		who = "vCPU " + vcpu
	}
	switch src {
	case SourceTracepoint:
		basis := "Time = handling time, kvm_exit -> next kvm_entry (perf kvm stat on x86)"
		if r.PerfTime == GuestTime.String() {
			basis = "Time = guest time before the exit, kvm_entry -> kvm_exit (perf kvm stat on arm64)"
		}
		return fmt.Sprintf("VM exits from tracepoints, %s (%s). %s; Handle = kvm_exit -> next kvm_entry.", who, r.Arch, basis)
	default:
		return fmt.Sprintf("Userspace exits, %s. Time = handling time in the VMM, KVM_RUN return -> next KVM_RUN.", who)
	}
}

func writeRows(w *errWriter, rows []Row) {
	var n, t uint64
	for _, row := range rows {
		n += row.Count
		t += row.TimeNS
	}
	// Right-aligned columns pad the empty cells of the Total line; render
	// into a buffer and trim the trailing blanks.
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "Event name\tSamples\tSample%%\tTime (ns)\tTime%%\tMean Time (ns)\tMin (ns)\tMax (ns)\tHandle mean (ns)\t\n")
	for _, row := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%d\t%d\t%d\t%d\t\n",
			row.Reason, row.Count, percent(row.Count, n), row.TimeNS, percent(row.TimeNS, t),
			row.TimeMeanNS, row.TimeMinNS, row.TimeMaxNS, row.HandleMeanNS)
	}
	fmt.Fprintf(tw, "Total\t%d\t%s\t%d\t%s\t%d\t\t\t\t\n", n, percent(n, n), t, percent(t, t), meanNS(t, n))
	tw.Flush()
	for _, line := range strings.SplitAfter(buf.String(), "\n") {
		trimmed := strings.TrimRight(line, " \n")
		if trimmed != "" || line != "" {
			fmt.Fprintln(w, trimmed)
		}
	}
}

func percent(part, whole uint64) string {
	if whole == 0 {
		return "-"
	}
	return strconv.FormatFloat(100*float64(part)/float64(whole), 'f', 2, 64) + "%"
}

func (r *Report) writeStats(w *errWriter) {
	if len(r.KVMStats) == 0 {
		return
	}
	groups := map[string][]StatRow{}
	var order []string
	for _, s := range r.KVMStats {
		if !r.PerVCPU && s.VCPU != TotalVCPU && s.VCPU != VMVCPU {
			continue
		}
		if _, ok := groups[s.VCPU]; !ok {
			order = append(order, s.VCPU)
		}
		groups[s.VCPU] = append(groups[s.VCPU], s)
	}
	slices.SortStableFunc(order, func(a, b string) int { return cmp.Compare(vcpuOrder(a), vcpuOrder(b)) })
	for _, v := range order {
		title := "vCPU " + v
		switch v {
		case VMVCPU:
			title = "the VM"
		case TotalVCPU:
			title = "all vCPUs (sum)"
		}
		fmt.Fprintf(w, "\nKVM stats of %s, change over the run (non-zero only):\n\n", title)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "  Name\tType\tDelta\tValue\n")
		for _, s := range groups[v] {
			if s.Delta == 0 {
				continue
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\n", s.Name, strings.ReplaceAll(s.Type, "_", " "), s.Pretty, s.Value)
		}
		tw.Flush()
	}
}

// errWriter keeps the first write error so the table code stays linear.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return len(p), nil
	}
	n, err := e.w.Write(p)
	if err != nil {
		e.err = err
	}
	return n, err
}
