package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/mvm-dev/mvm/bench"
	"github.com/mvm-dev/mvm/cmdmode"
	"github.com/mvm-dev/mvm/report"
	"github.com/mvm-dev/mvm/runsummary"
	"github.com/mvm-dev/mvm/vmm"
)

// Exit statuses of mvm bench besides 0 and 2 (bad arguments).
const (
	benchExitRegression = 1 // a significant regression beyond --fail-on-regression
	benchExitRunsFailed = 3 // some boots failed (the results use the others), or the host can run none
)

// benchOwnedRunFlags are mvm run flags that mvm bench defines differently
// (--cpus takes a list) or sets itself for every run.
func benchOwnedRunFlags() []string {
	return []string{"cpus", "console", "result-json", "report"}
}

// settingsRunFlags are the mvm run flags a variant can override; mvm bench
// passes them per variant rather than verbatim.
func settingsRunFlags() []string {
	return []string{"kernel", "initrd", "cmdline", "append", "memory", "psci"}
}

type benchFlags struct {
	runs, warmup   int
	cpus           string
	variants       []string
	label          string
	format         string
	out, jsonOut   string
	html           string
	junit          string
	failOn         float64
	alpha          float64
	baseline       string
	phases         string
	profileAll     bool
	verboseConsole bool
	console        string
	consoleDir     string
	timeout        time.Duration
	from           string
	// command is what every run times in the guest (after --).
	command []string
}

