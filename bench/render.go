package bench

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/mvm-dev/mvm/runsummary"
)

// PhaseDescription says where a phase's clock starts and stops, in the
// words of docs/boot-phases.md.
func PhaseDescription(p string) string {
	switch p {
	case runsummary.PhaseVMMSetup:
		return "mvm process start -> boot vCPU's first KVM_RUN"
	case runsummary.PhaseBootToSMP:
		return "first KVM_RUN -> first PSCI CPU_ON serviced"
	case runsummary.PhaseSecondaries:
		return "first CPU_ON -> last secondary's first guest entry (mvm's PSCI timeline)"
	case runsummary.PhaseSecondariesConsole:
		return "first CPU_ON -> kernel console line 'smp: Brought up'"
	case runsummary.PhaseSMPConsole:
		return "first KVM_RUN -> kernel console line 'smp: Brought up'"
	case runsummary.PhaseKernelToUser:
		return "first KVM_RUN -> userspace boot marker (0x41 at 0x09010000)"
	case runsummary.PhaseCommand:
		return "command mode's init start (userspace boot marker) -> CMD's exit status in"
	case runsummary.PhaseTotal:
		return "mvm process start -> VM exit"
	case PhaseProcessWall:
		return "mvm bench's fork/exec of mvm -> mvm reaped (includes exec and Go runtime start)"
	case PhaseProcessCPU:
		return "CPU time of the mvm process, user + system, guest time included"
	}
	if name, ok := strings.CutPrefix(p, runsummary.ConsolePhasePrefix); ok {
		return "first KVM_RUN -> first console line matching --marker " + name
	}
	return "see docs/boot-phases.md"
}

// unitFor picks one unit for a phase's table so that its columns compare
// at a glance.
func unitFor(maxNS float64) (string, float64) {
	switch {
	case maxNS >= 1e6:
		return "ms", 1e6
	case maxNS >= 1e3:
		return "µs", 1e3
	}
	return "ns", 1
}

