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
	if r.TraceReordered > 0 {
		fmt.Fprintf(w, "\n%d tracepoint records arrived out of order: counted, not timed, their exits' keys unknown.\n", r.TraceReordered)
	}
	r.writePhases(w)
	r.writeGuestCode(w)
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
		title := fmt.Sprintf("VM exits from tracepoints, %s (%s). %s; Handle = kvm_exit -> next kvm_entry.", who, r.Arch, basis)
		if s := r.Sampling; s != nil {
			title += fmt.Sprintf("\nEstimated from %d sampled windows (%d of %d exits seen), scaled by the KVM stats fd's exact exits: the Estimated column says what of each row is an estimate.", s.Windows, s.SampledExits, s.ExactExits)
		}
		return title
	default:
		return fmt.Sprintf("Userspace exits, %s. Time = handling time in the VMM, KVM_RUN return -> next KVM_RUN.", who)
	}
}

func writeRows(w *errWriter, rows []exits.Row) {
	var n, t uint64
	width, pcts, est := len("Event name"), false, false
	for _, row := range rows {
		n += row.Count
		t += row.TimeNS
		width = max(width, len(row.Reason))
		for _, b := range row.Breakdown {
			width = max(width, len(b.Key)+2)
		}
		pcts = pcts || row.Percentiles != nil
		est = est || row.Estimate != ""
	}
	// The table is right-aligned but for the names, padded here so that
	// breakdown rows show indented under their reason. Right-aligned
	// columns pad the empty cells of the Total line; render into a buffer
	// and trim the trailing blanks.
	name := func(s string) string { return fmt.Sprintf("%-*s", width, s) }
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\tSamples\tSample%%\tTime (ns)\tTime%%\tMean Time (ns)\tMin (ns)\tMax (ns)\tHandle mean (ns)\t", name("Event name"))
	if pcts {
		fmt.Fprintf(tw, "Guest p50/p90/p99 (ns)\tHandle p50/p90/p99 (ns)\t")
	}
	if est {
		fmt.Fprintf(tw, "Estimated\t")
	}
	fmt.Fprintln(tw)
	for _, row := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%d\t%d\t%d\t%d\t",
			name(row.Reason), row.Count, percent(row.Count, n), row.TimeNS, percent(row.TimeNS, t),
			row.TimeMeanNS, row.TimeMinNS, row.TimeMaxNS, row.HandleMeanNS)
		if pcts {
			fmt.Fprintf(tw, "%s\t%s\t", pctCell(row.Percentiles, true), pctCell(row.Percentiles, false))
		}
		if est {
			fmt.Fprintf(tw, "%s\t", cmp.Or(row.Estimate, "-"))
		}
		fmt.Fprintln(tw)
		// Breakdown rows: Sample% and Time% of their reason.
		for _, b := range row.Breakdown {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%d\t\t\t%d\t",
				name("  "+b.Key), b.Samples, percent(b.Samples, row.Count), b.TimeNS, percent(b.TimeNS, row.TimeNS),
				exits.MeanNS(b.TimeNS, b.Samples), exits.MeanNS(b.HandleNS, b.Samples))
			if pcts {
				fmt.Fprintf(tw, "%s\t%s\t", pctCell(b.Percentiles, true), pctCell(b.Percentiles, false))
			}
			fmt.Fprintln(tw)
		}
	}
	fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%d\t\t\t\t\n", name("Total"), n, percent(n, n), t, percent(t, t), exits.MeanNS(t, n))
	tw.Flush()
	for _, line := range strings.SplitAfter(buf.String(), "\n") {
		trimmed := strings.TrimRight(line, " \n")
		if trimmed != "" || line != "" {
			fmt.Fprintln(w, trimmed)
		}
	}
}

// pctCell renders "p50/p90/p99" of guest or handling time ("-" without).
func pctCell(l *exits.Latency, guest bool) string {
	if l == nil {
		return "-"
	}
	p := l.Handle
	if guest {
		p = l.Guest
	}
	return fmt.Sprintf("%d/%d/%d", p.P50, p.P90, p.P99)
}

// writePhases prints the tracepoint totals per boot phase.
func (r table) writePhases(w *errWriter) {
	if len(r.ByPhase) == 0 {
		return
	}
	fmt.Fprintf(w, "\nVM exits by boot phase (tracepoints, all vCPUs; times since the first kvm_entry):\n")
	for _, ph := range r.ByPhase {
		end := "end"
		if ph.EndNS >= 0 {
			end = kvmstat.FormatDuration(uint64(ph.EndNS))
		}
		var n uint64
		for _, row := range ph.Rows {
			n += row.Samples
		}
		fmt.Fprintf(w, "\n  %s (%s .. %s), %d exits:\n", ph.Phase, kvmstat.FormatDuration(uint64(max(ph.StartNS, 0))), end, n)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "    Event name\tSamples\tSample%%\tTime (ns)\tHandle (ns)\t\n")
		for _, row := range ph.Rows {
			fmt.Fprintf(tw, "    %s\t%d\t%s\t%d\t%d\t\n", row.Reason, row.Samples, percent(row.Samples, n), row.TimeNS, row.HandleNS)
		}
		tw.Flush()
	}
	if u := r.Userspace; u != nil {
		how := "the guest's boot marker (0x41)"
		if u.Source == "first_user_exit" {
			how = "the first exit from a user (TTBR0) address: userspace started at or before it"
		}
		fmt.Fprintf(w, "\nUserspace reached at %s, from %s.\n", kvmstat.FormatDuration(uint64(max(u.AtNS, 0))), how)
	}
}

// writeGuestCode prints the top guest functions per reason.
func (r table) writeGuestCode(w *errWriter) {
	g := r.GuestCode
	if g == nil || len(g.Reasons) == 0 {
		return
	}
	src := "raw PCs (no --guest-symbols)"
	if g.Symbols != "" {
		src = "symbols from " + g.Symbols
		if g.KASLROffset != "" {
			src += ", KASLR offset " + g.KASLROffset + " (" + g.KASLRFrom + ")"
		}
	}
	fmt.Fprintf(w, "\nGuest code the exits came from (%s):\n", src)
	if g.Note != "" {
		fmt.Fprintf(w, "  %s\n", g.Note)
	}
	for _, gr := range g.Reasons {
		fmt.Fprintf(w, "\n  %s\n", gr.Reason)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, f := range gr.Functions {
			fmt.Fprintf(tw, "    %d\t%s\t%s\n", f.Samples, f.Function, f.TopPC)
		}
		if gr.Other > 0 {
			fmt.Fprintf(tw, "    %d\t(other)\t\n", gr.Other)
		}
		tw.Flush()
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
		changed := slices.ContainsFunc(groups[v], func(s exits.StatRow) bool { return s.Delta != 0 })
		if !changed {
			// A header over no rows reads like a broken table.
			fmt.Fprintf(w, "\nKVM stats of %s: none changed over the run.\n", title)
			continue
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
