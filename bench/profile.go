package bench

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"

	"golang.org/x/perf/benchmath"

	"github.com/mvm-dev/mvm/exits"
)

// ProfileDiff is one exit-profile row compared between a variant and the
// baseline over the runs that carried a profile (mvm bench --profile): a
// reason, a breakdown row of it (Key), or a reason during one boot phase
// (Phase). Counts are per run; P is the Mann-Whitney U p-value of the
// per-run counts.
type ProfileDiff struct {
	CPUs    int    `json:"cpus"`
	Variant string `json:"variant"`
	Source  string `json:"source"`
	Reason  string `json:"reason"`
	// Key is the breakdown row ("" for the reason itself).
	Key string `json:"key,omitempty"`
	// Phase is the boot phase ("" for the whole run).
	Phase string `json:"phase,omitempty"`
	// Base* are the baseline's per-run medians, Var* the variant's.
	BaseCount float64 `json:"base_count"`
	VarCount  float64 `json:"variant_count"`
	BaseNS    float64 `json:"base_time_ns"`
	VarNS     float64 `json:"variant_time_ns"`
	// P is the two-sided Mann-Whitney U p-value of the per-run counts;
	// Significant says P < alpha.
	P           float64 `json:"p"`
	Significant bool    `json:"significant"`
	// N and BaseN are the runs with a profile on each side.
	N     int `json:"n"`
	BaseN int `json:"base_n"`
}

// profileKey is one comparable row of a profile.
type profileKey struct{ source, reason, key, phase string }

// profileSamples is one key's per-run counts and times.
type profileSamples struct{ counts, ns []float64 }

// profileRuns collects, per key, one count and time per measured run with
// a profile of one cell; a key a run lacks counts as 0 there.
func profileRuns(runs []Run, cpus int, variant string) (map[profileKey]*profileSamples, int) {
	var profs []*exits.Report
	for _, r := range runs {
		if r.OK() && r.CPUs == cpus && r.Variant == variant && r.Profile != nil {
			profs = append(profs, r.Profile)
		}
	}
	out := map[profileKey]*profileSamples{}
	for i, p := range profs {
		add := func(k profileKey, n, ns uint64) {
			s := out[k]
			if s == nil {
				s = &profileSamples{counts: make([]float64, len(profs)), ns: make([]float64, len(profs))}
				out[k] = s
			}
			s.counts[i] += float64(n)
			s.ns[i] += float64(ns)
		}
		for _, row := range p.Rows {
			if row.VCPU != exits.TotalVCPU {
				continue
			}
			add(profileKey{row.Source, row.Reason, "", ""}, row.Count, row.TimeNS)
			for _, b := range row.Breakdown {
				add(profileKey{row.Source, row.Reason, b.Key, ""}, b.Samples, b.TimeNS)
			}
		}
		for _, ph := range p.ByPhase {
			for _, row := range ph.Rows {
				add(profileKey{exits.SourceTracepoint, row.Reason, "", ph.Phase}, row.Samples, row.TimeNS)
			}
		}
	}
	return out, len(profs)
}

// ProfileDiffs compares each variant's exit profile with the baseline's
// for every vCPU count, row by row (reasons, their breakdown rows, reasons
// per boot phase), and orders each cell by significance: smallest p-value
// first, then the largest relative change. Only significant rows are kept
// unless all is set; top bounds the rows per cell (0: no bound).
func ProfileDiffs(r *Report, baseline string, alpha float64, all bool, top int) []ProfileDiff {
	var out []ProfileDiff
	th := benchmath.Thresholds{CompareAlpha: alpha}
	for _, n := range r.Analysis.Rows {
		base, nb := profileRuns(r.Runs, n, baseline)
		if nb == 0 {
			continue
		}
		for _, v := range r.Config.Variants {
			if v.Name == baseline {
				continue
			}
			vm, nv := profileRuns(r.Runs, n, v.Name)
			if nv == 0 {
				continue
			}
			var cell []ProfileDiff
			for _, k := range unionKeys(base, vm) {
				b, w := base[k], vm[k]
				if b == nil {
					b = &profileSamples{counts: make([]float64, nb), ns: make([]float64, nb)}
				}
				if w == nil {
					w = &profileSamples{counts: make([]float64, nv), ns: make([]float64, nv)}
				}
				c := benchmath.AssumeNothing.Compare(benchmath.NewSample(b.counts, &th), benchmath.NewSample(w.counts, &th))
				d := ProfileDiff{CPUs: n, Variant: v.Name, Source: k.source, Reason: k.reason, Key: k.key, Phase: k.phase,
					BaseCount: median(b.counts), VarCount: median(w.counts), BaseNS: median(b.ns), VarNS: median(w.ns),
					P: c.P, Significant: c.P < alpha, N: nv, BaseN: nb}
				if math.IsNaN(d.P) {
					d.P, d.Significant = 1, false
				}
				if d.Significant || all {
					cell = append(cell, d)
				}
			}
			slices.SortStableFunc(cell, func(a, b ProfileDiff) int {
				return cmp.Or(cmp.Compare(a.P, b.P), cmp.Compare(b.change(), a.change()))
			})
			if top > 0 && len(cell) > top {
				cell = cell[:top]
			}
			out = append(out, cell...)
		}
	}
	return out
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return quantile(s, 0.5)
}

