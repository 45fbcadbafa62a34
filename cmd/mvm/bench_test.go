package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mvm-dev/mvm/bench"
	"github.com/mvm-dev/mvm/runsummary"
)

// fakeEnv makes this test binary act as mvm: `run` is a fake boot that
// needs no KVM (so mvm bench's real exec path runs on any host), every
// other command is mvm's real main. mvm bench runs its own executable,
// which in these tests is this binary. init, not TestMain, so that the
// fake takes over before the testing package parses flags.
const fakeEnv = "MVM_TEST_FAKE"

func init() {
	if os.Getenv(fakeEnv) == "" {
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "run" {
		os.Exit(fakeRun(os.Args[2:]))
	}
	mainWith(anyHost)
	os.Exit(0)
}

// anyHost is the host check of the fake mvm: its boots run anywhere.
func anyHost() error { return nil }

// fakeRun imitates `mvm run` of the Linux test guest: it writes a
// --result-json whose phases follow the arguments. kernel_to_user is
// 100 ms plus the guest's mvm.delay_ms (the last one on the command line
// wins, as in guest.TestInit); secondaries exist with more than one vCPU
// and PSCI in userspace, 1 ms per secondary; the smp console line only
// without quiet, and its phases then as mvm run derives them. Kernels
// named "fail", "crash" and "hang" misbehave. With a command after --
// (command mode) the delay goes to the command phase instead, 50 ms plus
// mvm.delay_ms, and a command "exit N" fails with status N.
func fakeRun(args []string) int {
	var command []string
	if i := slices.Index(args, "--"); i >= 0 {
		args, command = args[:i], args[i+1:]
	}
	if len(command) == 2 && command[0] == "exit" {
		fmt.Fprintln(os.Stderr, "boom")
		n, _ := strconv.Atoi(command[1])
		return n
	}
	opt := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := strings.TrimPrefix(args[i], "--")
		if k, v, ok := strings.Cut(a, "="); ok {
			opt[k] = v
		} else if i+1 < len(args) {
			opt[a] = args[i+1]
			i++
		}
	}
	kernel := filepath.Base(opt["kernel"])
	switch kernel {
	case "fail":
		fmt.Fprintf(os.Stderr, "mvm: kernel %s is a text file, not an arm64 Image or flat binary\n", opt["kernel"])
		return 1
	case "hang":
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
		select {
		case s := <-sigs:
			writeFake(opt["result-json"], runsummary.Summary{Exit: runsummary.ExitStopped, PhasesNS: map[string]int64{"vmm_setup": 1e6}})
			return 128 + int(s.(syscall.Signal))
		case <-time.After(time.Minute):
			return 1
		}
	}
	cmdline := opt["cmdline"] + " " + opt["append"]
	delay := 0.0
	if m := regexp.MustCompile(`.*mvm\.delay_ms=(\d+)`).FindStringSubmatch(cmdline); m != nil {
		delay, _ = strconv.ParseFloat(m[1], 64)
	}
	cpus, _ := strconv.Atoi(opt["cpus"])
	noise := func(ms float64) int64 { return int64(ms * 1e6 * (1 + 0.02*rand.NormFloat64())) }
	s := runsummary.Summary{Exit: runsummary.ExitPowerOff, PSCI: runsummary.PSCIUser, CPUs: cpus, PhasesNS: map[string]int64{}, ConsoleNS: map[string]int64{}}
	if opt["psci"] == "kernel" {
		s.PSCI = runsummary.PSCIKernel
	}
	setup := noise(5)
	s.EnteredNS = append(s.EnteredNS, setup)
	s.CPUOnNS = append(s.CPUOnNS, -1)
	s.PhasesNS[runsummary.PhaseVMMSetup] = setup
	if cpus > 1 && s.PSCI == runsummary.PSCIUser {
		on := setup + noise(30)
		for i := 1; i < cpus; i++ {
			s.CPUOnNS = append(s.CPUOnNS, on+int64(i-1)*1e6)
			s.EnteredNS = append(s.EnteredNS, on+int64(i)*1e6)
		}
		s.PhasesNS[runsummary.PhaseBootToSMP] = on - setup
		s.PhasesNS[runsummary.PhaseSecondaries] = int64(cpus-1) * 1e6
		if !strings.Contains(" "+cmdline+" ", " quiet ") {
			s.ConsoleNS[runsummary.ConsoleMarkSMP] = on + int64(cpus)*1e6
		}
	}
	k2u, cmd := noise(100+delay), int64(0)
	if len(command) > 0 {
		k2u, cmd = noise(100), noise(50+delay)
		s.PhasesNS[runsummary.PhaseCommand] = cmd
	}
	s.PhasesNS[runsummary.PhaseKernelToUser] = k2u
	s.PhasesNS[runsummary.PhaseTotal] = setup + k2u + cmd + noise(2)
	s.MarksNS = []runsummary.MarkSummary{{Code: 0x41, AtNS: setup + k2u}}
	// The console phases, as mvm run computes them from its moments.
	for k, v := range s.Moments().Phases() {
		s.PhasesNS[k] = v
	}
	if kernel == "crash" {
		s.Exit, s.Error = runsummary.ExitFault, "vCPU 0: unhandled exception"
		writeFake(opt["result-json"], s)
		fmt.Fprintln(os.Stderr, "mvm: guest stopped: vCPU 0: unhandled exception")
		return 1
	}
	if err := writeFake(opt["result-json"], s); err != nil {
		fmt.Fprintln(os.Stderr, "mvm:", err)
		return 1
	}
	return 0
}