func newBenchCmd(start time.Time, checkHost func() error) *cobra.Command {
	var f benchFlags
	// Every mvm run flag, present and future (--marker, --log-level, ...),
	// is an mvm bench flag too: copy them from a run command rather than
	// listing them, and pass the ones given on to every run.
	runCmd := newRunCmd(start)
	var shared []*pflag.Flag
	cmd := &cobra.Command{
		Use:   "bench --kernel PATH [mvm run flags] [--runs N] [--cpus LIST] [--variant NAME:KEY=VALUE,...]... [-- CMD [ARGS...]]",
		Short: "Boot variants of a VM many times and compare their boot phases",
		Long: `Boot a configuration N times, or several variants of it, and compare the
boot phases: a table like the ones posted to the kernel mailing lists, JSON
with every run's raw numbers, or Go benchmark lines for benchstat.

The plain flags (those of mvm run) define variant A. Each --variant
NAME:KEY=VALUE,... overrides some of them; keys: kernel, initrd, cmdline,
append (replace A's value), cmdline-append (added after A's command line),
cpus (a list), memory, psci, label (a description for the table). Repeat
--variant with the same NAME to add keys whose values contain ",KEY=".
--cpus 1,16,64 makes one row per vCPU count.

With -- CMD [ARGS...] every run is a command-mode run, mvm run ... -- CMD
(see 'mvm run --help'): the host's root (or --rootfs DIR) shared read-only
through virtiofsd, mvm's init, CMD's status as the run's. The command
phase (init start -> CMD's exit) is then in the tables beside the others,
compared and checked for regressions like them: A/B two kernels on a test
or a benchmark. A run whose CMD exits non-zero is a failed run, listed with
its status (and the end of its stderr), not a timing sample. CMD's stdout
is discarded and its stdin is empty. --initrd cannot be used with a
command (mvm builds the initramfs).

Every boot is a separate mvm run process (so vmm_setup starts at a real
process start), with the console discarded and "quiet" added to the kernel
command line (--verbose-console keeps the kernel's console output, and with
it the 'smp: Brought up' line that secondaries_console needs). Runs of all
variants and vCPU counts are interleaved, A B A B ..., so that drift of the
host affects all alike.

Phases (docs/boot-phases.md says where each clock starts and stops):
  vmm_setup            mvm process start -> first KVM_RUN
  boot_to_smp          first KVM_RUN -> first CPU_ON          (PSCI in userspace)
  secondaries          first CPU_ON -> all secondaries entered (PSCI in userspace)
  secondaries_console  first CPU_ON -> 'smp: Brought up' line  (also needs --verbose-console)
  smp_console          first KVM_RUN -> 'smp: Brought up' line (needs --verbose-console)
  kernel_to_user       first KVM_RUN -> userspace boot marker (0x41 at 0x09010000)
  command              init start -> CMD's exit status in      (-- CMD only)
  total                mvm process start -> VM exit
  console:NAME         first KVM_RUN -> console line matching --marker NAME=REGEX
  process_wall, process_cpu  the mvm process's wall and CPU time
A phase that a run did not observe is absent, never zero.

Each cell shows the median and ± half the min..max range; other variants
show their delta to the baseline in percent and the p-value of a two-sided
Mann-Whitney U test (at least 4 runs per variant are needed for p < 0.05).
A delta is a regression when it is significant (p < --alpha), slower, and
beyond --fail-on-regression percent; mvm bench then exits 1. process_cpu is
shown but never a regression: it moves with whatever else the host runs.

Every flag, every variant and every file named (kernels, initrds, disks,
--guest-symbols, the output files) is checked before the first boot, and
then the host, once: on a host that cannot run mvm (not arm64, no usable
/dev/kvm) mvm bench says so in one line and boots nothing.

Exit status: 0 when all went well; 1 on a regression beyond
--fail-on-regression; 3 when some boots failed (they are listed; the
statistics use the others), or when the host cannot run any; 2 for bad
input: a bad flag or variant, or a named file that is missing, unreadable
or of the wrong kind; 130/143 on SIGINT/SIGTERM, after printing what was
measured so far.`,
		Example: `  # Secondary-CPU bring-up, serial vs parallel, at 16 and 64 vCPUs:
  mvm bench --kernel Image --initrd initrd.gz --memory 1G --psci user \
      --cpus 16,64 --runs 10 --variant "A':cmdline-append=cpuhp.parallel=0" \
      --variant B:kernel=Image.patched,label=parallel

  # CI: fail on a significant slowdown of more than 5%, keep all the data,
  # and show each phase as a test in the CI's test view (JUnit XML, as
  # GitLab's artifacts:reports:junit and Jenkins' junit step read it):
  mvm bench --kernel Image.base --initrd initrd.gz --variant B:kernel=Image.new \
      --runs 10 --fail-on-regression 5 --json bench.json --junit boot.xml

  # Go benchmark format, then compare with benchstat:
  mvm bench --kernel Image --variant B:memory=2G --format benchstat --out boot.txt
  benchstat -col /variant boot.txt

  # A/B two kernels on a command run in each guest (command mode): the
  # command phase times it; a failing command is a failed run:
  mvm bench --kernel Image.base --variant B:kernel=Image.new --runs 8 \
      --fail-on-regression 5 -- make -C tools/testing/selftests/timers run_tests

  # Re-analyse saved runs with B as the baseline, as a table:
  mvm bench --from bench.json --baseline B

  # A page with every run as a point, for a browser or a PDF:
  mvm bench --kernel Image --variant B:kernel=Image.new --runs 8 --html bench.html`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch dash := cmd.ArgsLenAtDash(); {
			case len(args) > 0 && dash != 0:
				return usageError{fmt.Errorf("unexpected argument %q: put the command to time in the guest after --, e.g. mvm bench --kernel Image -- uname -r", args[0])}
			case dash == 0 && len(args) == 0:
				return usageError{errors.New("nothing after --: give the command to time in the guest, e.g. mvm bench --kernel Image -- true")}
			}
			f.command = args
			return runBench(cmd, &f, shared, checkHost)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&f.runs, "runs", 5, "measured boots per variant and vCPU count")
	fl.IntVar(&f.warmup, "warmup", 1, "discarded boots per variant before measuring (page cache, CPU frequency)")
	fl.StringVar(&f.cpus, "cpus", "1", "vCPU counts, one table row each, e.g. 1,4,8")
	fl.StringArrayVar(&f.variants, "variant", nil, "NAME:KEY=VALUE[,KEY=VALUE...]: a variant overriding the plain flags (repeatable); keys: "+strings.Join(bench.Keys(), ", "))
	fl.StringVar(&f.label, "label", "", "description of variant A for the table header, e.g. 7.3-rc2")
	fl.StringVar(&f.format, "format", "table", "output: table, json (every run's raw numbers and the summaries) or benchstat (Go benchmark format)")
	fl.StringVarP(&f.out, "out", "o", "-", "write the output here instead of stdout")
	fl.StringVar(&f.jsonOut, "json", "", "also write the JSON report (every run, the analysis) to this file")
	fl.StringVar(&f.html, "html", "", "also write an HTML report (every run as a point, medians, deltas, p-values) to this file")
	fl.StringVar(&f.junit, "junit", "", "also write a JUnit XML report to this file (for GitLab, Jenkins, ...): a test case per variant, vCPU count and phase, failed where --fail-on-regression finds a regression")
	fl.Float64Var(&f.failOn, "fail-on-regression", 0, "exit 1 when a phase is significantly slower than the baseline by more than `PCT` percent")
	fl.Float64Var(&f.alpha, "alpha", 0.05, "significance level: a delta counts when its p-value is below it")
	fl.StringVar(&f.baseline, "baseline", bench.BaselineName, "the variant the others are compared with")
	fl.BoolVar(&f.profileAll, "profile-all", false, "with --profile: list every exit-profile row in the comparison, not only those that differ significantly")
	fl.StringVar(&f.phases, "phases", "", "only these phases (comma-separated), in the output and the regression check")
	fl.BoolVar(&f.verboseConsole, "verbose-console", false, "do not add 'quiet' to the kernel command line")
	fl.StringVar(&f.console, "console", "none", "each run's guest console: none, or file:PATH (overwritten by every run)")
	fl.StringVar(&f.consoleDir, "console-dir", "", "keep each run's guest console in DIR/run-SEQ-VARIANT-cpusN.log")
	fl.DurationVar(&f.timeout, "timeout", 10*time.Minute, "stop a boot that takes longer than this and count it as failed")
	fl.StringVar(&f.from, "from", "", "re-analyse and render a saved --format json / --json report instead of booting")
	runCmd.Flags().VisitAll(func(rf *pflag.Flag) {
		if slices.Contains(benchOwnedRunFlags(), rf.Name) || fl.Lookup(rf.Name) != nil {
			return
		}
		// A copy sharing the value: its shorthand may clash with one of
		// mvm bench's own (pflag panics on that), so it gets none.
		c := *rf
		if c.Shorthand != "" && fl.ShorthandLookup(c.Shorthand) != nil {
			c.Shorthand = ""
		}
		fl.AddFlag(&c)
		shared = append(shared, &c)
	})
	return cmd
}