// change is the relative change in count, so that among rows of equal p
// the larger move ranks first.
func (d ProfileDiff) change() float64 {
	if d.BaseCount == d.VarCount {
		return 0
	}
	return math.Abs(d.VarCount-d.BaseCount) / math.Max(math.Max(d.BaseCount, d.VarCount), 1)
}

// Row names the diff's row as a person reads it: "IRQ", "SYS64 CTR_EL0
// read", "IRQ during secondaries".
func (d ProfileDiff) Row() string {
	s := d.Reason
	if d.Key != "" {
		s += " " + d.Key
	}
	if d.Phase != "" {
		s += " during " + d.Phase
	}
	return s
}

func unionKeys(a, b map[profileKey]*profileSamples) []profileKey {
	var ks []profileKey
	for k := range a {
		ks = append(ks, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			ks = append(ks, k)
		}
	}
	slices.SortFunc(ks, func(x, y profileKey) int {
		return cmp.Or(cmp.Compare(x.source, y.source), cmp.Compare(x.reason, y.reason), cmp.Compare(x.phase, y.phase), cmp.Compare(x.key, y.key))
	})
	return ks
}

// profileTop bounds the rows per cell the table shows.
const profileTop = 12

// writeProfileDiffs renders the exit-profile comparison under the tables.
func writeProfileDiffs(w io.Writer, r *Report) {
	all := r.Analysis.ProfileAll
	diffs := ProfileDiffs(r, r.Analysis.Baseline, r.Analysis.Alpha, all, profileTop)
	has := false
	for _, run := range r.Runs {
		has = has || run.Profile != nil
	}
	if !has {
		return
	}
	what := fmt.Sprintf("the rows that differ significantly (p < %g)", r.Analysis.Alpha)
	if all {
		what = "every row, most significant first"
	}
	fmt.Fprintf(w, "\nexit profile vs %s: %s; median per run, Mann-Whitney U over the runs' counts (tracepoint rows need root)\n", r.Analysis.Baseline, what)
	if len(diffs) == 0 {
		fmt.Fprintf(w, "  no row differs significantly (--profile-all lists them all)\n")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "ncpu\tvariant\tsource\trow\tcount base\tcount\tdelta\tp\ttime base [ms]\ttime [ms]\t")
	for _, d := range diffs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%.0f\t%.0f\t%s\t%.3g\t%.1f\t%.1f\t\n", d.CPUs, d.Variant, d.Source, d.Row(),
			d.BaseCount, d.VarCount, PctChange(d.BaseCount, d.VarCount), d.P, d.BaseNS/1e6, d.VarNS/1e6)
	}
	tw.Flush()
	var lines []string
	for _, d := range diffs {
		if d.Significant && len(lines) < 3 {
			lines = append(lines, fmt.Sprintf("%s %s %s (p=%.3g)", d.Row(), "exits", PctChange(d.BaseCount, d.VarCount), d.P))
		}
	}
	if len(lines) > 0 {
		fmt.Fprintf(w, "  e.g. %s\n", strings.Join(lines, "; "))
	}
}

// PctChange renders the change from a to b in percent ("+12.5%"), "new"
// when a is zero and b is not: the delta column of the exit-profile
// comparison, in the table and the HTML report alike.
func PctChange(a, b float64) string {
	if a == 0 {
		if b == 0 {
			return "0%"
		}
		return "new"
	}
	return fmt.Sprintf("%+.1f%%", (b-a)/a*100)
}
