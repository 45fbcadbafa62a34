package bench

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"golang.org/x/perf/benchmath"

	"github.com/mvm-dev/mvm/runsummary"
)

// TestName names the significance test in reports.
const TestName = "Mann-Whitney U, two-sided (golang.org/x/perf/benchmath)"

// Options steer the analysis; they can change without re-running boots
// (mvm bench --from).
type Options struct {
	// Alpha: a delta is significant when p < Alpha.
	Alpha float64
	// FailOnRegression, when set, is the slowdown in percent beyond which
	// a significant delta is a regression (and mvm bench exits 1).
	FailOnRegression *float64
	// Baseline is the variant the others are compared with ("A").
	Baseline string
	// Phases, when not empty, limits the analysis to these phases.
	Phases []string
	// ProfileAll lists every exit-profile row in the comparison, not only
	// the significant ones.
	ProfileAll bool
}

// Dist describes one cell's samples (nanoseconds).
type Dist struct {
	N       int     `json:"n"`
	Median  float64 `json:"median_ns"`
	Min     float64 `json:"min_ns"`
	Max     float64 `json:"max_ns"`
	Q1      float64 `json:"q1_ns"`
	Q3      float64 `json:"q3_ns"`
	Mean    float64 `json:"mean_ns"`
	Samples []int64 `json:"samples_ns"`
}

// SpreadPct is half the min..max range as a percentage of the median: the
// "±" of the table. With the handful of runs a boot bench affords, the
// range says more than a standard deviation would.
func (d Dist) SpreadPct() float64 {
	if d.Median == 0 {
		return 0
	}
	return 100 * (d.Max - d.Min) / 2 / d.Median
}

// Describe computes a Dist. Quartiles interpolate linearly between order
// statistics (R's type 7, what most tools print).
func Describe(samples []int64) Dist {
	d := Dist{N: len(samples), Samples: slices.Clone(samples)}
	if d.N == 0 {
		return d
	}
	xs := make([]float64, len(samples))
	sum := 0.0
	for i, v := range samples {
		xs[i] = float64(v)
		sum += xs[i]
	}
	sort.Float64s(xs)
	d.Min, d.Max, d.Mean = xs[0], xs[len(xs)-1], sum/float64(len(xs))
	d.Q1, d.Median, d.Q3 = quantile(xs, 0.25), quantile(xs, 0.5), quantile(xs, 0.75)
	return d
}

func quantile(sorted []float64, q float64) float64 {
	pos := q * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	if lo+1 >= len(sorted) {
		return sorted[lo]
	}
	f := pos - float64(lo)
	return sorted[lo]*(1-f) + sorted[lo+1]*f
}

// Delta compares a cell with the baseline's cell of the same row and phase.
type Delta struct {
	Baseline string `json:"baseline"`
	// Pct is (median / baseline median - 1) * 100: positive is slower.
	Pct float64 `json:"delta_pct"`
	// P is the two-sided Mann-Whitney U p-value of "both samples come
	// from the same distribution".
	P           float64 `json:"p"`
	Significant bool    `json:"significant"`
	// Regression: significant, slower, and by more than
	// --fail-on-regression (only decided when that is set).
	Regression bool `json:"regression"`
	// Warning explains why a p-value cannot reach alpha (too few runs).
	Warning string `json:"warning,omitempty"`
}

// Compare tests b against baseline a.
func Compare(a, b Dist, opt Options) Delta {
	d := Delta{Baseline: opt.Baseline}
	if a.Median != 0 {
		d.Pct = (b.Median/a.Median - 1) * 100
	}
	th := benchmath.Thresholds{CompareAlpha: opt.Alpha}
	sa := benchmath.NewSample(floats(a.Samples), &th)
	sb := benchmath.NewSample(floats(b.Samples), &th)
	c := benchmath.AssumeNothing.Compare(sa, sb)
	d.P = c.P
	d.Significant = c.P < opt.Alpha
	if len(c.Warnings) > 0 {
		w := make([]string, len(c.Warnings))
		for i, e := range c.Warnings {
			w[i] = e.Error()
		}
		d.Warning = strings.Join(w, "; ")
	}
	d.Regression = opt.FailOnRegression != nil && d.Significant && d.Pct > *opt.FailOnRegression
	return d
}

func floats(xs []int64) []float64 {
	out := make([]float64, len(xs))
	for i, v := range xs {
		out[i] = float64(v)
	}
	return out
}