func runBench(cmd *cobra.Command, f *benchFlags, shared []*pflag.Flag, checkHost func() error) error {
	fl := cmd.Flags()
	logLevel, _ := fl.GetString("log-level")
	log, err := newLogger(logLevel)
	if err != nil {
		return err
	}
	opt, err := f.options(fl)
	if err != nil {
		return err
	}
	if !slices.Contains([]string{"table", "json", "benchstat"}, f.format) {
		return usageError{fmt.Errorf("--format %q: use table, json or benchstat", f.format)}
	}
	for _, o := range []struct{ flag, path string }{{"--out", f.out}, {"--json", f.jsonOut}, {"--html", f.html}, {"--junit", f.junit}} {
		if err := checkOutput(o.flag, o.path); err != nil {
			return err
		}
	}
	if f.from != "" {
		if len(f.command) > 0 {
			return usageError{errors.New("--from re-analyses saved runs without booting: drop the command after --")}
		}
		return benchFrom(cmd, f, opt)
	}

	rep, err := f.plan(fl, shared)
	if err != nil {
		return err
	}
	if _, ok := rep.Variant(opt.Baseline); !ok {
		return usageError{fmt.Errorf("--baseline %s: no such variant", opt.Baseline)}
	}
	if err := checkOutputDir("--console-dir", f.consoleDir); err != nil {
		return err
	}
	// Every input is checked; now the host, once: a host that cannot run
	// mvm would fail every boot the same way.
	if err := checkHost(); err != nil {
		return &exitError{benchExitRunsFailed, fmt.Sprintf("no boots run: %v", err)}
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the mvm binary to run: %w", err)
	}
	if f.consoleDir != "" {
		if err := os.MkdirAll(f.consoleDir, 0o755); err != nil {
			return fmt.Errorf("--console-dir: %w", err)
		}
	}
	tmp, err := os.MkdirTemp("", "mvm-bench-")
	if err != nil {
		return fmt.Errorf("make a directory for the runs' results: %w", err)
	}
	defer os.RemoveAll(tmp)

	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		if s, ok := <-sigs; ok {
			cancel(signalCause{s.(syscall.Signal)})
		}
	}()

	jobs := bench.Schedule(rep.Config.Variants, f.runs, f.warmup)
	fmt.Fprintf(os.Stderr, "mvm bench: %d boots: %d variant(s) x vCPUs %s x %d runs, %d warm-up\n",
		len(jobs), len(rep.Config.Variants), bench.FormatCPUList(bench.Rows(rep.Config.Variants)), f.runs, f.warmup*len(rep.Config.Variants))
	prog := bench.NewProgress(os.Stderr, len(jobs), log)
	ex := &bench.Exec{
		Exe: exe, Tmp: tmp, Timeout: f.timeout, Quiet: rep.Config.Quiet,
		Console: f.console, ConsoleDir: f.consoleDir, Common: rep.Config.CommonArgs,
		Variants: rep.Config.Variants, Log: log, Starting: prog.Starting,
		Command: rep.Config.Command, CommandExit: commandExitText,
	}
	rep.Started = time.Now()
	rep.Runs, rep.Interrupted = bench.Execute(ctx, jobs, ex.Run, prog.Done)
	rep.Finished = time.Now()
	prog.Finish()

	if err := rep.Reanalyze(opt); err != nil {
		return usageError{err}
	}
	if err := writeBenchOutputs(cmd, f, rep); err != nil {
		return err
	}
	var sc signalCause
	if rep.Interrupted && errors.As(context.Cause(ctx), &sc) {
		return &exitError{128 + int(sc.sig), "interrupted: the results above are what was measured so far"}
	}
	return benchExit(rep)
}

