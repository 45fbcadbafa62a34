//go:build linux && arm64

package integration

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/perf/benchfmt"

	"github.com/mvm-dev/mvm/bench"
	"github.com/mvm-dev/mvm/internal/labclock"
	"github.com/mvm-dev/mvm/runsummary"
)

// The lab boots Linux in 8-30 s (nested KVM under emulation), so these
// benches are as small as their claims allow: the Mann-Whitney U test
// needs 4 runs per variant to reach p < 0.05 at all.

// benchRun runs mvm bench with args plus --json (returned as the report)
// and --console-dir; each boot gets at most runTimeout, so that a hung
// boot is reported as a failed run instead of ending the test. The
// console of every failed run is logged.
func benchRun(t *testing.T, timeout, runTimeout time.Duration, args ...string) (result, *bench.Report, string) {
	t.Helper()
	dir := t.TempDir()
	js := filepath.Join(dir, "report.json")
	con := filepath.Join(dir, "console")
	own := []string{"--json", js, "--console-dir", con, "--timeout", runTimeout.String()}
	// Before a command to time (-- CMD), which takes everything after --.
	if i := slices.Index(args, "--"); i >= 0 {
		own = append(own, args[i:]...)
		args = args[:i:i]
	}
	args = append(append([]string{"bench"}, args...), own...)
	r := mvm(t, timeout, args...)
	rep, err := bench.ReadJSONFile(js)
	if err != nil {
		t.Fatal(err)
	}
	logWall(t, rep)
	for _, f := range rep.Analysis.Failed {
		logs, _ := filepath.Glob(filepath.Join(con, "run-"+fmt.Sprintf("%03d", f.Seq)+"-*.log"))
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			t.Logf("run #%d failed (%s); its console:\n%s", f.Seq, f.Error, b)
		}
	}
	return r, rep, js
}

// logTable logs the report as mvm bench's table (re-rendered, no boots).
func logTable(t *testing.T, report string, args ...string) {
	t.Helper()
	r := mvm(t, time.Minute, append([]string{"bench", "--from", report}, args...)...)
	t.Logf("mvm bench --from %s %s:\n%s", filepath.Base(report), strings.Join(args, " "), r.stdout)
}

// logWall logs how long each run took, for the lab's time budget.
func logWall(t *testing.T, rep *bench.Report) {
	t.Helper()
	var b strings.Builder
	for _, r := range rep.Runs {
		b.WriteString(" " + time.Duration(r.PhasesNS[bench.PhaseProcessWall]).Round(100*time.Millisecond).String())
	}
	t.Logf("wall per run:%s; bench %v", b.String(), rep.Finished.Sub(rep.Started).Round(time.Second))
}