// WriteTable renders the analysis as one table per phase: rows are vCPU
// counts, columns variants, each cell "median ±spread" and, for variants
// other than the baseline, "(delta%, p)" — the layout of the boot-time
// tables on the kernel mailing lists.
func WriteTable(w io.Writer, r *Report) error {
	bw := bufio.NewWriter(w)
	an := &r.Analysis
	writeHeader(bw, r)
	for _, p := range an.Phases {
		maxNS := 0.0
		for _, c := range an.Cells {
			if c.Phase == p {
				maxNS = math.Max(maxNS, c.Median)
			}
		}
		unit, div := unitFor(maxNS)
		fmt.Fprintf(bw, "\n%s [%s]: %s\n", p, unit, PhaseDescription(p))
		tw := tabwriter.NewWriter(bw, 0, 4, 3, ' ', tabwriter.AlignRight)
		fmt.Fprint(tw, "ncpu\t")
		for _, v := range r.Config.Variants {
			h := v.Name
			if v.Settings.Label != "" {
				h += " " + v.Settings.Label
			}
			fmt.Fprintf(tw, "%s\t", h)
		}
		fmt.Fprintln(tw)
		for _, n := range an.Rows {
			fmt.Fprintf(tw, "%d\t", n)
			for _, v := range r.Config.Variants {
				fmt.Fprintf(tw, "%s\t", cellText(r, n, v, p, div))
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
	}
	writeProfileDiffs(bw, r)
	writeFooter(bw, r)
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

func cellText(r *Report, n int, v Variant, phase string, div float64) string {
	an := &r.Analysis
	c, ok := an.Cell(n, v.Name, phase)
	if !ok {
		if hasCPUs(v, n) && allFailed(r.Runs, n, v.Name) {
			return "failed"
		}
		return "-"
	}
	s := fmt.Sprintf("%.1f ±%.0f%%", c.Median/div, c.SpreadPct())
	if c.N != r.Config.Runs {
		s += fmt.Sprintf(" n=%d", c.N)
	}
	if d := c.Delta; d != nil {
		sig := ""
		if !d.Significant {
			sig = "~ "
		}
		s += fmt.Sprintf(" (%s%+.1f%% p=%s)", sig, d.Pct, formatP(d.P))
		if d.Regression {
			s += "!"
		}
	}
	return s
}

func formatP(p float64) string {
	if p < 0.001 {
		return "<0.001"
	}
	return fmt.Sprintf("%.3f", p)
}

func allFailed(runs []Run, n int, variant string) bool {
	failed := false
	for _, r := range runs {
		if r.CPUs != n || r.Variant != variant || r.Warmup || r.Status == StatusInterrupted {
			continue
		}
		if r.Status == StatusOK {
			return false
		}
		failed = true
	}
	return failed
}

func writeHeader(w io.Writer, r *Report) {
	an := &r.Analysis
	total, failed := 0, 0
	for _, run := range r.Runs {
		if run.Warmup || run.Status == StatusInterrupted {
			continue
		}
		total++
		if run.Status == StatusFailed {
			failed++
		}
	}
	fmt.Fprintf(w, "mvm bench: %d variant(s) x vCPUs %s x %d runs, interleaved; %d runs done, %d failed",
		len(r.Config.Variants), FormatCPUList(an.Rows), r.Config.Runs, total, failed)
	if r.Interrupted {
		fmt.Fprint(w, "; INTERRUPTED, partial results")
	}
	fmt.Fprintf(w, "\nhost: %s/%s", r.Host.OS, r.Host.Arch)
	if r.Host.Kernel != "" {
		fmt.Fprintf(w, " %s", r.Host.Kernel)
	}
	fmt.Fprintf(w, ", %d CPUs\n", r.Host.CPUs)
	if len(r.Config.Command) > 0 {
		fmt.Fprintf(w, "command: %s\n", strings.Join(r.Config.Command, " "))
	}
	width := 0
	for _, v := range r.Config.Variants {
		width = max(width, len(v.Name))
	}
	for _, v := range r.Config.Variants {
		d := v.Describe()
		if v.Name == BaselineName && r.Config.Quiet && !v.Settings.hasQuiet() {
			d += " (+ quiet)"
		}
		fmt.Fprintf(w, "  %-*s  %s\n", width, v.Name, d)
	}
}

func writeFooter(w io.Writer, r *Report) {
	an := &r.Analysis
	fmt.Fprintf(w, "\nmedian ±half the min..max range; (delta vs %s, p): %s; ~ not significant (p >= %g)",
		an.Baseline, TestName, an.Alpha)
	if an.FailOnRegression != nil {
		fmt.Fprintf(w, "; ! regression: significant and slower by more than %g%%", *an.FailOnRegression)
	}
	fmt.Fprintln(w)
	if len(an.Absent) > 0 {
		fmt.Fprintln(w, "not measured:")
		for _, p := range sortedKeys(an.Absent) {
			fmt.Fprintf(w, "  %s: %s\n", p, an.Absent[p])
		}
	}
	for _, n := range an.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	if len(an.Failed) > 0 {
		fmt.Fprintf(w, "failed runs (%d):\n", len(an.Failed))
		for _, f := range an.Failed {
			name := RunName(Run{Seq: f.Seq, Variant: f.Variant, CPUs: f.CPUs, Warmup: f.Warmup})
			fmt.Fprintf(w, "  %s: %s\n", name, oneLine(f.Error))
		}
	}
	if an.FailOnRegression != nil {
		if len(an.Regressions) == 0 {
			fmt.Fprintf(w, "no regression beyond %g%%\n", *an.FailOnRegression)
		} else {
			fmt.Fprintf(w, "REGRESSIONS beyond %g%% (%d):\n", *an.FailOnRegression, len(an.Regressions))
			for _, g := range an.Regressions {
				fmt.Fprintf(w, "  %s, %s, %s: %+.1f%% (p=%s)\n", g.Phase, vcpus(g.CPUs), g.Variant, g.DeltaPct, formatP(g.P))
			}
		}
	}
}

func vcpus(n int) string {
	if n == 1 {
		return "1 vCPU"
	}
	return fmt.Sprintf("%d vCPUs", n)
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	SortPhases(ks)
	return ks
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	lines := strings.Split(s, "\n")
	return strings.Join(lines, " | ")
}

// BenchmarkName is the Go benchmark name of one phase sample.
func BenchmarkName(cpus int, variant, phase string) string {
	return fmt.Sprintf("BenchmarkBoot/cpus=%d/variant=%s/phase=%s", cpus, variant, phase)
}

// WriteBenchstat writes every successful run's phases in the Go benchmark
// format, one line per phase and run with an iteration count of 1, so that
// `benchstat -col /variant` compares the variants and `benchstat -row
// /cpus` lines up vCPU counts. Variant descriptions go in comment lines,
// which the format ignores.
func WriteBenchstat(w io.Writer, r *Report) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "goos: %s\ngoarch: %s\npkg: github.com/mvm-dev/mvm/bench\n", r.Host.OS, r.Host.Arch)
	for _, v := range r.Config.Variants {
		fmt.Fprintf(bw, "# variant %s: %s\n", v.Name, v.Describe())
	}
	phases := r.Analysis.Phases
	for _, run := range r.Runs {
		if !run.OK() {
			continue
		}
		for _, p := range phases {
			if ns, ok := run.PhasesNS[p]; ok {
				fmt.Fprintf(bw, "%s 1 %d ns/op\n", BenchmarkName(run.CPUs, run.Variant, p), ns)
			}
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write benchstat output: %w", err)
	}
	return nil
}