// options turns the analysis flags into bench.Options.
func (f *benchFlags) options(fl *pflag.FlagSet) (bench.Options, error) {
	opt := bench.Options{Alpha: f.alpha, Baseline: f.baseline, ProfileAll: f.profileAll}
	if f.alpha <= 0 || f.alpha >= 1 {
		return opt, usageError{fmt.Errorf("--alpha %v: use a level between 0 and 1, e.g. 0.05", f.alpha)}
	}
	if fl.Changed("fail-on-regression") {
		if f.failOn < 0 {
			return opt, usageError{fmt.Errorf("--fail-on-regression %v: give the slowdown in percent, 0 or more", f.failOn)}
		}
		v := f.failOn
		opt.FailOnRegression = &v
	}
	if f.phases != "" {
		for _, p := range strings.Split(f.phases, ",") {
			p = strings.TrimSpace(p)
			if !bench.KnownPhase(p) {
				return opt, usageError{fmt.Errorf("--phases: unknown phase %q (phases: %s)", p, strings.Join(bench.PhaseNames(), ", "))}
			}
			opt.Phases = append(opt.Phases, p)
		}
	}
	return opt, nil
}

// plan checks the run-defining flags and builds the report's Config.
func (f *benchFlags) plan(fl *pflag.FlagSet, shared []*pflag.Flag) (*bench.Report, error) {
	if f.runs < 1 {
		return nil, usageError{fmt.Errorf("--runs %d: need at least 1 run per variant (4 or more to detect a difference at p < 0.05)", f.runs)}
	}
	if f.warmup < 0 {
		return nil, usageError{fmt.Errorf("--warmup %d: use 0 or more", f.warmup)}
	}
	if f.timeout <= 0 {
		return nil, usageError{fmt.Errorf("--timeout %v: use a positive duration, e.g. 10m", f.timeout)}
	}
	if f.console != "none" && !strings.HasPrefix(f.console, "file:") {
		return nil, usageError{fmt.Errorf("--console %q: use none or file:PATH (mvm bench's stdout is its report)", f.console)}
	}
	get := func(name string) string { v, _ := fl.GetString(name); return v }
	base := bench.Settings{
		Kernel: get("kernel"), Initrd: get("initrd"), Cmdline: get("cmdline"), Append: get("append"),
		Memory: get("memory"), PSCI: get("psci"), Label: f.label,
	}
	if base.Kernel == "" {
		return nil, usageError{errors.New("--kernel is required: an arm64 Image or a flat binary (see 'mvm bench --help')")}
	}
	if len(f.command) > 0 && !fl.Changed("cmdline") {
		// Command mode's own default, as mvm run uses it without --cmdline
		// (mvm bench passes every variant's command line explicitly).
		base.Cmdline = commandCmdline(get("serial"))
	}
	cpus, err := bench.ParseCPUList(f.cpus)
	if err != nil {
		return nil, usageError{fmt.Errorf("--cpus: %w", err)}
	}
	base.CPUs = cpus
	var specs []bench.VariantSpec
	for _, s := range f.variants {
		sp, err := bench.ParseVariant(s)
		if err != nil {
			return nil, usageError{err}
		}
		specs = append(specs, sp)
	}
	vs, err := bench.BuildVariants(base, specs)
	if err != nil {
		return nil, usageError{err}
	}
	// The other run flags: checked the way mvm run checks them, then
	// passed verbatim to every run.
	var common []string
	for _, rf := range shared {
		if !rf.Changed || slices.Contains(settingsRunFlags(), rf.Name) {
			continue
		}
		if sv, ok := rf.Value.(pflag.SliceValue); ok {
			for _, v := range sv.GetSlice() {
				common = append(common, "--"+rf.Name+"="+v)
			}
			continue
		}
		common = append(common, "--"+rf.Name+"="+rf.Value.String())
	}
	if markers, err := fl.GetStringArray("marker"); err == nil {
		for _, m := range markers {
			if _, err := vmm.ParseConsoleMarker(m); err != nil {
				return nil, usageError{fmt.Errorf("--marker: %w", err)}
			}
		}
	}
	if len(f.command) > 0 {
		rootfs, _ := fl.GetString("rootfs")
		overlays, _ := fl.GetStringArray("overlay")
		if _, _, err := commandRoot(rootfs, overlays); err != nil {
			return nil, err
		}
		for _, v := range vs {
			if v.Settings.Initrd != "" {
				return nil, usageError{fmt.Errorf("variant %s: an initrd cannot be used with a command: mvm builds the guest's initramfs itself (drop --initrd / initrd=, or the command after --)", v.Name)}
			}
		}
	} else {
		for _, name := range []string{"rootfs", "overlay", "modules"} {
			if fl.Changed(name) {
				return nil, usageError{fmt.Errorf("--%s is for command mode: give the command to time after --, e.g. mvm bench --kernel Image --%s DIR -- true", name, name)}
			}
		}
	}
	if err := checkVariants(vs, !f.verboseConsole, f.console, common); err != nil {
		return nil, err
	}
	return &bench.Report{
		Format: bench.ReportFormat,
		Host:   runsummary.CurrentHost(),
		Config: bench.Config{
			Runs: f.runs, Warmup: f.warmup, Quiet: !f.verboseConsole, Timeout: f.timeout.String(),
			CommonArgs: common, Command: f.command, Variants: vs,
		},
	}, nil
}