func writeFake(path string, s runsummary.Summary) error {
	if path == "" {
		return nil
	}
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// fakeChildren makes the mvm processes mvm bench starts fake runs, and
// lets them exit at once under the race detector (which otherwise waits
// a second at exit for late race reports).
func fakeChildren(t *testing.T) {
	t.Setenv(fakeEnv, "1")
	t.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
}

// benchIn runs mvm with args in this process (its boots are fake runs)
// and returns stdout, stderr and the exit status main would use.
func benchIn(t *testing.T, args ...string) (string, int) {
	t.Helper()
	fakeChildren(t)
	root := newRootCmd(time.Now(), anyHost)
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs(args)
	err := root.Execute()
	code := 0
	if err != nil {
		code, _ = exitStatus(err)
	}
	if err != nil {
		t.Logf("mvm %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), code
}

func kernelFile(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	// A real flat arm64 binary: mvm bench checks each kernel before the
	// first boot; the fake runs go by the file's name.
	if err := os.WriteFile(p, arm64Payload(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBenchAA(t *testing.T) {
	k := kernelFile(t, "Image")
	js := filepath.Join(t.TempDir(), "aa.json")
	// The fake's phases are synthetic; process_wall and process_cpu are
	// real and, for processes of a few ms on a busy host, noisy enough to
	// separate by chance: the regression check leaves them out.
	out, code := benchIn(t, "bench", "--kernel", k, "--runs", "5", "--warmup", "0", "--variant", "A2:label=again",
		"--fail-on-regression", "10", "--phases", "vmm_setup,kernel_to_user,total", "--json", js)
	if code != 0 {
		t.Fatalf("A/A exit status %d\n%s", code, out)
	}
	t.Logf("\n%s", out)
	r := mustReadReport(t, js)
	if len(r.Runs) != 10 || len(r.Analysis.Regressions) != 0 || len(r.Analysis.Failed) != 0 {
		t.Errorf("%d runs, regressions %+v, failed %+v", len(r.Runs), r.Analysis.Regressions, r.Analysis.Failed)
	}
	for i, run := range r.Runs {
		if want := []string{"A", "A2"}[i%2]; run.Variant != want {
			t.Errorf("run %d is %s, want %s (interleaved)", i+1, run.Variant, want)
		}
		if !strings.Contains(strings.Join(run.Args, " "), "--console none") || !strings.Contains(strings.Join(run.Args, " "), " quiet") {
			t.Errorf("run %d: not quiet: %q", i+1, run.Args)
		}
	}
	for _, p := range []string{runsummary.PhaseVMMSetup, runsummary.PhaseKernelToUser, runsummary.PhaseTotal} {
		c, ok := r.Analysis.Cell(1, "A2", p)
		if !ok || c.N != 5 || c.Delta == nil {
			t.Errorf("%s: %+v", p, c)
		}
	}
	if r.Analysis.Has(1, "A2", bench.PhaseProcessWall) {
		t.Error("--phases did not leave out process_wall")
	}
	for _, run := range r.Runs {
		if run.PhasesNS[bench.PhaseProcessWall] <= 0 || run.PhasesNS[bench.PhaseProcessCPU] <= 0 {
			t.Errorf("run %d: no process measures: %v", run.Seq, run.PhasesNS)
		}
	}
}

func TestBenchABRegression(t *testing.T) {
	k := kernelFile(t, "Image")
	js := filepath.Join(t.TempDir(), "ab.json")
	// A waits 50 ms in init, slow 80 ms, fast not at all.
	out, code := benchIn(t, "bench", "--kernel", k, "--append", "mvm.delay_ms=50", "--runs", "4", "--warmup", "1",
		"--variant", "slow:cmdline-append=mvm.delay_ms=80", "--variant", "fast:append=",
		"--fail-on-regression", "10", "--phases", "vmm_setup,kernel_to_user,total", "--json", js)
	t.Logf("\n%s", out)
	if code != 1 {
		t.Errorf("exit status %d, want 1 (regression)", code)
	}
	r := mustReadReport(t, js)
	for _, p := range []string{runsummary.PhaseKernelToUser, runsummary.PhaseTotal} {
		c, _ := r.Analysis.Cell(1, "slow", p)
		if c.Delta == nil || !c.Delta.Regression || c.Delta.Pct < 10 {
			t.Errorf("slow %s: %+v", p, c.Delta)
		}
		c, _ = r.Analysis.Cell(1, "fast", p)
		if c.Delta == nil || !c.Delta.Significant || c.Delta.Regression || c.Delta.Pct > -10 {
			t.Errorf("fast %s: %+v", p, c.Delta)
		}
	}
	for _, g := range r.Analysis.Regressions {
		if g.Variant != "slow" || (g.Phase != runsummary.PhaseKernelToUser && g.Phase != runsummary.PhaseTotal) {
			t.Errorf("unexpected regression %+v", g)
		}
	}
	if n := len(r.Runs); n != 15 || !r.Runs[0].Warmup || r.Runs[3].Warmup {
		t.Errorf("%d runs, first %+v", n, r.Runs[0])
	}
	if !strings.Contains(out, "REGRESSIONS beyond 10%") {
		t.Error("the table does not list the regressions")
	}

	// The same runs: without --fail-on-regression, status 0; with the
	// slow variant as the baseline, nothing is slower than it.
	syn := "vmm_setup,kernel_to_user,total"
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"bench", "--from", js}, 0},
		{[]string{"bench", "--from", js, "--fail-on-regression", "10", "--phases", syn}, 1},
		{[]string{"bench", "--from", js, "--fail-on-regression", "100", "--phases", syn}, 0},
		{[]string{"bench", "--from", js, "--fail-on-regression", "10", "--baseline", "slow", "--phases", syn}, 0},
		{[]string{"bench", "--from", js, "--fail-on-regression", "10", "--phases", "vmm_setup"}, 0},
	} {
		if _, code := benchIn(t, c.args...); code != c.code {
			t.Errorf("%s: exit status %d, want %d", strings.Join(c.args, " "), code, c.code)
		}
	}

	// --junit: the same verdict as the exit status, as failed test cases.
	junit := filepath.Join(t.TempDir(), "boot.xml")
	if _, code := benchIn(t, "bench", "--from", js, "--fail-on-regression", "10", "--phases", syn, "--junit", junit); code != 1 {
		t.Errorf("--junit: exit status %d, want 1", code)
	}
	data, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	var suites struct {
		Failures int `xml:"failures,attr"`
		Suites   []struct {
			Cases []struct {
				Classname string    `xml:"classname,attr"`
				Name      string    `xml:"name,attr"`
				Failure   *struct{} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(data, &suites); err != nil {
		t.Fatalf("--junit wrote no XML: %v", err)
	}
	var failed []string
	for _, s := range suites.Suites {
		for _, c := range s.Cases {
			if c.Failure != nil {
				failed = append(failed, c.Classname+" "+c.Name)
			}
		}
	}
	want := []string{"mvm-bench.slow kernel_to_user 1 vCPU", "mvm-bench.slow total 1 vCPU"}
	if !slices.Equal(failed, want) || suites.Failures != 2 {
		t.Errorf("--junit failed cases %q (failures=%d), want %q", failed, suites.Failures, want)
	}
}

func TestBenchCPUsAndFormats(t *testing.T) {
	k := kernelFile(t, "Image")
	dir := t.TempDir()
	out, code := benchIn(t, "bench", "--kernel", k, "--cpus", "1,4,8", "--runs", "2", "--warmup", "0",
		"--psci", "user", "--verbose-console", "--format", "benchstat", "--json", filepath.Join(dir, "r.json"),
		"--console-dir", filepath.Join(dir, "con"), "--marker", "init=Run /init", "--on-reset", "exit")
	if code != 0 {
		t.Fatalf("exit status %d\n%s", code, out)
	}
	for _, want := range []string{
		"BenchmarkBoot/cpus=4/variant=A/phase=secondaries 1 3000000 ns/op",
		"BenchmarkBoot/cpus=8/variant=A/phase=secondaries 1 7000000 ns/op",
		"BenchmarkBoot/cpus=8/variant=A/phase=secondaries_console ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("benchstat output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "cpus=1/variant=A/phase=secondaries") {
		t.Error("secondaries at 1 vCPU")
	}
	r := mustReadReport(t, filepath.Join(dir, "r.json"))
	for _, run := range r.Runs {
		if strings.Contains(strings.Join(run.Args, " "), "quiet") {
			t.Errorf("--verbose-console run has quiet: %q", run.Args)
		}
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "con", "run-*.log"))
	if len(logs) != 0 {
		// The fake run writes no console; mvm run would create them.
		t.Logf("console logs: %v", logs)
	}
	// Other mvm run flags go to every run as given.
	if a := strings.Join(r.Runs[0].Args, " "); !strings.Contains(a, "--marker=init=Run /init") || !strings.Contains(a, "--on-reset=exit") {
		t.Errorf("run flags not passed on: %q", r.Runs[0].Args)
	}
	if !strings.Contains(strings.Join(r.Runs[0].Args, " "), "--console file:"+filepath.Join(dir, "con", "run-001-A-cpus1.log")) {
		t.Errorf("--console-dir not passed: %q", r.Runs[0].Args)
	}
}

func TestBenchFailedRuns(t *testing.T) {
	dir := t.TempDir()
	k := kernelFile(t, "Image")
	js := filepath.Join(dir, "f.json")
	out, code := benchIn(t, "bench", "--kernel", k, "--runs", "2", "--warmup", "0",
		"--variant", "broken:kernel="+kernelFile(t, "fail"), "--variant", "crash:kernel="+kernelFile(t, "crash"),
		"--variant", "hang:kernel="+kernelFile(t, "hang"), "--timeout", "2s", "--json", js)
	t.Logf("\n%s", out)
	if code != benchExitRunsFailed {
		t.Errorf("exit status %d, want %d", code, benchExitRunsFailed)
	}
	r := mustReadReport(t, js)
	if len(r.Runs) != 8 {
		t.Fatalf("%d runs, want 8: the bench must go on after failures", len(r.Runs))
	}
	var failed []int
	for _, f := range r.Analysis.Failed {
		failed = append(failed, f.Seq)
	}
	if fmt.Sprint(failed) != "[2 3 4 6 7 8]" {
		t.Errorf("failed runs %v", failed)
	}
	for _, want := range []string{"#2 (broken, 1 vCPU): exit status 1: mvm: kernel", "is a text file",
		"#3 (crash, 1 vCPU): exit status 1: mvm: guest stopped", "#4 (hang, 1 vCPU): timed out after 2s"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q", want)
		}
	}
	if c, ok := r.Analysis.Cell(1, "A", runsummary.PhaseTotal); !ok || c.N != 2 {
		t.Errorf("A's cell: %+v", c)
	}
	if r.Runs[2].Summary == nil || r.Runs[2].Summary.Exit != runsummary.ExitFault {
		t.Errorf("the crashed run's result was not kept: %+v", r.Runs[2].Summary)
	}
	if !strings.Contains(out, "failed") {
		t.Error("cells of failed variants not marked")
	}
}

// TestBenchCommand: mvm bench -- CMD makes every run a command-mode run
// with command mode's kernel command line, and the command phase is
// compared like the others: B's command takes 30 ms longer, which is a
// regression of the command phase (in the table, the JSON and the JUnit
// report) and not of kernel_to_user.
func TestBenchCommand(t *testing.T) {
	dir := t.TempDir()
	k := kernelFile(t, "Image")
	js, junit := filepath.Join(dir, "c.json"), filepath.Join(dir, "c.xml")
	out, code := benchIn(t, "bench", "--kernel", k, "--runs", "5", "--warmup", "0",
		"--variant", "B:cmdline-append=mvm.delay_ms=30", "--fail-on-regression", "5",
		"--json", js, "--junit", junit, "--", "make", "-C", "tests", "check")
	t.Logf("\n%s", out)
	if code != benchExitRegression {
		t.Errorf("exit status %d, want %d (B's command phase regressed)", code, benchExitRegression)
	}
	r := mustReadReport(t, js)
	if fmt.Sprint(r.Config.Command) != "[make -C tests check]" {
		t.Errorf("report's command %q", r.Config.Command)
	}
	for _, run := range r.Runs {
		a := strings.Join(run.Args, " ")
		if !strings.HasSuffix(a, " -- make -C tests check") || !strings.Contains(a, "--cmdline "+commandCmdline("8250")) {
			t.Errorf("run #%d is not a command-mode run with command mode's command line: %q", run.Seq, a)
		}
	}
	c, ok := r.Analysis.Cell(1, "B", runsummary.PhaseCommand)
	if !ok || c.N != 5 || c.Delta == nil || !c.Delta.Regression {
		t.Errorf("B's command phase: %+v, want 5 runs and a regression", c)
	}
	if c, ok := r.Analysis.Cell(1, "B", runsummary.PhaseKernelToUser); !ok || c.Delta == nil || c.Delta.Regression {
		t.Errorf("B's kernel_to_user: %+v, want present and no regression", c)
	}
	for _, want := range []string{"command: make -C tests check", "\ncommand [ms]: "} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q", want)
		}
	}
	data, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `<testcase classname="mvm-bench.B" name="command 1 vCPU"`) ||
		!strings.Contains(string(data), `<failure message="command, 1 vCPU, B: +`) {
		t.Errorf("JUnit report has no failed test case for B's command phase:\n%s", data)
	}
}

// TestBenchCommandFails: a run whose command exits non-zero is a failed
// run that says so with the status and the command's stderr, and is no
// sample.
func TestBenchCommandFails(t *testing.T) {
	js := filepath.Join(t.TempDir(), "f.json")
	out, code := benchIn(t, "bench", "--kernel", kernelFile(t, "Image"), "--runs", "2", "--warmup", "0", "--json", js, "--", "exit", "3")
	t.Logf("\n%s", out)
	if code != benchExitRunsFailed {
		t.Errorf("exit status %d, want %d", code, benchExitRunsFailed)
	}
	r := mustReadReport(t, js)
	if len(r.Analysis.Failed) != 2 {
		t.Errorf("failed runs %+v, want both", r.Analysis.Failed)
	}
	if _, ok := r.Analysis.Cell(1, "A", runsummary.PhaseCommand); ok {
		t.Error("a failed command's run counted as a sample")
	}
	if !strings.Contains(out, "the command exited with status 3: boom") {
		t.Error("the table does not say the command exited with status 3")
	}
}

func TestCommandExitText(t *testing.T) {
	for code, want := range map[int]string{
		1: "the command exited with status 1", 125: "mvm failed", 124: "timed out", 255: "without the command's status",
		127: "not found", 126: "could not be executed", 137: "killed by SIGKILL (exit status 137)", 200: "the command exited with status 200",
	} {
		if got := commandExitText(code); !strings.Contains(got, want) {
			t.Errorf("status %d: %q, want %q in it", code, got, want)
		}
	}
}

func TestBenchBadInput(t *testing.T) {
	k := kernelFile(t, "Image")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--kernel", k, "--variant", "B:frobnicate=1"}, `unknown key "frobnicate"`},
		{[]string{"--kernel", k, "--runs", "0"}, "--runs 0"},
		{[]string{"--kernel", k, "--warmup", "-1"}, "--warmup"},
		{[]string{"--runs", "3"}, "--kernel is required"},
		{[]string{"--kernel", k, "--cpus", "0"}, "--cpus"},
		{[]string{"--kernel", k, "--variant", "A:cpus=2"}, "baseline"},
		{[]string{"--kernel", k, "--variant", "B:memory=lots"}, "memory=lots"},
		{[]string{"--kernel", k, "--memory", "lots"}, `--memory: bad size "lots"`},
		{[]string{"--kernel", k, "--psci", "maybe"}, "--psci: "},
		{[]string{"--kernel", k, "--format", "xml"}, "--format"},
		{[]string{"--kernel", k, "--baseline", "Z"}, "--baseline Z"},
		{[]string{"--kernel", k, "--alpha", "2"}, "--alpha"},
		{[]string{"--kernel", k, "--phases", "nope"}, "unknown phase"},
		{[]string{"--kernel", k, "--console", "stdio"}, "--console"},
		{[]string{"--kernel", k, "--marker", "bad"}, "--marker"},
		{[]string{"--kernel", k, "--result-json", "x"}, "unknown flag"},
		{[]string{"--from", "x.json", "--kernel", k}, "--kernel would have no effect"},
		{[]string{"--from", filepath.Join(t.TempDir(), "none.json")}, "--from"},
		{[]string{"--kernel", k, "--"}, "nothing after --"},
		{[]string{"--kernel", k, "true"}, `unexpected argument "true"`},
		{[]string{"--kernel", k, "--initrd", k, "--", "true"}, "initrd cannot be used with a command"},
		{[]string{"--kernel", k, "--variant", "B:initrd=" + k, "--", "true"}, "variant B: an initrd"},
		{[]string{"--kernel", k, "--rootfs", "/"}, "--rootfs is for command mode"},
		{[]string{"--kernel", k, "--rootfs", filepath.Join(t.TempDir(), "none"), "--", "true"}, "--rootfs"},
		{[]string{"--kernel", k, "--overlay", k, "--", "true"}, "not a directory"},
		{[]string{"--kernel", k, "--overlay", "/usr"}, "--overlay is for command mode"},
		{[]string{"--from", "x.json", "--", "true"}, "drop the command"},
	}
	fakeChildren(t)
	for _, c := range cases {
		root := newRootCmd(time.Now(), anyHost)
		root.SetOut(&bytes.Buffer{})
		root.SetArgs(append([]string{"bench"}, c.args...))
		err := root.Execute()
		var ue usageError
		if err == nil || !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("mvm bench %s: error %v, want a usage error mentioning %q", strings.Join(c.args, " "), err, c.want)
		}
	}
}

