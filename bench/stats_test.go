package bench

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/mvm-dev/mvm/runsummary"
)

func TestDescribe(t *testing.T) {
	d := Describe([]int64{5, 1, 4, 2, 3})
	if d.N != 5 || d.Median != 3 || d.Min != 1 || d.Max != 5 || d.Q1 != 2 || d.Q3 != 4 || d.Mean != 3 {
		t.Errorf("Describe = %+v", d)
	}
	if got := d.SpreadPct(); math.Abs(got-100*2.0/3) > 1e-9 {
		t.Errorf("SpreadPct = %v", got)
	}
	d = Describe([]int64{10, 20, 30, 40})
	if d.Median != 25 || d.Q1 != 17.5 || d.Q3 != 32.5 {
		t.Errorf("even Describe = %+v", d)
	}
	if d := Describe(nil); d.N != 0 || d.SpreadPct() != 0 {
		t.Errorf("empty Describe = %+v", d)
	}
	if d := Describe([]int64{7}); d.Median != 7 || d.Q1 != 7 || d.Q3 != 7 {
		t.Errorf("one sample = %+v", d)
	}
}

func TestCompare(t *testing.T) {
	opt := Options{Alpha: 0.05, Baseline: "A"}
	a := Describe([]int64{100, 101, 102, 103, 104})
	slow := Describe([]int64{130, 131, 132, 133, 134})
	d := Compare(a, slow, opt)
	// Complete separation of 5 vs 5: the exact two-sided p is 2/252.
	if math.Abs(d.P-2.0/252) > 1e-9 || !d.Significant || d.Regression {
		t.Errorf("slow: %+v (no --fail-on-regression: never a regression)", d)
	}
	if math.Abs(d.Pct-(132.0/102-1)*100) > 1e-9 {
		t.Errorf("delta %v", d.Pct)
	}
	th := 10.0
	opt.FailOnRegression = &th
	if d := Compare(a, slow, opt); !d.Regression {
		t.Errorf("30%% slower with threshold 10%%: %+v", d)
	}
	th = 50
	if d := Compare(a, slow, opt); d.Regression {
		t.Errorf("30%% slower with threshold 50%%: %+v", d)
	}
	th = 10
	fast := Describe([]int64{70, 71, 72, 73, 74})
	if d := Compare(a, fast, opt); !d.Significant || d.Regression || d.Pct >= 0 {
		t.Errorf("faster: %+v", d)
	}
	same := Describe([]int64{102, 100, 104, 101, 103})
	if d := Compare(a, same, opt); d.Significant || d.Regression || d.P < 0.9 {
		t.Errorf("same: %+v", d)
	}
	// Three runs each can never reach p < 0.05: say so.
	d = Compare(Describe([]int64{1, 2, 3}), Describe([]int64{10, 11, 12}), opt)
	if d.Significant || !strings.Contains(d.Warning, "need >= 4 samples") {
		t.Errorf("3 vs 3: %+v", d)
	}
}

// synthRuns makes the runs of a bench: phases(variant, cpus, rng) gives a
// successful run's phases.
func synthRuns(vs []Variant, runs int, seed uint64, phases func(v string, cpus int, rng *rand.Rand) map[string]int64) []Run {
	rng := rand.New(rand.NewPCG(seed, seed))
	var out []Run
	for _, j := range Schedule(vs, runs, 0) {
		out = append(out, Run{Seq: j.Seq, Round: j.Round, Variant: j.Variant, CPUs: j.CPUs, Status: StatusOK,
			PhasesNS: phases(j.Variant, j.CPUs, rng)})
	}
	return out
}

// bootPhases models a Linux boot: setup ~20 ms, secondaries ~3 ms per
// secondary (absent with one vCPU), kernel_to_user 800 ms + delay, each
// with a few percent of noise.
func bootPhases(delayMS map[string]float64) func(string, int, *rand.Rand) map[string]int64 {
	return func(v string, cpus int, rng *rand.Rand) map[string]int64 {
		noise := func(x float64) int64 { return int64(x * (1 + 0.03*rng.NormFloat64())) }
		p := map[string]int64{runsummary.PhaseVMMSetup: noise(20e6)}
		if cpus > 1 {
			p[runsummary.PhaseBootToSMP] = noise(300e6)
			p[runsummary.PhaseSecondaries] = noise(3e6 * float64(cpus-1))
		}
		p[runsummary.PhaseKernelToUser] = noise(800e6 + delayMS[v]*1e6)
		p[runsummary.PhaseTotal] = p[runsummary.PhaseVMMSetup] + p[runsummary.PhaseKernelToUser] + noise(50e6)
		return p
	}
}