// commandExitText says what a command-mode run's non-zero exit status
// means (mvm run --help, "mvm's exit status is CMD's"): CMD's own status,
// or one of the statuses command mode keeps for mvm and the guest.
func commandExitText(code int) string {
	switch {
	case code == cmdmode.ExitMVM:
		return "mvm failed (exit status 125)"
	case code == cmdmode.ExitTimeout:
		return "the run timed out (mvm run --timeout, exit status 124)"
	case code == cmdmode.ExitGuestDied:
		return "the guest ended without the command's status, e.g. a kernel panic (exit status 255)"
	case code == cmdmode.ExitNotFound:
		return "the command was not found in the guest (exit status 127)"
	case code == cmdmode.ExitNotExec:
		return "the command could not be executed in the guest (exit status 126)"
	case code > cmdmode.ExitSignalBase && code < cmdmode.ExitSignalBase+65:
		sig := syscall.Signal(code - cmdmode.ExitSignalBase)
		return fmt.Sprintf("the command was killed by %s (exit status %d)", unix.SignalName(sig), code)
	}
	return fmt.Sprintf("the command exited with status %d", code)
}

// checkVariants checks, before the first boot, the whole mvm run command
// line of every variant at every vCPU count the way mvm run would (a bad
// value is a usage error), and each variant's kernel and initrd (a bad file
// is an error): a mistake in variant C must not wait for A's and B's boots.
func checkVariants(vs []bench.Variant, quiet bool, console string, common []string) error {
	for _, v := range vs {
		for _, cpus := range v.Settings.CPUs {
			args := bench.RunArgs(v.Settings, cpus, quiet)[1:] // without "run"
			args = append(append(args, "--console", console), common...)
			err := checkRunArgs(args)
			if err == nil {
				continue
			}
			if len(vs) == 1 {
				return err
			}
			var ue usageError
			if errors.As(err, &ue) {
				n := fmt.Sprintf("%d vCPU", cpus)
				if cpus != 1 {
					n += "s"
				}
				return usageError{fmt.Errorf("variant %s (%s): %w", v.Name, n, err)}
			}
			return fmt.Errorf("variant %s: %w", v.Name, err)
		}
	}
	return nil
}