// Cell is one (vCPU count, variant, phase) of the results.
type Cell struct {
	CPUs    int    `json:"cpus"`
	Variant string `json:"variant"`
	Phase   string `json:"phase"`
	Dist
	// Missing counts successful runs of this row and variant that did not
	// observe the phase (it is left out of the samples, not counted as 0).
	Missing int    `json:"missing,omitempty"`
	Delta   *Delta `json:"vs_baseline,omitempty"`
}

// Analysis is everything derived from the runs.
type Analysis struct {
	Test             string   `json:"test"`
	Alpha            float64  `json:"alpha"`
	FailOnRegression *float64 `json:"fail_on_regression_pct,omitempty"`
	Baseline         string   `json:"baseline"`
	Rows             []int    `json:"rows"`
	Variants         []string `json:"variants"`
	// Phases lists the phases with at least one sample, in boot order.
	Phases []string `json:"phases"`
	// Absent lists phases that were expected but never observed, with why.
	Absent      map[string]string `json:"absent,omitempty"`
	Cells       []Cell            `json:"cells"`
	Failed      []RunRef          `json:"failed_runs,omitempty"`
	Regressions []CellRef         `json:"regressions,omitempty"`
	Notes       []string          `json:"notes,omitempty"`
	// ProfileAll: the exit-profile comparison lists every row.
	ProfileAll bool `json:"profile_all,omitempty"`
}

// RunRef points at a failed run.
type RunRef struct {
	Seq     int    `json:"seq"`
	Variant string `json:"variant"`
	CPUs    int    `json:"cpus"`
	Warmup  bool   `json:"warmup,omitempty"`
	Error   string `json:"error"`
}

// CellRef points at a cell.
type CellRef struct {
	CPUs     int     `json:"cpus"`
	Variant  string  `json:"variant"`
	Phase    string  `json:"phase"`
	DeltaPct float64 `json:"delta_pct"`
	P        float64 `json:"p"`
}

// Cell returns the cell for (cpus, variant, phase).
func (a *Analysis) Cell(cpus int, variant, phase string) (Cell, bool) {
	for _, c := range a.Cells {
		if c.CPUs == cpus && c.Variant == variant && c.Phase == phase {
			return c, true
		}
	}
	return Cell{}, false
}

// SortPhases orders phase names for output: a run's phases in their
// order (runsummary.SortPhases), then the process measures.
func SortPhases(ps []string) { runsummary.SortPhases(ps, PhaseProcessWall, PhaseProcessCPU) }

// Analyze computes every cell's distribution, the deltas against the
// baseline, and the failed runs and regressions.
func Analyze(vs []Variant, runs []Run, opt Options) (Analysis, error) {
	if opt.Baseline == "" {
		opt.Baseline = BaselineName
	}
	if opt.Alpha <= 0 || opt.Alpha >= 1 {
		return Analysis{}, fmt.Errorf("alpha %v: use a level between 0 and 1, e.g. 0.05", opt.Alpha)
	}
	names := make([]string, len(vs))
	for i, v := range vs {
		names[i] = v.Name
	}
	if !slices.Contains(names, opt.Baseline) {
		return Analysis{}, fmt.Errorf("baseline %q is not a variant (variants: %s)", opt.Baseline, strings.Join(names, ", "))
	}
	an := Analysis{
		Test: TestName, Alpha: opt.Alpha, FailOnRegression: opt.FailOnRegression,
		Baseline: opt.Baseline, Rows: Rows(vs), Variants: names, Absent: map[string]string{},
		ProfileAll: opt.ProfileAll,
	}
	type key struct {
		cpus    int
		variant string
	}
	okRuns := map[key][]Run{}
	seen := map[string]bool{}
	for _, r := range runs {
		if r.Status == StatusFailed {
			an.Failed = append(an.Failed, RunRef{r.Seq, r.Variant, r.CPUs, r.Warmup, r.Error})
		}
		if !r.OK() {
			continue
		}
		k := key{r.CPUs, r.Variant}
		okRuns[k] = append(okRuns[k], r)
		for p := range r.PhasesNS {
			seen[p] = true
		}
	}
	for p := range seen {
		if len(opt.Phases) == 0 || slices.Contains(opt.Phases, p) {
			an.Phases = append(an.Phases, p)
		}
	}
	SortPhases(an.Phases)
	an.explainAbsent(vs, seen, opt.Phases)

	for _, n := range an.Rows {
		for _, p := range an.Phases {
			base, haveBase := an.cellFor(okRuns[key{n, opt.Baseline}], n, opt.Baseline, p)
			for _, v := range vs {
				rs := okRuns[key{n, v.Name}]
				if len(rs) == 0 {
					continue
				}
				c, ok := an.cellFor(rs, n, v.Name, p)
				if !ok {
					continue
				}
				if v.Name != opt.Baseline && haveBase {
					d := Compare(base.Dist, c.Dist, opt)
					if p == PhaseProcessCPU {
						// CPU time is shown with its significance
						// but never gates CI: it moves with whatever
						// else the host runs (an A/A bench under load
						// showed +34%, p=0.016).
						d.Regression = false
					}
					c.Delta = &d
					if d.Regression {
						an.Regressions = append(an.Regressions, CellRef{n, v.Name, p, d.Pct, d.P})
					}
				}
				an.Cells = append(an.Cells, c)
			}
		}
	}
	an.addNotes(runs, opt)
	return an, nil
}