func TestAnalyzeAA(t *testing.T) {
	vs, _ := BuildVariants(baseSettings(), []VariantSpec{{"A2", nil}})
	th := 5.0
	for seed := range uint64(20) {
		runs := synthRuns(vs, 6, seed, bootPhases(nil))
		an, err := Analyze(vs, runs, Options{Alpha: 0.05, FailOnRegression: &th})
		if err != nil {
			t.Fatal(err)
		}
		if len(an.Regressions) > 0 {
			t.Errorf("seed %d: A/A regressions %+v", seed, an.Regressions)
		}
	}
}

func TestAnalyzeAB(t *testing.T) {
	base := baseSettings()
	base.CPUs = []int{1, 4, 8}
	vs, _ := BuildVariants(base, []VariantSpec{
		{"slow", []Override{{"cmdline-append", "mvm.delay_ms=300"}}},
		{"fast", []Override{{"cmdline-append", "mvm.delay_ms=0"}}},
	})
	runs := synthRuns(vs, 5, 1, bootPhases(map[string]float64{"A": 200, "slow": 500, "fast": 0}))
	runs = append(runs, Run{Seq: 99, Variant: "slow", CPUs: 4, Status: StatusFailed, Error: "mvm: kernel x is a text file"})
	th := 10.0
	an, err := Analyze(vs, runs, Options{Alpha: 0.05, FailOnRegression: &th})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 4, 8} {
		for _, p := range []string{runsummary.PhaseKernelToUser, runsummary.PhaseTotal} {
			c, ok := an.Cell(n, "slow", p)
			if !ok || c.Delta == nil || !c.Delta.Significant || !c.Delta.Regression || c.Delta.Pct <= 0 {
				t.Errorf("slow, %d vCPUs, %s: %+v", n, p, c.Delta)
			}
			c, ok = an.Cell(n, "fast", p)
			if !ok || c.Delta == nil || !c.Delta.Significant || c.Delta.Regression || c.Delta.Pct >= 0 {
				t.Errorf("fast, %d vCPUs, %s: %+v", n, p, c.Delta)
			}
		}
		if c, _ := an.Cell(n, "slow", runsummary.PhaseVMMSetup); c.Delta == nil || c.Delta.Regression {
			t.Errorf("vmm_setup at %d vCPUs called a regression: %+v", n, c.Delta)
		}
	}
	// secondaries: absent at 1 vCPU, present and growing above.
	if an.Has(1, "A", runsummary.PhaseSecondaries) {
		t.Error("secondaries at 1 vCPU")
	}
	c4, _ := an.Cell(4, "A", runsummary.PhaseSecondaries)
	c8, _ := an.Cell(8, "A", runsummary.PhaseSecondaries)
	if !(c4.Median > 0 && c8.Median > c4.Median) {
		t.Errorf("secondaries 4 vCPUs %v, 8 vCPUs %v", c4.Median, c8.Median)
	}
	if len(an.Failed) != 1 || an.Failed[0].Seq != 99 {
		t.Errorf("failed runs %+v", an.Failed)
	}
	if c, _ := an.Cell(4, "slow", runsummary.PhaseTotal); c.N != 5 {
		t.Errorf("the failed run entered the statistics: n=%d", c.N)
	}
	if want := []string{runsummary.PhaseVMMSetup, runsummary.PhaseBootToSMP, runsummary.PhaseSecondaries, runsummary.PhaseKernelToUser, runsummary.PhaseTotal}; !slices.Equal(an.Phases, want) {
		t.Errorf("phases %v, want %v", an.Phases, want)
	}
	if an.Absent[runsummary.PhaseSecondariesConsole] == "" || an.Absent[runsummary.PhaseSMPConsole] == "" {
		t.Errorf("absent phases not explained: %v", an.Absent)
	}

	// process_cpu is reported with its significance, never a regression.
	cpuRuns := synthRuns(vs, 5, 3, func(v string, cpus int, rng *rand.Rand) map[string]int64 {
		p := bootPhases(nil)(v, cpus, rng)
		p[PhaseProcessCPU] = p[runsummary.PhaseTotal]
		if v == "slow" {
			p[PhaseProcessCPU] *= 2
		}
		return p
	})
	an2, _ := Analyze(vs, cpuRuns, Options{Alpha: 0.05, FailOnRegression: &th})
	if c, _ := an2.Cell(1, "slow", PhaseProcessCPU); c.Delta == nil || !c.Delta.Significant || c.Delta.Regression {
		t.Errorf("process_cpu twice as high: %+v, want significant and no regression", c.Delta)
	}

	// Without --fail-on-regression nothing is a regression; with B as the
	// baseline the signs flip.
	an, _ = Analyze(vs, runs, Options{Alpha: 0.05, Baseline: "slow"})
	if len(an.Regressions) != 0 {
		t.Errorf("regressions without a threshold: %+v", an.Regressions)
	}
	if c, _ := an.Cell(1, "A", runsummary.PhaseTotal); c.Delta == nil || c.Delta.Pct >= 0 || c.Delta.Baseline != "slow" {
		t.Errorf("A vs slow: %+v", c.Delta)
	}
	if _, err := Analyze(vs, runs, Options{Alpha: 0.05, Baseline: "nope"}); err == nil {
		t.Error("unknown baseline accepted")
	}
	if _, err := Analyze(vs, runs, Options{Alpha: 1.5}); err == nil {
		t.Error("alpha 1.5 accepted")
	}
	an, _ = Analyze(vs, runs, Options{Alpha: 0.05, Phases: []string{runsummary.PhaseTotal}})
	if !slices.Equal(an.Phases, []string{runsummary.PhaseTotal}) {
		t.Errorf("--phases total: %v", an.Phases)
	}
}