// checkRunArgs checks an mvm run command line without booting it.
func checkRunArgs(args []string) error {
	var f runFlags
	c := &cobra.Command{Use: "run"}
	f.register(c)
	if err := c.Flags().Parse(args); err != nil {
		return usageError{err}
	}
	cfg, err := f.check(time.Now())
	if err != nil {
		return err
	}
	return vmm.CheckBoot(cfg)
}

// benchFrom re-analyses a saved report (--from).
func benchFrom(cmd *cobra.Command, f *benchFlags, opt bench.Options) error {
	var given []string
	cmd.Flags().Visit(func(fl *pflag.Flag) {
		switch fl.Name {
		case "from", "format", "out", "json", "html", "junit", "fail-on-regression", "alpha", "baseline", "phases", "log-level":
		default:
			given = append(given, "--"+fl.Name)
		}
	})
	if len(given) > 0 {
		return usageError{fmt.Errorf("--from re-analyses saved runs without booting: %s would have no effect", strings.Join(given, ", "))}
	}
	rep, err := bench.ReadJSONFile(f.from)
	if err != nil {
		return usageError{fmt.Errorf("--from: %w", err)}
	}
	if err := rep.Reanalyze(opt); err != nil {
		return usageError{fmt.Errorf("--from %s: %w", f.from, err)}
	}
	if err := writeBenchOutputs(cmd, f, rep); err != nil {
		return err
	}
	return benchExit(rep)
}

func benchExit(rep *bench.Report) error {
	an := &rep.Analysis
	if len(an.Regressions) > 0 {
		return &exitError{benchExitRegression, fmt.Sprintf("%d significant regression(s) beyond %g%%", len(an.Regressions), *an.FailOnRegression)}
	}
	if len(an.Failed) > 0 {
		seqs := make([]string, len(an.Failed))
		for i, r := range an.Failed {
			seqs[i] = fmt.Sprintf("#%d", r.Seq)
		}
		return &exitError{benchExitRunsFailed, fmt.Sprintf("%d run(s) failed: %s", len(an.Failed), strings.Join(seqs, " "))}
	}
	return nil
}

func writeBenchOutputs(cmd *cobra.Command, f *benchFlags, rep *bench.Report) error {
	write := func(w io.Writer) error {
		switch f.format {
		case "json":
			return bench.WriteJSON(w, rep)
		case "benchstat":
			return bench.WriteBenchstat(w, rep)
		}
		return bench.WriteTable(w, rep)
	}
	if err := writeTo(cmd, f.out, write); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	if f.jsonOut != "" {
		if err := writeTo(cmd, f.jsonOut, func(w io.Writer) error { return bench.WriteJSON(w, rep) }); err != nil {
			return fmt.Errorf("--json: %w", err)
		}
	}
	if f.junit != "" {
		if err := writeTo(cmd, f.junit, func(w io.Writer) error { return bench.WriteJUnit(w, rep) }); err != nil {
			return fmt.Errorf("--junit: %w", err)
		}
	}
	if f.html != "" {
		if err := report.WriteFile(f.html, func(w io.Writer) error { return report.WriteBench(w, rep, "mvm bench") }); err != nil {
			return fmt.Errorf("--html: %w", err)
		}
	}
	return nil
}

func writeTo(cmd *cobra.Command, path string, write func(io.Writer) error) error {
	if path == "" || path == "-" {
		return write(cmd.OutOrStdout())
	}
	fh, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(fh); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}
