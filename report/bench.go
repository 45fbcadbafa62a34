package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/mvm-dev/mvm/bench"
)

type benchView struct {
	Title       string
	Subtitle    string
	Source      string
	Host        []fact
	Config      []fact
	Variants    []variantInfo
	Regressions []string
	Failed      []string
	Notes       []string
	Absent      []fact
	Phases      []benchPhase
	Diffs       []diffRow
	DiffNote    string
}

type variantInfo struct {
	Name, Label, Settings, Color string
	Baseline                     bool
}

type benchPhase struct {
	Name string
	Desc string
	H    float64
	Axis axis
	Rows []benchRow
	Gaps []float64 // y of the separators between vCPU counts
}

type benchRow struct {
	Y, Mid     float64
	Label      string
	Color      string
	CPUs       int
	Variant    string
	Points     []benchPoint
	HasCell    bool
	MinX, MaxX float64
	Q1X, Q3X   float64
	MedX       float64
	MedianNS   float64
	Median     string
	Spread     string
	Delta      string
	DeltaPct   string
	P          string
	Sig        bool
	Regression bool
	Baseline   bool
	Title      string
}

type benchPoint struct {
	X, Y   float64
	Seq    int
	NS     int64
	Warmup bool
	Failed bool
	Color  string
	Title  string
}

type diffRow struct {
	CPUs                    int
	Variant, Source, Reason string
	BaseCount, VarCount     string
	CountDelta              string
	BaseTime, VarTime       string
	TimeDelta               string
	BaseW, VarW             float64
	Color                   string
}

const (
	benchRowH   = 22.0
	benchLabelW = 150.0
	benchValueW = 260.0
)

func newBenchView(r *bench.Report, source string) benchView {
	an := &r.Analysis
	v := benchView{Title: "mvm bench report", Source: source}
	ok := 0
	for _, run := range r.Runs {
		if run.OK() {
			ok++
		}
	}
	v.Subtitle = fmt.Sprintf("%d variant%s x vCPUs %s, %d runs (%d measured), baseline %s",
		len(r.Config.Variants), plural(len(r.Config.Variants)), bench.FormatCPUList(an.Rows), len(r.Runs), ok, an.Baseline)
	h := r.Host
	v.Host = []fact{{"host", orDash(h.Hostname)}, {"system", fmt.Sprintf("%s/%s, Linux %s", h.OS, h.Arch, orDash(h.Kernel))}, {"CPUs", strconv.Itoa(h.CPUs)}}
	v.Config = []fact{
		{"started", r.Started.UTC().Format("2006-01-02 15:04:05 UTC")},
		{"took", r.Finished.Sub(r.Started).Round(1e6).String()},
		{"runs per cell", fmt.Sprintf("%d, after %d warm-up", r.Config.Runs, r.Config.Warmup)},
		{"quiet", strconv.FormatBool(r.Config.Quiet)},
		{"test", fmt.Sprintf("%s, alpha %g", orDash(an.Test), an.Alpha)},
	}
	if an.FailOnRegression != nil {
		v.Config = append(v.Config, fact{"regression", fmt.Sprintf("significant and more than %g%% slower", *an.FailOnRegression)})
	} else {
		v.Config = append(v.Config, fact{"regression", "not checked (no --fail-on-regression)"})
	}
	if len(r.Config.CommonArgs) > 0 {
		v.Config = append(v.Config, fact{"mvm run flags", strings.Join(r.Config.CommonArgs, " ")})
	}
	if r.Interrupted {
		v.Config = append(v.Config, fact{"interrupted", "yes: these are the runs measured before the bench was stopped"})
	}
	colors := map[string]string{}
	for i, vr := range r.Config.Variants {
		colors[vr.Name] = variantColor(i)
		v.Variants = append(v.Variants, variantInfo{Name: vr.Name, Label: vr.Settings.Label, Color: colors[vr.Name],
			Settings: settingsText(vr), Baseline: vr.Name == an.Baseline})
	}
	for _, g := range an.Regressions {
		v.Regressions = append(v.Regressions, fmt.Sprintf("%s at %d vCPU%s, %s: %+.1f%% (p=%.3g)", g.Phase, g.CPUs, plural(g.CPUs), g.Variant, g.DeltaPct, g.P))
	}
	for _, f := range an.Failed {
		v.Failed = append(v.Failed, fmt.Sprintf("run #%d (%s, %d vCPU%s): %s", f.Seq, f.Variant, f.CPUs, plural(f.CPUs), lastLine(f.Error)))
	}
	v.Notes = an.Notes
	for _, p := range sortedKeys(an.Absent) {
		v.Absent = append(v.Absent, fact{p, an.Absent[p]})
	}
	for _, p := range an.Phases {
		v.Phases = append(v.Phases, newBenchPhase(r, p, colors))
	}
	diffs := bench.ProfileDiffs(r, an.Baseline, an.Alpha, an.ProfileAll, 8)
	maxCount := 0.0
	for _, d := range diffs {
		maxCount = math.Max(maxCount, math.Max(d.BaseCount, d.VarCount))
	}
	for _, d := range diffs {
		row := diffRow{CPUs: d.CPUs, Variant: d.Variant, Source: d.Source, Reason: fmt.Sprintf("%s (p=%.3g)", d.Row(), d.P),
			BaseCount: fmt.Sprintf("%.0f", d.BaseCount), VarCount: fmt.Sprintf("%.0f", d.VarCount), CountDelta: bench.PctChange(d.BaseCount, d.VarCount),
			BaseTime: ms(d.BaseNS), VarTime: ms(d.VarNS), TimeDelta: bench.PctChange(d.BaseNS, d.VarNS), Color: colors[d.Variant]}
		if maxCount > 0 {
			row.BaseW, row.VarW = 110*d.BaseCount/maxCount, 110*d.VarCount/maxCount
		}
		v.Diffs = append(v.Diffs, row)
	}
	if len(diffs) > 0 {
		v.DiffNote = fmt.Sprintf("Median per run over the runs with an exit profile (mvm bench --profile); the rows (reasons, their breakdown, reasons per boot phase) whose count differs significantly from %s (Mann-Whitney U over the runs' counts, p < %g), most significant first.", an.Baseline, an.Alpha)
	}
	return v
}