// TestBenchInterrupt: SIGINT during a bench stops it, prints the results
// measured so far and exits 130. mvm bench runs as its own process here
// (this binary acting as mvm) so that the signal goes to it alone.
func TestBenchInterrupt(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	k := kernelFile(t, "Image")
	cmd := exec.Command(exe, "bench", "--kernel", k, "--runs", "2", "--warmup", "0",
		"--variant", "hang:kernel="+kernelFile(t, "hang"))
	fakeChildren(t)
	cmd.Env = os.Environ()
	var out bytes.Buffer
	// The child writes its stderr to a file, which the test reads while
	// the child runs.
	errFile, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer errFile.Close()
	stderr := fileText(errFile.Name())
	cmd.Stdout, cmd.Stderr = &out, errFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait for run 1 (A) to finish and run 2 (hang) to start.
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(stderr.String(), "run 1/4") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGINT)
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("exit %v, want status 130\nstdout:\n%s\nstderr:\n%s", err, out.String(), stderr.String())
	}
	s := out.String()
	if !strings.Contains(s, "INTERRUPTED") || !strings.Contains(s, "total [ms]") {
		t.Errorf("no partial results:\n%s", s)
	}
	if !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("stderr:\n%s", stderr.String())
	}
}

// fileText reads a file's current contents as text ("" until it exists).
type fileText string

