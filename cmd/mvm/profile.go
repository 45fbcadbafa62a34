package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/mvm-dev/mvm/exits"
	"github.com/mvm-dev/mvm/exits/attach"
	"github.com/mvm-dev/mvm/exits/render"
	"github.com/mvm-dev/mvm/exits/source"
	"github.com/mvm-dev/mvm/vmm"
)

type profileFlags struct {
	pid         int
	duration    time.Duration
	live        bool
	interval    time.Duration
	format      string
	out         string
	perVCPU     bool
	sources     []string
	metricsAddr string
	logLevel    string
	via         string
}

func newProfileCmd() *cobra.Command {
	var f profileFlags
	cmd := &cobra.Command{
		Use:   "profile (--pid PID | -- COMMAND [ARGS...]) [flags]",
		Short: "Profile the VM exits of another VMM (QEMU, Firecracker, Cloud Hypervisor, crosvm, kvmtool, mvm)",
		Long: `Profile the VM exits of a guest that another program runs on /dev/kvm, with
the same table, JSON and metrics as mvm run --profile.

  mvm profile --pid PID          attach to a running VMM; profile until it exits,
                                 --duration passes or Ctrl-C; it keeps running
  mvm profile -- COMMAND ARGS    start COMMAND and profile it to its end, like
                                 perf kvm stat record; mvm exits with its status

Sources (the report's Sources list says which were used and why not):
  kvm_stats   the VMM's own KVM stats files (KVM_GET_STATS_FD), copied with
              pidfd_getfd: KVM answers that ioctl only to the VM's creator, so
              this works for VMMs that open them (QEMU does, per vCPU)
  tracepoint  kvm:kvm_entry/kvm:kvm_exit: counted in the kernel by BPF programs
              where allowed (CAP_BPF+CAP_PERFMON), else, or with --tracepoint-via
              perf, samples through perf_event_open rings: per thread for --pid,
              inherited per CPU from the first instruction for a COMMAND

vCPU threads are told apart by the names VMMs give them (QEMU "CPU n/KVM" with
-name debug-threads=on, Firecracker "fc_vcpu n", Cloud Hypervisor "vcpuN",
crosvm "crosvm_vcpuN", kvmtool "kvm-vcpu-N", mvm "mvm-vcpu-N"), else by the
KVM_RUN ioctl a thread sits in.

Privileges: ptrace access to the process for everything (root; the VMM's own
user; or CAP_SYS_PTRACE with CAP_DAC_READ_SEARCH for another user's VMM);
CAP_PERFMON (or root) and tracefs for tracepoints. What is missing is named on
one line, and the rest still runs.

Exit status: the command's with -- COMMAND (128+N if signal N killed it);
0 with --pid when the profile was written; 1 when nothing could be profiled;
2 for bad input: a bad flag value, or an --out that cannot be created (checked
before anything starts; --out is created only once there is a profile).`,
		Example: `  # Profile a QEMU guest from start to power-off, per vCPU:
  mvm profile --per-vcpu -- qemu-system-aarch64 -machine virt,gic-version=3 \
      -accel kvm -cpu host -smp 2 -nographic -nic none -name debug-threads=on \
      -kernel Image -initrd initrd.gz -append console=ttyAMA0

  # Watch a running VMM for 30 s, redrawn every second, like kvm_stat:
  mvm profile --pid $(pidof firecracker) --live --duration 30s

  # JSON of 10 s of a running VMM, kvm_stats only:
  mvm profile --pid 4242 --duration 10s --sources kvm_stats --format json --out p.json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runProfile(cmd, &f, args)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&f.pid, "pid", 0, "profile this running process (a VMM holding a KVM VM)")
	fl.DurationVar(&f.duration, "duration", 0, "stop profiling after this long (default: when the process exits or on Ctrl-C)")
	fl.BoolVar(&f.live, "live", false, "print the profile so far every --interval: redrawn on a terminal, one table after another elsewhere")
	fl.DurationVar(&f.interval, "interval", time.Second, "how often --live prints")
	fl.StringVar(&f.format, "format", "table", "report format: table or json")
	fl.StringVar(&f.out, "out", "", "write the report to this file instead of stderr")
	fl.BoolVar(&f.perVCPU, "per-vcpu", false, "tables per vCPU as well as the total")
	fl.StringSliceVar(&f.sources, "sources", nil, "limit the profile to these sources: kvm_stats, tracepoint (default: all the host allows)")
	fl.StringVar(&f.metricsAddr, "metrics-addr", "", "serve Prometheus metrics on HOST:PORT (/metrics) while profiling")
	fl.StringVar(&f.logLevel, "log-level", "warn", "mvm's own log level on stderr: debug, info, warn, error")
	fl.StringVar(&f.via, "tracepoint-via", "auto", "how tracepoints are read: auto (BPF if allowed, else perf rings), bpf (counted and timed in the kernel), perf (samples through rings), both (perf, plus the BPF counts as tracepoint_bpf to compare)")
	return cmd
}

// check validates the flags and the command after "--".
func (f *profileFlags) check(cmd *cobra.Command, args []string) error {
	dash := cmd.ArgsLenAtDash()
	switch {
	case len(args) > 0 && dash != 0:
		return usageError{fmt.Errorf("put the command to profile after --: mvm profile [flags] -- %s", strings.Join(args, " "))}
	case f.pid != 0 && len(args) > 0:
		return usageError{errors.New("give either --pid or a command after --, not both")}
	case f.pid == 0 && len(args) == 0:
		return usageError{errors.New("nothing to profile: give --pid PID or -- COMMAND [ARGS...] (see 'mvm profile --help')")}
	case f.pid < 0:
		return usageError{fmt.Errorf("--pid %d: a process id is positive", f.pid)}
	case f.duration < 0:
		return usageError{fmt.Errorf("--duration %v: must not be negative", f.duration)}
	case f.interval <= 0:
		return usageError{fmt.Errorf("--interval %v: must be positive", f.interval)}
	case f.via != source.ViaAuto && f.via != source.ViaBPF && f.via != source.ViaPerf && f.via != source.ViaBoth:
		return usageError{fmt.Errorf("--tracepoint-via %q: use auto, bpf, perf or both", f.via)}
	case f.format != "table" && f.format != "json":
		return usageError{fmt.Errorf("--format %q: use table or json", f.format)}
	}
	for _, s := range f.sources {
		if s != exits.SourceKVMStats && s != exits.SourceTracepoint {
			return usageError{fmt.Errorf("--sources: unknown source %q: use kvm_stats or tracepoint", s)}
		}
	}
	if f.metricsAddr != "" {
		if err := vmm.CheckListenAddr(f.metricsAddr); err != nil {
			return usageError{fmt.Errorf("--metrics-addr %w", err)}
		}
	}
	if _, err := newLogger(f.logLevel); err != nil {
		return err
	}
	return checkOutput("--out", f.out)
}

func runProfile(cmd *cobra.Command, f *profileFlags, args []string) error {
	if err := f.check(cmd, args); err != nil {
		return err
	}
	log, err := newLogger(f.logLevel)
	if err != nil {
		return err
	}
	out := io.Writer(os.Stderr)
	isTTY := term.IsTerminal(int(os.Stderr.Fd()))
	if f.out != "" {
		// Created at the first write: a profile that never starts (no
		// such process, no access) leaves no file.
		file := &lazyFile{flag: "--out ", path: f.out}
		defer file.close()
		out, isTTY = file, false
	}
	write := func(rep *exits.Report) error {
		if f.format == "json" {
			return rep.WriteJSON(out)
		}
		return render.Table(out, rep, render.Options{PerVCPU: f.perVCPU})
	}

	// With --pid, Ctrl-C or SIGTERM ends the profile. A command gets the
	// signal instead (the terminal sends Ctrl-C to it as well) and mvm
	// profiles it until it has exited.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	cmdPID := make(chan int, 1)
	go func() {
		pid := 0
		for s := range sigs {
			if len(args) == 0 {
				cancel()
				continue
			}
			if pid == 0 {
				select {
				case pid = <-cmdPID:
				default:
				}
			}
			if pid > 0 {
				_ = syscall.Kill(pid, s.(syscall.Signal))
			}
		}
	}()

	cfg := attach.Config{
		PID: f.pid, Command: args, Env: childEnviron(), Sources: f.sources,
		Duration: f.duration, Interval: f.interval,
		MetricsAddr: f.metricsAddr, Logger: log, Via: f.via,
		Started: func(pid int) { cmdPID <- pid },
	}
	if f.live {
		cfg.Live = func(rep *exits.Report) {
			if isTTY {
				fmt.Fprint(out, "\x1b[H\x1b[2J") // home, clear: redraw in place
			}
			if err := write(rep); err != nil {
				log.Warn("live profile", "err", err)
			}
			if !isTTY {
				fmt.Fprintln(out)
			}
		}
	}
	res, err := attach.Run(ctx, cfg)
	if err != nil {
		return profileError(f, args, err)
	}
	if f.live && isTTY {
		fmt.Fprint(out, "\x1b[H\x1b[2J")
	}
	if err := write(res.Report); err != nil {
		return fmt.Errorf("write the profile: %w", err)
	}
	for _, line := range missingSources(res.Report) {
		fmt.Fprintln(os.Stderr, "mvm:", line)
	}
	for _, n := range res.Notes {
		fmt.Fprintln(os.Stderr, "mvm:", n)
	}
	if len(args) == 0 {
		return nil
	}
	st := res.Wait()
	switch {
	case st == nil:
		return &exitError{1, args[0] + ": no exit status"}
	case st.Exited():
		if st.ExitCode() == 0 {
			return nil
		}
		return &exitError{st.ExitCode(), ""}
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return &exitError{128 + int(ws.Signal()), fmt.Sprintf("%s was killed by %v", args[0], ws.Signal())}
	}
	return &exitError{1, fmt.Sprintf("%s ended with %v", args[0], st)}
}

// missingSources says, one line each, which sources could not be used and
// what the profile still has.
func missingSources(rep *exits.Report) []string {
	var used, lines []string
	for _, s := range rep.Sources {
		if s.Used {
			used = append(used, s.Name)
		}
	}
	still := "nothing else"
	if len(used) > 0 {
		still = strings.Join(used, " and ")
	}
	for _, s := range rep.Sources {
		if s.Used || s.Name == exits.SourceUserspace || strings.HasPrefix(s.Reason, "not requested") {
			continue
		}
		lines = append(lines, fmt.Sprintf("%s unavailable: %s; profiled with %s", s.Name, s.Reason, still))
	}
	return lines
}

// profileError turns a failure to profile anything into one line.
func profileError(f *profileFlags, args []string, err error) error {
	what := fmt.Sprintf("--pid %d", f.pid)
	if len(args) > 0 {
		what = args[0]
	}
	var ae *attach.AccessError
	switch {
	case errors.Is(err, attach.ErrBadConfig):
		return usageError{err}
	case errors.Is(err, attach.ErrGone):
		return &exitError{1, what + ": no such process (it exited, or the PID is wrong)"}
	case errors.Is(err, attach.ErrNotKVM):
		name := ""
		if n, e := attach.ProcessName(f.pid); e == nil {
			name = " (" + n + ")"
		}
		return &exitError{1, fmt.Sprintf("%s%s is not a KVM process: it holds no anon_inode:kvm-vm file descriptor", what, name)}
	case errors.As(err, &ae):
		return &exitError{1, fmt.Sprintf("%s: no ptrace access (%s: %v): run as root, as the VMM's user, or with CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH; nothing can be profiled without it", what, ae.Op, ae.Err)}
	case errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOENT):
		return &exitError{127, fmt.Sprintf("%s: command not found", what)}
	}
	return &exitError{1, err.Error()}
}
