package bench

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"text/tabwriter"

	"github.com/mvm-dev/mvm/exits"
)

// ProfileDiff is one exit reason compared between a variant and the
// baseline: mean count and mean time per run, over the runs that carried
// an exit profile (mvm bench --profile).
type ProfileDiff struct {
	CPUs    int    `json:"cpus"`
	Variant string `json:"variant"`
	Source  string `json:"source"`
	Reason  string `json:"reason"`
	// Base* are the baseline's per-run means, Var* the variant's.
	BaseCount float64 `json:"base_count"`
	VarCount  float64 `json:"variant_count"`
	BaseNS    float64 `json:"base_time_ns"`
	VarNS     float64 `json:"variant_time_ns"`
}

type reasonKey struct{ source, reason string }

type reasonSum struct {
	count, ns float64
	runs      int
}

// profileMeans averages the total rows of every measured run's profile
// per (source, reason) for one cell.
func profileMeans(runs []Run, cpus int, variant string) (map[reasonKey]reasonSum, int) {
	sums := map[reasonKey]reasonSum{}
	n := 0
	for _, r := range runs {
		if !r.OK() || r.CPUs != cpus || r.Variant != variant || r.Profile == nil {
			continue
		}
		n++
		for _, row := range r.Profile.Rows {
			if row.VCPU != exits.TotalVCPU {
				continue
			}
			k := reasonKey{row.Source, row.Reason}
			s := sums[k]
			s.count += float64(row.Count)
			s.ns += float64(row.TimeNS)
			sums[k] = s
		}
	}
	for k, s := range sums {
		s.count /= float64(n)
		s.ns /= float64(n)
		s.runs = n
		sums[k] = s
	}
	return sums, n
}

// ProfileDiffs compares each variant's exit profile with the baseline's
// for every vCPU count, and returns per cell the top reasons ordered by
// how much they differ (largest relative change in count or time first).
// Cells without profiles on both sides are left out.
func ProfileDiffs(r *Report, baseline string, top int) []ProfileDiff {
	var out []ProfileDiff
	for _, n := range r.Analysis.Rows {
		base, nb := profileMeans(r.Runs, n, baseline)
		if nb == 0 {
			continue
		}
		for _, v := range r.Config.Variants {
			if v.Name == baseline {
				continue
			}
			vm, nv := profileMeans(r.Runs, n, v.Name)
			if nv == 0 {
				continue
			}
			var cell []ProfileDiff
			for _, k := range unionKeys(base, vm) {
				b, w := base[k], vm[k]
				cell = append(cell, ProfileDiff{CPUs: n, Variant: v.Name, Source: k.source, Reason: k.reason,
					BaseCount: b.count, VarCount: w.count, BaseNS: b.ns, VarNS: w.ns})
			}
			slices.SortStableFunc(cell, func(a, b ProfileDiff) int {
				return cmp.Compare(b.change(), a.change())
			})
			if len(cell) > top {
				cell = cell[:top]
			}
			out = append(out, cell...)
		}
	}
	return out
}

// change is the larger of the relative count and time changes, so a
// reason that appears or vanishes ranks first.
func (d ProfileDiff) change() float64 {
	rel := func(a, b float64) float64 {
		if a == b {
			return 0
		}
		return math.Abs(b-a) / math.Max(math.Max(a, b), 1)
	}
	return math.Max(rel(d.BaseCount, d.VarCount), rel(d.BaseNS, d.VarNS))
}

func unionKeys(a, b map[reasonKey]reasonSum) []reasonKey {
	var ks []reasonKey
	for k := range a {
		ks = append(ks, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			ks = append(ks, k)
		}
	}
	slices.SortFunc(ks, func(x, y reasonKey) int {
		return cmp.Or(cmp.Compare(x.source, y.source), cmp.Compare(x.reason, y.reason))
	})
	return ks
}

// writeProfileDiffs renders the exit-profile comparison under the tables.
func writeProfileDiffs(w io.Writer, r *Report) {
	diffs := ProfileDiffs(r, r.Analysis.Baseline, 6)
	if len(diffs) == 0 {
		return
	}
	fmt.Fprintf(w, "\nexit profile: the reasons that differ most from %s (mean per run; tracepoint rows need root)\n", r.Analysis.Baseline)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "ncpu\tvariant\tsource\treason\tcount base\tcount\tdelta\ttime base [ms]\ttime [ms]\tdelta\t")
	for _, d := range diffs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%.0f\t%.0f\t%s\t%.1f\t%.1f\t%s\t\n", d.CPUs, d.Variant, d.Source, d.Reason,
			d.BaseCount, d.VarCount, pct(d.BaseCount, d.VarCount), d.BaseNS/1e6, d.VarNS/1e6, pct(d.BaseNS, d.VarNS))
	}
	tw.Flush()
}

func pct(a, b float64) string {
	if a == 0 {
		if b == 0 {
			return "0%"
		}
		return "new"
	}
	return fmt.Sprintf("%+.1f%%", (b-a)/a*100)
}