func (f fileText) String() string {
	b, _ := os.ReadFile(string(f))
	return string(b)
}

func mustReadReport(t *testing.T, path string) *bench.Report {
	t.Helper()
	r, err := bench.ReadJSONFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestBenchChecksVariantsBeforeBooting: every variant's whole mvm run
// configuration is checked once before the first boot. Before the fix
// these benches booted every run (the fake boots here all succeed) and
// found the mistake only in each run's child, or never.
func TestBenchChecksVariantsBeforeBooting(t *testing.T) {
	k := kernelFile(t, "Image")
	missing := filepath.Join(t.TempDir(), "missing")
	text := filepath.Join(t.TempDir(), "notes")
	if err := os.WriteFile(text, []byte("not a kernel\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--kernel", missing}, 2, missing + " does not exist"},
		{[]string{"--kernel", k, "--variant", "B:kernel=" + missing}, 2, "variant B: kernel " + missing + " does not exist"},
		{[]string{"--kernel", k, "--variant", "B:kernel=" + text}, 2, "variant B: kernel " + text + " is a text file"},
		{[]string{"--kernel", k, "--variant", "B:initrd=" + missing}, 2, "variant B: initrd " + missing + " does not exist"},
		{[]string{"--kernel", k, "--disk", missing}, 2, "--disk: disk image " + missing + " does not exist"},
		{[]string{"--kernel", k, "--profile", "--guest-symbols", missing}, 2, "--guest-symbols " + missing + " does not exist"},
		{[]string{"--kernel", k, "--metrics-addr", "notanaddr"}, 2, "--metrics-addr \"notanaddr\" is not HOST:PORT"},
		{[]string{"--kernel", k, "--console", "file:" + filepath.Join(missing, "c.log")}, 2, "--console file:" + filepath.Join(missing, "c.log") + ": directory " + missing + " does not exist"},
		{[]string{"--kernel", k, "--out", filepath.Join(missing, "o.txt")}, 2, "--out " + filepath.Join(missing, "o.txt")},
		{[]string{"--kernel", k, "--json", filepath.Join(missing, "o.json")}, 2, "--json " + filepath.Join(missing, "o.json")},
		{[]string{"--kernel", k, "--html", filepath.Dir(text)}, 2, "--html " + filepath.Dir(text) + ": is a directory"},
		{[]string{"--kernel", k, "--console-dir", filepath.Join(text, "logs")}, 2, "--console-dir " + filepath.Join(text, "logs") + ": " + text + " is not a directory"},
		{[]string{"--from", missing, "--out", filepath.Join(missing, "o.txt")}, 2, "--out"},
		{[]string{"--kernel", k, "--variant", "B:memory=1M"}, 2, "variant B (1 vCPU): --memory 1M is too small"},
		{[]string{"--kernel", k, "--on-reset", "bogus"}, 2, "--on-reset"},
		{[]string{"--kernel", k, "--profile-format", "xml"}, 2, "--profile-format"},
		{[]string{"--kernel", k, "--profile-out", "p.txt"}, 2, "need --profile"},
		{[]string{"--kernel", k, "--profile", "--profile-sources", "ebpf"}, 2, "--profile-sources"},
		{[]string{"--kernel", k, "--profile", "--profile-via", "ebpf"}, 2, "--profile-via \"ebpf\": use auto, bpf or perf"},
		{[]string{"--kernel", k, "--profile-via", "perf"}, 2, "need --profile"},
		{[]string{"--kernel", k, "--variant", "B"}, 2, "no KEY=VALUE given"},
	}
	fakeChildren(t)
	for _, c := range cases {
		root := newRootCmd(time.Now(), anyHost)
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs(append([]string{"bench", "--runs", "2", "--warmup", "0"}, c.args...))
		err := root.Execute()
		code := 0
		if err != nil {
			code, _ = exitStatus(err)
		}
		if code != c.code || err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("mvm bench %s: exit %d, error %v; want exit %d and one line mentioning %q",
				strings.Join(c.args, " "), code, err, c.code, c.want)
		}
		if out.Len() != 0 {
			t.Errorf("mvm bench %s booted and reported:\n%s", strings.Join(c.args, " "), out.String())
		}
	}
	// The real binary: one line, exit 2, nothing left behind.
	dir := t.TempDir()
	// The output files and the console directory, named relative to the
	// working directory, are not created.
	checkFailure(t, dir, mvm(t, dir, "bench", "--kernel", k, "--variant", "B:kernel="+missing,
		"--out", "out.txt", "--json", "b.json", "--html", "b.html", "--console-dir", "logs/a"), 2, "variant B: kernel", "does not exist")
}