func (an *Analysis) cellFor(rs []Run, cpus int, variant, phase string) (Cell, bool) {
	var xs []int64
	missing := 0
	for _, r := range rs {
		if v, ok := r.PhasesNS[phase]; ok {
			xs = append(xs, v)
		} else {
			missing++
		}
	}
	if len(xs) == 0 {
		return Cell{}, false
	}
	return Cell{CPUs: cpus, Variant: variant, Phase: phase, Dist: Describe(xs), Missing: missing}, true
}

// explainAbsent says why the usual phases have no samples at all, so that
// the reader sees "absent, because ..." rather than a missing row.
func (an *Analysis) explainAbsent(vs []Variant, seen map[string]bool, only []string) {
	want := func(p string) bool { return !seen[p] && (len(only) == 0 || slices.Contains(only, p)) }
	multi := false
	for _, n := range an.Rows {
		multi = multi || n > 1
	}
	smp := "with one vCPU there are no secondaries"
	if multi {
		smp = "mvm sees CPU_ON only with PSCI in userspace (--psci user, Linux 6.4+ hosts); with --psci kernel KVM answers it"
	}
	if want(runsummary.PhaseBootToSMP) {
		an.Absent[runsummary.PhaseBootToSMP] = smp
	}
	if want(runsummary.PhaseSecondaries) {
		an.Absent[runsummary.PhaseSecondaries] = smp
	}
	if want(runsummary.PhaseSecondariesConsole) {
		an.Absent[runsummary.PhaseSecondariesConsole] = "needs CPU_ON (PSCI in userspace, more than one vCPU) and the kernel's 'smp: Brought up' line, which 'quiet' suppresses (use --verbose-console)"
	}
	if want(runsummary.PhaseSMPConsole) {
		an.Absent[runsummary.PhaseSMPConsole] = "the kernel's 'smp: Brought up' line was not seen; 'quiet' suppresses it (use --verbose-console)"
	}
	if want(runsummary.PhaseKernelToUser) {
		an.Absent[runsummary.PhaseKernelToUser] = "no userspace boot marker: the guest never wrote 0x41 to the marker device at 0x09010000"
	}
	if len(an.Absent) == 0 {
		an.Absent = nil
	}
}

func (an *Analysis) addNotes(runs []Run, opt Options) {
	minN := -1
	for _, c := range an.Cells {
		if minN < 0 || c.N < minN {
			minN = c.N
		}
	}
	if len(an.Variants) > 1 && minN >= 0 && minN < 4 && opt.Alpha <= 0.05 {
		an.Notes = append(an.Notes, fmt.Sprintf("some cells have only %d run(s): the Mann-Whitney U test needs at least 4 runs per variant to reach p < %g, so no delta there can be significant", minN, opt.Alpha))
	}
	for _, c := range an.Cells {
		if c.Missing > 0 {
			an.Notes = append(an.Notes, fmt.Sprintf("%s at %s, %s: observed in %d of %d successful runs", c.Phase, vcpus(c.CPUs), c.Variant, c.N, c.N+c.Missing))
		}
	}
}

// Has reports whether a cell exists.
func (an *Analysis) Has(cpus int, variant, phase string) bool {
	_, ok := an.Cell(cpus, variant, phase)
	return ok
}
