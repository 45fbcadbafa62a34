// Package render draws mvm's exit profile (the report model of package
// exits) for people: perf-kvm-stat-like tables. The JSON form is the
// model's own (exits.Report.WriteJSON).
package render

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/mvm-dev/mvm/exits"
	"github.com/mvm-dev/mvm/exits/kvmstat"
)

// Options say what Table prints beyond the all-vCPU tables.
type Options struct {
	// PerVCPU prints a table per vCPU before the totals (JSON always has
	// both).
	PerVCPU bool
}

// Table writes the report as perf-kvm-stat-like tables: the sources, then
// per source the reasons sorted by samples (per vCPU if PerVCPU, then the
// total), then the KVM stats.
func Table(w io.Writer, r *exits.Report, opt Options) error {
	ew := &errWriter{w: w}
	t := table{Report: r, opt: opt}
	t.write(ew)
	if ew.err != nil {
		return fmt.Errorf("write exit report table: %w", ew.err)
	}
	return nil
}

// table is a report being rendered.
type table struct {
	*exits.Report
	opt Options
}

func (r table) write(w *errWriter) {
	fmt.Fprintf(w, "Exit profile")
	if r.DurationNS > 0 {
		fmt.Fprintf(w, " over %s", kvmstat.FormatDuration(r.DurationNS))
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

	for _, src := range []string{exits.SourceTracepoint, exits.SourceUserspace} {
		rows := r.RowsOf(src, "")
		if len(rows) == 0 {
			continue
		}
		for _, vcpu := range r.tableVCPUs(rows) {
			var sel []exits.Row
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

// tableVCPUs lists the vCPUs to print a table for: each vCPU when PerVCPU,
// then the total.
func (r table) tableVCPUs(rows []exits.Row) []string {
	var vs []string
	seen := make(map[string]bool)
	for _, row := range rows {
		if seen[row.VCPU] || (!r.opt.PerVCPU && row.VCPU != exits.TotalVCPU) {
			continue
		}
		seen[row.VCPU] = true
		vs = append(vs, row.VCPU)
	}
	slices.SortStableFunc(vs, func(a, b string) int { return cmp.Compare(exits.VCPUOrder(a), exits.VCPUOrder(b)) })
	return vs
}

func (r table) tableTitle(src, vcpu string) string {
	who := "all vCPUs"
	if vcpu != exits.TotalVCPU {
		who = "vCPU " + vcpu
	}
	switch src {
	case exits.SourceTracepoint:
		basis := "Time = handling time, kvm_exit -> next kvm_entry (perf kvm stat on x86)"
		if r.PerfTime == exits.GuestTime.String() {
			basis = "Time = guest time before the exit, kvm_entry -> kvm_exit (perf kvm stat on arm64)"
		}
		return fmt.Sprintf("VM exits from tracepoints, %s (%s). %s; Handle = kvm_exit -> next kvm_entry.", who, r.Arch, basis)
	default:
		return fmt.Sprintf("Userspace exits, %s. Time = handling time in the VMM, KVM_RUN return -> next KVM_RUN.", who)
	}
}

func writeRows(w *errWriter, rows []exits.Row) {
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
	fmt.Fprintf(tw, "Total\t%d\t%s\t%d\t%s\t%d\t\t\t\t\n", n, percent(n, n), t, percent(t, t), exits.MeanNS(t, n))
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

func (r table) writeStats(w *errWriter) {
	if len(r.KVMStats) == 0 {
		return
	}
	groups := map[string][]exits.StatRow{}
	var order []string
	for _, s := range r.KVMStats {
		if !r.opt.PerVCPU && s.VCPU != exits.TotalVCPU && s.VCPU != exits.VMVCPU {
			continue
		}
		if _, ok := groups[s.VCPU]; !ok {
			order = append(order, s.VCPU)
		}
		groups[s.VCPU] = append(groups[s.VCPU], s)
	}
	slices.SortStableFunc(order, func(a, b string) int { return cmp.Compare(exits.VCPUOrder(a), exits.VCPUOrder(b)) })
	for _, v := range order {
		title := "vCPU " + v
		switch v {
		case exits.VMVCPU:
			title = "the VM"
		case exits.TotalVCPU:
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