// parseBenchstat reads Go benchmark format as benchstat does (the lab has
// no Go toolchain to run benchstat itself; a host unit test runs it).
func parseBenchstat(t *testing.T, out string) map[string][]float64 {
	t.Helper()
	got := map[string][]float64{}
	rd := benchfmt.NewReader(strings.NewReader(out), "stdout")
	for rd.Scan() {
		switch rec := rd.Result().(type) {
		case *benchfmt.Result:
			name := string(rec.Name.Full())
			for _, v := range rec.Values {
				if v.Unit == "sec/op" {
					got[name] = append(got[name], v.Value)
				}
			}
		case *benchfmt.SyntaxError:
			t.Errorf("benchfmt: %v", rec)
		}
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// abPlan is how TestBenchAB samples: runs per variant and how much longer
// B's command sleeps. In the instruction-time lab a guest's sleep costs no
// host time (-icount sleep=off) and a command-mode boot repeats to about
// 1%, so four runs a side (the fewest with which the Mann-Whitney U test
// can reach p < 0.05 at all) and 1 s more separate cleanly. The command
// phase scattered more than the boot phases there before command mode
// skipped the crypto self-tests (A's 100 ms sleep took 386-732 ms, and B
// sleeping 300 ms longer gave p = 0.343; docs/boot-phases.md); since, it
// repeats to ±1%. In the wall lab a 1-vCPU boot takes 8-16 s, ranges over
// ±30% with an occasional 2x outlier (8.9-23.7 s seen), and drifts by
// seconds when other work shares the host: B sleeps 6 s longer and each
// variant runs eight times (with four or six a side one A run slower than
// every B run lifted p to 0.057 and 0.065).
func abPlan() (runs int, delay time.Duration) {
	if labclock.Name() == labclock.Insn {
		return 4, time.Second
	}
	return 8, 6 * time.Second
}

// TestBenchAB: one command-mode bench (mvm bench -- CMD on a busybox tree
// given as --rootfs) of three variants answers the regression runner's
// questions for the boot phases and the command phase at once. A2, the
// same configuration as A, is no regression in any phase and its
// benchstat output parses; B's command sleeps longer (it reads its delay
// from the kernel command line B appends to), so B is slower in command
// and total, about the delay, and not in vmm_setup or kernel_to_user, and
// --fail-on-regression makes that exit status 1, in the table, the JSON
// and the JUnit report. Looked at from B, the baseline is faster: not a
// regression. (One bench instead of an A/A, a boot A/B and a command A/B:
// A's runs serve all three, and every boot is a command-mode boot.)
func TestBenchAB(t *testing.T) {
	tree := busyboxTree(t)
	runs, delay := abPlan()
	base := 100 * time.Millisecond
	t.Logf("%s clock: %d runs a variant, B's command sleeps %v longer", labclock.Name(), runs, delay)
	script := fmt.Sprintf(`d=%g; grep -q mvmtest.longer /proc/cmdline && d=%g; sleep $d`, base.Seconds(), (base + delay).Seconds())
	cmdArgs := append(commandArgs(t)[1:], "--rootfs", tree)
	r, rep, js := benchRun(t, 20*time.Minute, 3*time.Minute, append(cmdArgs,
		"--runs", strconv.Itoa(runs), "--warmup", "0",
		"--variant", "A2:label=again",
		"--variant", fmt.Sprintf("B:cmdline-append=mvmtest.longer,label=+%v", delay),
		"--fail-on-regression", "5",
		// The userspace and stats profile (no tracepoints: cheap) feeds the
		// bench report's exit-profile differences.
		"--profile", "--profile-sources", "userspace,kvm_stats", "--profile-out", os.DevNull,
		"--", "/bin/sh", "-c", script)...)
	t.Logf("stdout:\n%s", r.stdout)
	reportFixture(t, js, "bench-delay.json")
	checkBenchReport(t, js)
	if r.code != 1 {
		t.Errorf("A/A2/B bench with a %v slower command in B: exit status %d, want 1\nstderr:\n%s", delay, r.code, r.stderr)
	}
	if len(rep.Analysis.Failed) != 0 {
		t.Errorf("failed runs %+v", rep.Analysis.Failed)
	}
	if len(rep.Config.Command) != 3 || rep.Config.Command[2] != script {
		t.Errorf("the report's command is %q", rep.Config.Command)
	}
	phases := []string{runsummary.PhaseVMMSetup, runsummary.PhaseKernelToUser, runsummary.PhaseCommand, runsummary.PhaseTotal}

	// A/A: no regression, every phase present with all its runs.
	for _, p := range phases {
		c, ok := rep.Analysis.Cell(1, "A2", p)
		if !ok || c.N != runs || c.Delta == nil {
			t.Errorf("A2 %s: %+v", p, c)
			continue
		}
		t.Logf("A/A %s: delta %+.1f%%, p=%.3f, significant %v", p, c.Delta.Pct, c.Delta.P, c.Delta.Significant)
	}
	for _, g := range rep.Analysis.Regressions {
		if g.Variant == "A2" {
			t.Errorf("A/A regression: %+v", g)
		}
	}

	// A/B: B regresses where the delay is, and only there.
	for _, p := range []string{runsummary.PhaseCommand, runsummary.PhaseTotal} {
		c, ok := rep.Analysis.Cell(1, "B", p)
		a, okA := rep.Analysis.Cell(1, "A", p)
		if !ok || !okA || c.Delta == nil || a.N != runs || c.N != runs {
			t.Errorf("B %s: A %+v, B %+v: want %d runs each and B's delta", p, a, c, runs)
			continue
		}
		diff := time.Duration(c.Median - a.Median)
		t.Logf("B %s: A %v, B %v (%+.1f%%, %v), p=%.3f", p, time.Duration(a.Median).Round(time.Millisecond),
			time.Duration(c.Median).Round(time.Millisecond), c.Delta.Pct, diff.Round(time.Millisecond), c.Delta.P)
		if !c.Delta.Significant || !c.Delta.Regression || c.Delta.Pct <= 0 {
			t.Errorf("B %s: %+v, want a significant regression", p, c.Delta)
		}
		// The difference of the medians should be close to the delay
		// (run-to-run noise aside).
		if diff < delay/2 || diff > delay*2 {
			t.Errorf("B %s: medians differ by %v, want about %v", p, diff, delay)
		}
	}
	// The command phase holds at least the sleep itself.
	if a, ok := rep.Analysis.Cell(1, "A", runsummary.PhaseCommand); !ok || time.Duration(a.Median) < base {
		t.Errorf("A's command phase %v is shorter than its %v sleep", time.Duration(a.Median), base)
	}
	for _, p := range []string{runsummary.PhaseVMMSetup, runsummary.PhaseKernelToUser} {
		if c, ok := rep.Analysis.Cell(1, "B", p); !ok || c.Delta == nil || c.Delta.Regression {
			t.Errorf("B %s: %+v, want present and no regression", p, c.Delta)
		}
	}
	for _, g := range rep.Analysis.Regressions {
		if g.Variant == "B" && g.Phase != runsummary.PhaseCommand && g.Phase != runsummary.PhaseTotal && g.Phase != bench.PhaseProcessWall && g.Phase != bench.PhaseProcessCPU {
			t.Errorf("regression in an unaffected phase: %+v", g)
		}
	}
	if !strings.Contains(r.stdout, "REGRESSIONS beyond 5%") {
		t.Error("the table does not list the regressions")
	}
	if !strings.Contains(r.stdout, "\ncommand [ms]: ") {
		t.Error("the table has no command phase")
	}

	// Proof that benchstat can read it: the benchmark format parser
	// benchstat uses accepts every line, with one sample per run.
	bs := mvm(t, time.Minute, "bench", "--from", js, "--format", "benchstat")
	got := parseBenchstat(t, bs.stdout)
	for _, v := range []string{"A", "A2", "B"} {
		for _, p := range phases {
			name := "Boot/cpus=1/variant=" + v + "/phase=" + p
			if len(got[name]) != runs {
				t.Errorf("%s: %d samples in the benchstat output, want %d", name, len(got[name]), runs)
			}
		}
	}
	if _, ok := got["Boot/cpus=1/variant=A/phase=secondaries"]; ok {
		t.Error("secondaries with 1 vCPU in the benchstat output")
	}

	// The CI form of the same verdict: B's regressed phases are failed
	// JUnit test cases, A2's pass.
	junit := filepath.Join(t.TempDir(), "boot.xml")
	if r := mvm(t, time.Minute, "bench", "--from", js, "--fail-on-regression", "5", "--junit", junit); r.code != 1 {
		t.Errorf("--junit: exit status %d, want 1\n%s", r.code, r.stderr)
	}
	failed := junitFailures(t, junit)
	for _, p := range []string{runsummary.PhaseCommand, runsummary.PhaseTotal} {
		if !failed["mvm-bench.B "+p+" 1 vCPU"] {
			t.Errorf("JUnit: B %s is not a failed test case (failed: %v)", p, failed)
		}
	}
	for k := range failed {
		if strings.HasPrefix(k, "mvm-bench.A2 ") {
			t.Errorf("JUnit: A/A case %s failed", k)
		}
	}

	// The same boots with B as the baseline: A is faster, which is no
	// regression (exit 0), though significant with a negative delta.
	r = mvm(t, time.Minute, "bench", "--from", js, "--baseline", "B", "--fail-on-regression", "5", "--format", "json")
	if r.code != 0 {
		t.Errorf("--baseline B: exit status %d, want 0\n%s", r.code, r.stderr)
	}
	var back bench.Report
	if err := json.Unmarshal([]byte(r.stdout), &back); err != nil {
		t.Fatal(err)
	}
	c, _ := back.Analysis.Cell(1, "A", runsummary.PhaseCommand)
	if c.Delta == nil || !c.Delta.Significant || c.Delta.Regression || c.Delta.Pct >= 0 {
		t.Errorf("A vs B command: %+v, want significant, faster, no regression", c.Delta)
	}
	logTable(t, js, "--baseline", "B", "--phases", "vmm_setup,kernel_to_user,command,total")
}

// TestBenchCPUs: a bench over 1, 4 and 8 vCPUs fills every cell;
// secondaries is absent with 1 vCPU and grows with the count (in the wall
// lab medians of three runs: single runs were seen out of order, 194 ms for
// 4 vCPUs against 128 ms for 8).
func TestBenchCPUs(t *testing.T) {
	kernel := env(t, "MVM_LINUX")
	initrd := testInitrd(t)
	// In instruction time a boot repeats to about 1% (secondaries 1.5 ms
	// for 4 vCPUs, 8.0 ms for 8): one run a count.
	runs := "3"
	if labclock.Name() == labclock.Insn {
		runs = "1"
	}
	r, rep, _ := benchRun(t, 12*time.Minute, 3*time.Minute, "--kernel", kernel, "--initrd", initrd, "--memory", "512M",
		"--psci", "user", "--cpus", "1,4,8", "--runs", runs, "--warmup", "0", "--append", noCryptoTests)
	t.Logf("stdout:\n%s", r.stdout)
	if r.code != 0 {
		t.Fatalf("exit status %d\nstderr:\n%s", r.code, r.stderr)
	}
	an := &rep.Analysis
	for _, n := range []int{1, 4, 8} {
		for _, p := range []string{runsummary.PhaseVMMSetup, runsummary.PhaseKernelToUser, runsummary.PhaseTotal} {
			if !an.Has(n, "A", p) {
				t.Errorf("%d vCPUs: no %s", n, p)
			}
		}
	}
	if an.Has(1, "A", runsummary.PhaseSecondaries) || an.Has(1, "A", runsummary.PhaseBootToSMP) {
		t.Error("secondaries or boot_to_smp with 1 vCPU")
	}
	s4, ok4 := an.Cell(4, "A", runsummary.PhaseSecondaries)
	s8, ok8 := an.Cell(8, "A", runsummary.PhaseSecondaries)
	if !ok4 || !ok8 || s4.Median <= 0 || s8.Median <= s4.Median {
		t.Errorf("secondaries: 4 vCPUs %v, 8 vCPUs %v; want present and growing",
			time.Duration(s4.Median), time.Duration(s8.Median))
	}
	t.Logf("secondaries: 4 vCPUs %v, 8 vCPUs %v", time.Duration(s4.Median), time.Duration(s8.Median))
	// With quiet the kernel does not print its smp line: the console view
	// of secondaries is absent, and the report says why.
	if an.Absent[runsummary.PhaseSecondariesConsole] == "" || !strings.Contains(r.stdout, "secondaries_console: needs") {
		t.Errorf("secondaries_console's absence not explained: %v", an.Absent)
	}
}

// TestBenchBadInput: bad arguments exit 2 with one line; a variant whose
// kernel fails (one not bootable at all, one that never finishes) is
// reported per run while the bench goes on, and the exit status says so.
func TestBenchBadInput(t *testing.T) {
	hello := payload(t, "hello.bin")
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown key", []string{"bench", "--kernel", hello, "--variant", "B:frobnicate=1"}, `unknown key "frobnicate"`},
		{"zero runs", []string{"bench", "--kernel", hello, "--runs", "0"}, "--runs 0"},
		{"bad cpus", []string{"bench", "--kernel", hello, "--cpus", "1,x"}, "--cpus"},
	} {
		t.Run(c.name, func(t *testing.T) {
			oneLineError(t, mvm(t, 30*time.Second, c.args...), 2, c.want)
		})
	}

	t.Run("failing variants", func(t *testing.T) {
		// Variants whose runs fail at run time (a guest fault, a hang); a
		// variant that is wrong before it boots is refused up front instead
		// (cmd/mvm TestBenchChecksVariantsBeforeBooting).
		r, rep, _ := benchRun(t, 3*time.Minute, 5*time.Second, "--kernel", hello, "--runs", "2", "--warmup", "0",
			"--variant", "broken:kernel="+payload(t, "badmmio.bin"), "--variant", "hang:kernel="+payload(t, "spin.bin"))
		t.Logf("stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
		if r.code != 3 {
			t.Errorf("exit status %d, want 3 (runs failed)", r.code)
		}
		if len(rep.Runs) != 6 {
			t.Fatalf("%d runs, want 6: the bench must go on after a failure", len(rep.Runs))
		}
		var seqs []int
		for _, f := range rep.Analysis.Failed {
			seqs = append(seqs, f.Seq)
		}
		if !slices.Equal(seqs, []int{2, 3, 5, 6}) {
			t.Errorf("failed runs %v, want [2 3 5 6]", seqs)
		}
		for _, want := range []string{"#2 (broken, 1 vCPU): exit status 1: mvm:", "cannot emulate",
			"#3 (hang, 1 vCPU): timed out after 5s"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("table lacks %q", want)
			}
		}
		if !strings.Contains(r.stderr, "mvm: 4 run(s) failed: #2 #3 #5 #6") {
			t.Errorf("stderr does not say which runs failed:\n%s", r.stderr)
		}
		if c, ok := rep.Analysis.Cell(1, "A", runsummary.PhaseTotal); !ok || c.N != 2 {
			t.Errorf("A's runs: %+v", c)
		}
		// The hung run was stopped with SIGTERM, and mvm still wrote its
		// result.
		if s := rep.Runs[2].Summary; s == nil || s.Exit != runsummary.ExitStopped {
			t.Errorf("the stopped run's result: %+v", s)
		}
	})
}

// junitFailures reads a JUnit XML file and returns its failed test cases as
// "classname name".
func junitFailures(t *testing.T, path string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Suites []struct {
			Cases []struct {
				Classname string    `xml:"classname,attr"`
				Name      string    `xml:"name,attr"`
				Failure   *struct{} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	failed := map[string]bool{}
	for _, s := range doc.Suites {
		for _, c := range s.Cases {
			if c.Failure != nil {
				failed[c.Classname+" "+c.Name] = true
			}
		}
	}
	return failed
}
