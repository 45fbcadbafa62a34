package bench

import (
	"bytes"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/perf/benchfmt"

	"github.com/mvm-dev/mvm/runsummary"
)

// synthReport is a finished bench over 1,4,8 vCPUs: A, A' 36% slower in
// kernel_to_user, B 35% faster, and one failed run.
func synthReport(t *testing.T, threshold float64) *Report {
	t.Helper()
	base := baseSettings()
	base.CPUs = []int{1, 4, 8}
	base.Label = "7.3-rc2"
	vs, err := BuildVariants(base, []VariantSpec{
		{"A'", []Override{{"cmdline-append", "cpuhp.parallel=0"}, {"label", "serial"}}},
		{"B", []Override{{"kernel", "Image.parallel"}, {"label", "parallel"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	runs := synthRuns(vs, 5, 7, bootPhases(map[string]float64{"A": 0, "A'": 290, "B": -280}))
	// The last boot of B at 8 vCPUs failed.
	last := &runs[len(runs)-1]
	if last.Variant != "B" || last.CPUs != 8 {
		t.Fatalf("the schedule ends with %s at %d vCPUs", last.Variant, last.CPUs)
	}
	last.Status, last.ExitCode, last.Error, last.PhasesNS = StatusFailed, 1, "exit status 1: mvm: guest stopped: vCPU 0 fault", nil
	r := &Report{
		Format:  ReportFormat,
		Started: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Finished: time.Date(2026, 1, 2, 3, 14, 5, 0, time.UTC),
		Host:   Host{OS: "linux", Arch: "arm64", Kernel: "6.12.43", CPUs: 2},
		Config: Config{Runs: 5, Quiet: true, Timeout: "10m0s", Variants: vs},
		Runs:   runs,
	}
	if err := r.Reanalyze(Options{Alpha: 0.05, FailOnRegression: &threshold}); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestWriteTable(t *testing.T) {
	r := synthReport(t, 10)
	var b bytes.Buffer
	if err := WriteTable(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	t.Logf("\n%s", out)
	for _, want := range []string{
		"kernel_to_user [ms]: first KVM_RUN -> userspace boot marker",
		"ncpu", "A 7.3-rc2", "A' serial", "B parallel",
		"secondaries [ms]",
		"failed runs (1):", "#45 (B, 8 vCPUs): exit status 1: mvm: guest stopped",
		"REGRESSIONS beyond 10%",
		"kernel_to_user, 1 vCPU, A'",
		"not measured:", "secondaries_console: needs CPU_ON",
		" n=4 ", // the cell with the failed run
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q", want)
		}
	}
	// The 1-vCPU row of secondaries is "-", not 0.
	sec := out[strings.Index(out, "\nsecondaries [ms]"):]
	sec = sec[:strings.Index(sec[1:], "\n\n")+1]
	for _, line := range strings.Split(sec, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "1" && (len(f) != 4 || f[1] != "-") {
			t.Errorf("secondaries at 1 vCPU: %q", line)
		}
	}
	// A regression in A' is marked, B's improvement is not.
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "(-") && strings.HasSuffix(strings.TrimSpace(line), "!") && strings.Count(line, "!") == 1 && !strings.Contains(line, "(+") {
			t.Errorf("an improvement is marked as a regression: %q", line)
		}
	}
}

func TestWriteJSONRoundTrip(t *testing.T) {
	r := synthReport(t, 10)
	var b bytes.Buffer
	if err := WriteJSON(&b, r); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSON(&b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Runs, r.Runs) || !reflect.DeepEqual(back.Config, r.Config) {
		t.Error("runs or config differ after a JSON round trip")
	}
	if len(back.Analysis.Cells) != len(r.Analysis.Cells) || len(back.Analysis.Regressions) == 0 {
		t.Errorf("analysis differs: %d cells, %d regressions", len(back.Analysis.Cells), len(back.Analysis.Regressions))
	}
	// Re-analysing with B as the baseline: A is then slower than B.
	if err := back.Reanalyze(Options{Alpha: 0.05, Baseline: "B"}); err != nil {
		t.Fatal(err)
	}
	if c, _ := back.Analysis.Cell(1, "A", runsummary.PhaseKernelToUser); c.Delta == nil || c.Delta.Pct <= 0 {
		t.Errorf("A vs B: %+v", c.Delta)
	}
	for _, bad := range []string{`{}`, `{"format":"other"}`, `{"format":"mvm-bench/1"}`, `[`} {
		if _, err := ReadJSON(strings.NewReader(bad)); err == nil {
			t.Errorf("ReadJSON(%s) succeeded", bad)
		}
	}
}

// parseBenchfmt reads Go benchmark format the way benchstat does.
func parseBenchfmt(t *testing.T, data []byte) map[string][]float64 {
	t.Helper()
	got := map[string][]float64{}
	rd := benchfmt.NewReader(bytes.NewReader(data), "bench.txt")
	for rd.Scan() {
		switch rec := rd.Result().(type) {
		case *benchfmt.Result:
			if len(rec.Values) != 1 || rec.Iters != 1 {
				t.Fatalf("result %s: %d values, %d iterations", rec.Name.Full(), len(rec.Values), rec.Iters)
			}
			got[string(rec.Name.Full())] = append(got[string(rec.Name.Full())], rec.Values[0].Value)
		case *benchfmt.SyntaxError:
			t.Fatalf("benchfmt: %v", rec)
		}
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestWriteBenchstatParses(t *testing.T) {
	r := synthReport(t, 10)
	var b bytes.Buffer
	if err := WriteBenchstat(&b, r); err != nil {
		t.Fatal(err)
	}
	got := parseBenchfmt(t, b.Bytes())
	name := "Boot/cpus=4/variant=A'/phase=kernel_to_user"
	if len(got[name]) != 5 {
		t.Fatalf("%s: %d samples, want 5 (names: %v)", name, len(got[name]), keys(got))
	}
	// benchfmt tidies ns/op into sec/op.
	c, _ := r.Analysis.Cell(4, "A'", runsummary.PhaseKernelToUser)
	for i, v := range got[name] {
		if want := float64(c.Samples[i]) / 1e9; math.Abs(v-want) > 1e-12 {
			t.Errorf("sample %d = %v, want %v", i, v, want)
		}
	}
	if _, ok := got["Boot/cpus=1/variant=A/phase=secondaries"]; ok {
		t.Error("secondaries at 1 vCPU written")
	}
	if n := len(got["Boot/cpus=8/variant=B/phase=total"]); n != 4 {
		t.Errorf("B at 8 vCPUs: %d samples, want 4 (one run failed)", n)
	}
}

func keys(m map[string][]float64) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestBenchstatAccepts runs the real benchstat (golang.org/x/perf/cmd/
// benchstat, a tool of this module) on the formatter's output.
func TestBenchstatAccepts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds benchstat")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build benchstat: %v", err)
	}
	r := synthReport(t, 10)
	path := filepath.Join(t.TempDir(), "boot.txt")
	var b bytes.Buffer
	if err := WriteBenchstat(&b, r); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(goTool, "run", "golang.org/x/perf/cmd/benchstat", "-col", "/variant", path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("benchstat: %v\n%s", err, out)
	}
	t.Logf("benchstat:\n%s", out)
	s := string(out)
	for _, want := range []string{"kernel_to_user", "secondaries", "A'", "B", "sec/op", "p="} {
		if !strings.Contains(s, want) {
			t.Errorf("benchstat output lacks %q", want)
		}
	}
	if strings.Contains(s, "parsing") || strings.Contains(s, "syntax") {
		t.Errorf("benchstat reported errors:\n%s", s)
	}
}

// TestWriteTableQuietNote: the header notes "(+ quiet)" only where mvm
// bench added it, not where the baseline's command line already has it.
func TestWriteTableQuietNote(t *testing.T) {
	for _, c := range []struct {
		cmdline string
		want    bool
	}{
		{"console=ttyS0", true},
		{"console=ttyS0 quiet", false},
	} {
		r := synthReport(t, 10)
		r.Config.Variants[0].Settings.Cmdline = c.cmdline
		var b bytes.Buffer
		if err := WriteTable(&b, r); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(b.String(), "(+ quiet)"); got != c.want {
			t.Errorf("cmdline %q: header notes (+ quiet): %v, want %v", c.cmdline, got, c.want)
		}
	}
}