// settingsText says what a variant boots: its overrides when it has any,
// else its settings.
func settingsText(v bench.Variant) string {
	if len(v.Overrides) > 0 {
		var kv []string
		for _, o := range v.Overrides {
			kv = append(kv, o.Key+"="+o.Value)
		}
		return strings.Join(kv, ", ")
	}
	st := v.Settings
	parts := []string{"kernel " + st.Kernel}
	if st.Initrd != "" {
		parts = append(parts, "initrd "+st.Initrd)
	}
	if c := strings.TrimSpace(st.Cmdline + " " + st.Append + " " + st.CmdlineAppend); c != "" {
		parts = append(parts, "cmdline \""+c+"\"")
	}
	parts = append(parts, "memory "+orDash(st.Memory), "psci "+orDash(st.PSCI), "cpus "+bench.FormatCPUList(st.CPUs))
	return strings.Join(parts, ", ")
}

func sortedKeys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	bench.SortPhases(ks)
	return ks
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// newBenchPhase draws one phase: a row per (vCPU count, variant) with every
// run that observed the phase as a point, on one axis for the phase.
func newBenchPhase(r *bench.Report, phase string, colors map[string]string) benchPhase {
	an := &r.Analysis
	bp := benchPhase{Name: phase, Desc: bench.PhaseDescription(phase)}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, run := range r.Runs {
		if v, ok := run.PhasesNS[phase]; ok {
			lo, hi = math.Min(lo, float64(v)), math.Max(hi, float64(v))
		}
	}
	if math.IsInf(lo, 0) {
		lo, hi = 0, 1
	}
	pad := math.Max((hi-lo)*0.05, hi*0.005)
	pad = math.Max(pad, 1)
	const top = 6.0
	type key struct {
		cpus    int
		variant string
	}
	var keys []key
	for _, n := range an.Rows {
		for _, vr := range r.Config.Variants {
			has := an.Has(n, vr.Name, phase)
			for _, run := range r.Runs {
				if _, ok := run.PhasesNS[phase]; ok && run.CPUs == n && run.Variant == vr.Name {
					has = true
				}
			}
			if has {
				keys = append(keys, key{n, vr.Name})
			}
		}
	}
	bottom := top + float64(len(keys))*benchRowH
	ax, sc := timeAxis(math.Max(lo-pad, 0), hi+pad, benchLabelW, figW-benchValueW, bottom+4, top, 8, phase)
	bp.Axis = ax
	bp.H = bottom + axisGap
	for i, k := range keys {
		y := top + float64(i)*benchRowH
		if i > 0 && keys[i-1].cpus != k.cpus {
			bp.Gaps = append(bp.Gaps, y)
		}
		row := benchRow{Y: y, Mid: y + benchRowH/2, CPUs: k.cpus, Variant: k.variant, Color: colors[k.variant],
			Label: fmt.Sprintf("%d vCPU%s · %s", k.cpus, plural(k.cpus), k.variant), Baseline: k.variant == an.Baseline}
		j := 0
		for _, run := range r.Runs {
			ns, ok := run.PhasesNS[phase]
			if !ok || run.CPUs != k.cpus || run.Variant != k.variant {
				continue
			}
			// Spread the points over the row's height so equal
			// values stay countable.
			dy := float64(j%5-2) * 2.6
			j++
			p := benchPoint{X: sc.at(float64(ns)), Y: row.Mid + dy, Seq: run.Seq, NS: ns, Warmup: run.Warmup, Failed: run.Status != bench.StatusOK, Color: row.Color}
			what := ""
			switch {
			case run.Warmup:
				what = ", warm-up (not in the statistics)"
			case p.Failed:
				what = ", " + run.Status + " (not in the statistics)"
			}
			p.Title = fmt.Sprintf("run #%d, %s at %d vCPU%s, %s: %s%s", run.Seq, k.variant, k.cpus, plural(k.cpus), phase, ms(float64(ns)), what)
			row.Points = append(row.Points, p)
		}
		if c, ok := an.Cell(k.cpus, k.variant, phase); ok && c.N > 0 {
			row.HasCell = true
			row.MinX, row.MaxX = sc.at(c.Min), sc.at(c.Max)
			row.Q1X, row.Q3X = sc.at(c.Q1), sc.at(c.Q3)
			row.MedX, row.MedianNS = sc.at(c.Median), c.Median
			row.Median = ms(c.Median)
			row.Spread = fmt.Sprintf("±%.1f%%", c.SpreadPct())
			row.Title = fmt.Sprintf("%s at %d vCPU%s, %s: median %s, min %s, max %s, n=%d", phase, k.cpus, plural(k.cpus), k.variant, ms(c.Median), ms(c.Min), ms(c.Max), c.N)
			if d := c.Delta; d != nil {
				row.DeltaPct = fmt.Sprintf("%+.1f%%", d.Pct)
				row.P = fmt.Sprintf("p=%.3g", d.P)
				row.Sig, row.Regression = d.Significant, d.Regression
				row.Title += fmt.Sprintf("; %s vs %s, %s", row.DeltaPct, d.Baseline, row.P)
			}
		}
		bp.Rows = append(bp.Rows, row)
	}
	return bp
}