func TestAnalyzeNotes(t *testing.T) {
	vs, _ := BuildVariants(baseSettings(), []VariantSpec{{"B", nil}})
	runs := synthRuns(vs, 3, 2, bootPhases(nil))
	delete(runs[0].PhasesNS, runsummary.PhaseKernelToUser)
	an, err := Analyze(vs, runs, Options{Alpha: 0.05})
	if err != nil {
		t.Fatal(err)
	}
	notes := strings.Join(an.Notes, "\n")
	if !strings.Contains(notes, "at least 4 runs") || !strings.Contains(notes, "observed in 2 of 3") {
		t.Errorf("notes:\n%s", notes)
	}
}

// ParseResult moves the profile out of the summary and keeps the rest as
// mvm run wrote it.
func TestParseResult(t *testing.T) {
	data := []byte(`{"exit":"poweroff","psci":"user","cpus":3,"reboots":0,
		"phases_ns":{"vmm_setup":10,"boot_to_smp":100,"secondaries":50,"kernel_to_user":400,"total":500,"smp_console":170},
		"cpu_on_ns":[-1,110,120],"entered_ns":[10,115,160],"marks":[{"code":65,"at_ns":410}],
		"console_marks_ns":{"smp":180,"init":300,"never":-1},
		"memory":{"rss_bytes":1,"guest_resident_bytes":1,"overhead_bytes":0},"unmapped_accesses":0,
		"profile":{"sources":[],"rows":[{"source":"userspace","vcpu":"total","reason":"MMIO/uart","count":3}]}}`)
	sum, prof, err := ParseResult(data)
	if err != nil {
		t.Fatal(err)
	}
	if prof == nil || len(prof.Rows) != 1 || prof.Rows[0].Reason != "MMIO/uart" || prof.Rows[0].Count != 3 || sum.Profile != nil {
		t.Errorf("profile %+v, summary's %+v", prof, sum.Profile)
	}
	if sum.CPUs != 3 || len(sum.PhasesNS) != 6 || sum.PhasesNS[runsummary.PhaseSMPConsole] != 170 || sum.ConsoleNS["init"] != 300 {
		t.Errorf("summary %+v", sum)
	}
	if _, _, err := ParseResult([]byte(`{"nope":1}`)); err == nil {
		t.Error("a JSON file without phases accepted")
	}
	if _, _, err := ParseResult([]byte(`not json`)); err == nil {
		t.Error("garbage accepted")
	}
}
