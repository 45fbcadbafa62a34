package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/mvm-dev/mvm/exits"
	"github.com/mvm-dev/mvm/exits/render"
	"github.com/mvm-dev/mvm/report"
	"github.com/mvm-dev/mvm/runsummary"
	"github.com/mvm-dev/mvm/vmm"
)

// defaultCmdline suits the platform mvm emulates: the 8250 UART is the
// console, with earlycon at its address for messages before the driver.
func defaultCmdline() string { return defaultCmdlineFor(vmm.Serial8250) }

// defaultCmdlineFor is the default command line for the console UART
// kind: Linux names the 16550 ttyS0 and the PL011 ttyAMA0; earlycon's
// uart8250,mmio does byte accesses, pl011,mmio32 32-bit ones
// (Documentation/admin-guide/kernel-parameters.txt, earlycon=).
func defaultCmdlineFor(k vmm.Serial) string {
	if k == vmm.SerialPL011 {
		return fmt.Sprintf("console=ttyAMA0 earlycon=pl011,mmio32,0x%08x", vmm.UARTBase)
	}
	return fmt.Sprintf("console=ttyS0 earlycon=uart8250,mmio,0x%08x", vmm.UARTBase)
}

type runFlags struct {
	kernel, initrd   string
	cmdline, append_ string
	cpus             int
	memory           string
	psci             string
	console          string
	serial           string
	onReset          string
	logLevel         string
	markers          []string
	resultJSON       string
	report           string
	profile          profileMode
	pmu              bool
	profileFormat    string
	profileOut       string
	perVCPU          bool
	profileSources   []string
	profilePlain     bool
	profileVia       string
	guestSymbols     string
	metricsAddr      string
	disks, nets      []string
	shares           []string
	virtiofsd        string
	rng              bool
	seccomp          bool
	modules          string
	rootfs           string
	overlays         []string
	timeout          time.Duration
}

func (f *runFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.kernel, "kernel", "", "arm64 Linux Image, Image.gz (or zstd'd), EFI zboot vmlinuz with a gzip or zstd payload, kernel build tree (its arch/arm64/boot/Image), or a flat binary loaded at the start of RAM (required)")
	fl.StringVar(&f.initrd, "initrd", "", "initramfs or initrd to load for the kernel")
	fl.StringVar(&f.cmdline, "cmdline", defaultCmdline(), fmt.Sprintf("kernel command line (/chosen/bootargs); with --serial pl011 the default is %q", defaultCmdlineFor(vmm.SerialPL011)))
	fl.StringVar(&f.append_, "append", "", "text to add to the end of the kernel command line")
	fl.IntVar(&f.cpus, "cpus", 1, "number of vCPUs")
	fl.StringVar(&f.memory, "memory", "512M", "guest RAM, e.g. 512M or 2G")
	fl.StringVar(&f.psci, "psci", "auto", "who answers PSCI: user (mvm, needs Linux 6.4+), kernel (KVM), auto (user when possible)")
	fl.StringVar(&f.console, "console", "stdio", "guest serial console: stdio, none, or file:PATH")
	fl.StringVar(&f.serial, "serial", "8250", "the console UART at 0x09000000: 8250 (a 16550, Linux's ttyS0) or pl011 (an Arm PL011, ttyAMA0, for kernels with only AMBA_PL011)")
	fl.StringVar(&f.onReset, "on-reset", "exit", "on guest reset: exit (status 0) or reboot")
	fl.BoolVar(&f.pmu, "pmu", false, "give the guest a PMUv3 (perf stat, cycle counter) emulated by KVM; needs KVM_CAP_ARM_PMU_V3 on the host (see mvm caps)")
	fl.StringVar(&f.logLevel, "log-level", "warn", "mvm's own log level on stderr: debug, info, warn, error")
	fl.StringArrayVar(&f.markers, "marker", nil, "console marker NAME=REGEX: record when a console line first matches (repeatable)")
	fl.StringVar(&f.resultJSON, "result-json", "", "write the run's result (exit, boot phases, timeline, memory) as JSON to this file")
	fl.StringVar(&f.report, "report", "", "write an HTML report of the run (phases, per-vCPU bring-up, exits over time, profile) to this file")
	fl.Var(&f.profile, "profile", "profile VM exits (userspace exits, KVM stats fd, kvm_exit tracepoints) and print the report at the end; --profile=light samples the tracepoints in short windows instead (exact stats-fd counts, the other reasons estimated and marked so; its cost and accuracy: docs/profile.md)")
	fl.Lookup("profile").NoOptDefVal = "true"
	fl.StringVar(&f.profileFormat, "profile-format", "table", "profile report format: table or json")
	fl.StringVar(&f.profileOut, "profile-out", "", "write the profile report to this file instead of stderr")
	fl.BoolVar(&f.perVCPU, "per-vcpu", false, "profile tables per vCPU as well as the total")
	fl.StringSliceVar(&f.profileSources, "profile-sources", nil, "limit --profile to these sources: userspace, kvm_stats, tracepoint (default: all the host allows; tracepoints cost the most)")
	fl.BoolVar(&f.profilePlain, "profile-plain", false, "keep the tracepoint profile to perf kvm stat's reasons: no breakdown (system register, device, PSCI function, WFI/WFE), percentiles, boot phases or guest code (to measure what they cost)")
	fl.StringVar(&f.profileVia, "profile-via", "auto", "how --profile reads the kvm tracepoints: auto (BPF programs counting in the kernel where the host allows them, else perf ring buffers; the report's Sources say which and why), bpf, or perf (costs more; auto takes it for --guest-symbols, which needs every exit's guest PC)")
	fl.StringVar(&f.guestSymbols, "guest-symbols", "", "guest kernel symbols (System.map, a /proc/kallsyms dump or a vmlinux ELF): the profile names the guest functions the exits came from")
	fl.StringVar(&f.metricsAddr, "metrics-addr", "", "serve Prometheus metrics on HOST:PORT (/metrics) while the VM runs")
	fl.StringArrayVar(&f.disks, "disk", nil, "virtio-blk disk PATH[,ro] on a raw image (repeatable: /dev/vda, /dev/vdb, ... in order); ro refuses guest writes")
	fl.StringArrayVar(&f.nets, "net", nil, "virtio-net NIC tap=NAME[,mac=MAC] on an existing tap device (repeatable); default MAC derived from the tap name")
	fl.StringArrayVar(&f.shares, "share", nil, "virtio-fs share HOSTDIR[,at=GUESTPATH][,tag=TAG][,ro] served by its own virtiofsd (repeatable; default tag shareN, N counting from 0); the guest mounts it with mount -t virtiofs TAG DIR; ro makes guest writes fail with EROFS")
	fl.StringVar(&f.virtiofsd, "virtiofsd", vmm.DefaultVirtiofsd, "the virtiofsd binary --share starts (Debian's virtiofsd package)")
	fl.BoolVar(&f.rng, "rng", true, "virtio-rng entropy device fed from the host's getrandom (--rng=false to leave it out)")
	fl.StringVar(&f.modules, "modules", "", "with a command: kernel modules for the guest (an INSTALL_MOD_PATH tree, a /lib/modules/RELEASE directory or a directory of .ko files; default: the build tree --kernel names, else /lib/modules/RELEASE of the kernel's release)")
	fl.StringVar(&f.rootfs, "rootfs", "", "with a command: this directory tree is the guest's root instead of the host's / (shared read-only the same way, tmpfs on /tmp, /run, /var/tmp and /root where it has them)")
	fl.StringArrayVar(&f.overlays, "overlay", nil, "with a command: a writable tmpfs overlay over this directory of the guest's root (a host path, or a path inside --rootfs DIR): writes succeed in the guest, the host's directory stays unchanged, the changes are dropped at exit (repeatable; the guest kernel needs CONFIG_OVERLAY_FS)")
	fl.DurationVar(&f.timeout, "timeout", 0, "stop the run after this long (e.g. 30s, 5m): exit status 124, like timeout(1)")
	fl.BoolVar(&f.seccomp, "seccomp", true, "once the VM is set up, run every mvm thread under a seccomp allow-list (docs/seccomp.md); a call outside it kills mvm with SIGSYS. --seccomp=false is for debugging")
}

// config turns the flags into a vmm.Config (without the console).
func (f *runFlags) config(start time.Time) (vmm.Config, error) {
	mem, err := runsummary.ParseSize(f.memory)
	if err != nil {
		return vmm.Config{}, usageError{fmt.Errorf("--memory: %w", err)}
	}
	psci, err := runsummary.ParsePSCIMode(f.psci)
	if err != nil {
		return vmm.Config{}, usageError{fmt.Errorf("--psci: %w", err)}
	}
	onReset, err := vmm.ParseResetAction(f.onReset)
	if err != nil {
		return vmm.Config{}, usageError{err}
	}
	serial, err := vmm.ParseSerial(f.serial)
	if err != nil {
		return vmm.Config{}, usageError{fmt.Errorf("--serial: %w", err)}
	}
	// The default command line follows the UART. mvm bench passes the
	// default explicitly, so it is recognised by value, not by the flag
	// being unset; it names ttyS0, which a PL011 guest does not have.
	cmdline := f.cmdline
	if serial != vmm.Serial8250 && cmdline == defaultCmdline() {
		cmdline = defaultCmdlineFor(serial)
	}
	if f.append_ != "" {
		cmdline = strings.TrimSpace(cmdline + " " + f.append_)
	}
	cfg := vmm.Config{
		Kernel: f.kernel, Initrd: f.initrd, Cmdline: cmdline,
		CPUs: f.cpus, Memory: mem, PSCI: psci, OnReset: onReset, PMU: f.pmu, Serial: serial,
		Start: start, Profile: f.profile != profileOff, ProfileLight: f.profile == profileLight, MetricsAddr: f.metricsAddr, ProfileSources: f.profileSources,
		Seccomp:      f.seccomp,
		ProfilePlain: f.profilePlain, GuestSymbols: f.guestSymbols, ProfileVia: f.profileVia,
	}
	if f.profileFormat != "table" && f.profileFormat != "json" {
		return vmm.Config{}, usageError{fmt.Errorf("--profile-format %q: use table or json", f.profileFormat)}
	}
	if (f.profileOut != "" || f.perVCPU || len(f.profileSources) > 0 || f.profilePlain || f.guestSymbols != "" || f.profileVia != "auto") && f.profile == profileOff {
		return vmm.Config{}, usageError{errors.New("--profile-out, --per-vcpu, --profile-sources, --profile-plain, --profile-via and --guest-symbols need --profile")}
	}
	if f.profile == profileLight && (f.profilePlain || f.guestSymbols != "" || f.profileVia != "auto") {
		return vmm.Config{}, usageError{errors.New("--profile=light keeps no breakdown, guest code or choice of reader: drop --profile-plain, --guest-symbols and --profile-via, or use --profile")}
	}
	switch f.profileVia {
	case "auto", "bpf", "perf":
	default:
		return vmm.Config{}, usageError{fmt.Errorf("--profile-via %q: use auto, bpf or perf", f.profileVia)}
	}
	for _, src := range f.profileSources {
		if src != exits.SourceUserspace && src != exits.SourceKVMStats && src != exits.SourceTracepoint {
			return vmm.Config{}, usageError{fmt.Errorf("--profile-sources: unknown source %q: use userspace, kvm_stats or tracepoint", src)}
		}
	}
	for _, spec := range f.disks {
		d, err := vmm.ParseDisk(spec)
		if err != nil {
			return cfg, usageError{err}
		}
		cfg.Disks = append(cfg.Disks, d)
	}
	for _, spec := range f.nets {
		n, err := vmm.ParseNet(spec)
		if err != nil {
			return cfg, usageError{err}
		}
		cfg.Nets = append(cfg.Nets, n)
	}
	for i, spec := range f.shares {
		sh, err := vmm.ParseShare(spec, i)
		if err != nil {
			return cfg, usageError{err}
		}
		cfg.Shares = append(cfg.Shares, sh)
	}
	cfg.Virtiofsd = f.virtiofsd
	cfg.RNG = f.rng
	for _, spec := range f.markers {
		mk, err := vmm.ParseConsoleMarker(spec)
		if err != nil {
			return cfg, usageError{fmt.Errorf("--marker: %w", err)}
		}
		cfg.Markers = append(cfg.Markers, mk)
	}
	if err := cfg.Validate(); err != nil {
		return cfg, usageError{err}
	}
	return cfg, nil
}

func newRunCmd(start time.Time) *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run --kernel PATH [flags] [-- CMD [ARGS...]]",
		Short: "Run a command in an arm64 Linux guest, or boot a guest or bare-metal payload",
		Long: fmt.Sprintf(`mvm run --kernel PATH [flags] -- CMD [ARGS...]
runs CMD in a guest of that kernel (command mode): the guest's root is
this host's /, shared read-only through virtio-fs (virtiofsd, as --share),
with tmpfs on /tmp, /run, /var/tmp and /root; CMD runs in the current
directory, with this environment, as the invoking user. Its stdin, stdout
and stderr are mvm's, byte for byte (virtio-console ports); the kernel's
console is hidden (--console file:PATH keeps it). SIGINT and SIGTERM go to
CMD. mvm itself is the guest's init, in an initramfs built for the run
with the modules the guest needs (virtio_mmio, virtio_console, fuse,
virtiofs, if not built in) from --modules DIR, the build tree --kernel
names, or /lib/modules/RELEASE. mvm's exit status is CMD's: its code,
128+N when killed by signal N, 127 not found, 126 not executable, 124 on
--timeout, 255 when the guest died without a status (kernel panic), 125
when mvm fails or is given bad input (one line; a kernel lacking what
command mode needs is named by its CONFIG_ options). --rootfs DIR makes
another tree the guest's root instead of / (it needs /proc, /sys and /dev
directories); --overlay DIR puts a writable tmpfs overlay over a directory
of the guest's root (writes succeed in the guest, the host's directory is
unchanged, the changes are dropped at exit; needs CONFIG_OVERLAY_FS, the
overlay module is loaded like the others). Nothing after --, on
a terminal, is an interactive $SHELL on a terminal of the guest's (job
control, the window size passed on).

Without a command, mvm run boots the guest with a serial console on this
terminal.

--kernel takes an arm64 Image, a compressed one (Image.gz, Image.zst, or
the EFI zboot vmlinuz Fedora and Ubuntu ship, with a gzip or zstd
payload; mvm unpacks it, at most --memory and 1 GiB), a kernel build tree
(DIR/arch/arm64/boot/Image or Image.gz), or a flat binary.

The guest gets --cpus vCPUs (one thread each), --memory of RAM at 1 GiB
guest-physical, an in-kernel GICv3, the architected timer, a 16550 UART at
%#08x (console=ttyS0; --serial pl011: an Arm PL011 there instead,
console=ttyAMA0), a PL031 real-time clock at %#08x that reads
the host's wall clock (so the guest's date is right at boot) and a device
tree describing exactly that, passed in X0. PSCI (CPU_ON, CPU_OFF,
SYSTEM_OFF, ...) is answered by mvm itself when the host kernel allows it
(Linux 6.4+), else by KVM.

With --pmu every vCPU also has KVM's PMUv3 (an arm,armv8-pmuv3 node,
overflow interrupt on PPI 7), so perf inside the guest counts cycles and
events; mvm refuses it where the host lacks KVM_CAP_ARM_PMU_V3 (mvm caps
says). Without --pmu the guest's ID_AA64DFR0_EL1 shows no PMU and its PMU
register accesses are UNDEFINED.

Exit status: 0 when the guest powers off (or resets, with --on-reset exit);
1 when it crashes or a vCPU fails, or the host cannot run the VM (not
arm64, no usable /dev/kvm, a capability a flag needs); 2 for bad input: a
bad flag value, or a file a flag names that is missing, unreadable or of
the wrong kind, all checked before the host is probed; 130/143 on
SIGINT/SIGTERM; 124 on --timeout. On a terminal, type Ctrl-A x to stop
the guest. For a
guest that seems stuck, kill -USR1 prints each vCPU's state, exit count
and guest PC to stderr and lets the VM run on.

Devices (virtio-mmio, docs/devices.md): --disk PATH[,ro] adds a virtio-blk
disk on a raw image (the guest sees /dev/vda, /dev/vdb, ... in flag order;
guest flushes reach the file with fdatasync; an image another mvm has open
writable is refused); --net tap=NAME[,mac=MAC] a virtio-net NIC on an
existing tap; a virtio-rng entropy device is there unless --rng=false;
--share HOSTDIR[,at=GUESTPATH][,tag=TAG][,ro] a virtio-fs device served by
its own virtiofsd (guest: mount -t virtiofs TAG DIR; guest RAM is then a
shared memfd; a missing virtiofsd or HOSTDIR, or a tag or guest path given
twice, is bad input; a writable share needs root). The
guest kernel needs virtio_mmio and the device drivers (built in or loaded).`, vmm.UARTBase, vmm.RTCBase),
		Example: `  # Run a command in the kernel just built, on this host's files:
  mvm run --kernel arch/arm64/boot/Image -- uname -r
  echo data | mvm run --kernel Image --cpus 4 --timeout 5m -- sha256sum
  mvm run --kernel Image --rootfs ~/roots/debian --overlay /var -- apt-get check

  # Boot Debian's arm64 kernel with a busybox initramfs on 4 vCPUs:
  mvm run --kernel vmlinuz --initrd initrd.gz --cpus 4 --memory 1G \
      --append "rdinit=/init quiet"

  # The host's own kernel, or one from a kernel build tree:
  mvm run --kernel /boot/vmlinuz-$(uname -r) --initrd initrd.gz
  mvm run --kernel ~/src/linux --initrd initrd.gz

  # Root on an ext4 disk, a second disk read-only, networking on tap0:
  mvm run --kernel vmlinuz --initrd initrd.gz --disk root.ext4 \
      --disk data.img,ro --net tap=tap0 --append "root=/dev/vda rw"

  # A kernel built with only the PL011 driver (kunit's arm64 config):
  mvm run --kernel Image --serial pl011

  # With a guest PMU, to run perf stat inside the guest:
  mvm run --kernel vmlinuz --initrd initrd.gz --cpus 4 --pmu

  # Run a bare-metal payload (flat binary, entered at the start of RAM):
  mvm run --kernel hello.bin --console file:out.log

  # An HTML report of a profiled 64-vCPU boot, and its JSON for later:
  mvm run --kernel smp.bin --cpus 64 --profile --profile-out /dev/null \
      --report boot.html --result-json boot.json`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cmdArgs, err := commandArgs(cmd, args)
			if err != nil {
				if cmd.ArgsLenAtDash() >= 0 {
					return asCommandError(err) // meant as command mode
				}
				return err
			}
			if len(cmdArgs) == 0 {
				return runVM(cmd, &f, start, nil)
			}
			tty := len(args) == 0 // nothing after --: an interactive shell
			return asCommandError(runVM(cmd, &f, start, &commandRun{args: cmdArgs, tty: tty}))
		},
	}
	f.register(cmd)
	return cmd
}

func newLogger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, usageError{fmt.Errorf("--log-level %q: use debug, info, warn or error", level)}
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}

// check turns the flags into the VM's configuration (without the console)
// and checks the flags vmm.Config does not carry: every mistake in the
// command line itself, and in the files it names for mvm to write (the
// console file, --result-json, --report, --profile-out: creatable, though
// not created yet). The files mvm reads are vmm.New's and vmm.CheckBoot's
// to check; both do so before they probe the host.
func (f *runFlags) check(start time.Time) (vmm.Config, error) {
	if f.kernel == "" {
		return vmm.Config{}, usageError{errors.New("--kernel is required: an arm64 kernel (Image, Image.gz, EFI zboot vmlinuz, build tree) or a flat binary (see 'mvm run --help')")}
	}
	cfg, err := f.config(start)
	if err != nil {
		return cfg, err
	}
	if cfg.Logger, err = newLogger(f.logLevel); err != nil {
		return cfg, err
	}
	if err := checkConsole(f.console); err != nil {
		return cfg, err
	}
	for _, o := range []struct{ flag, path string }{
		{"--result-json", f.resultJSON}, {"--report", f.report}, {"--profile-out", f.profileOut},
	} {
		if err := checkOutput(o.flag, o.path); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

// runVM runs the VM; cr is set in command mode (a command after --).
func runVM(cmd *cobra.Command, f *runFlags, start time.Time, cr *commandRun) error {
	if cr != nil {
		// The console is the kernel's, apart from CMD's streams: hidden
		// unless asked for.
		if !cmd.Flags().Changed("console") {
			f.console = "none"
		}
		if !cmd.Flags().Changed("cmdline") {
			f.cmdline = commandCmdline(f.serial)
		}
	}
	if f.timeout < 0 {
		return usageError{fmt.Errorf("--timeout %v: give a positive duration, e.g. 30s", f.timeout)}
	}
	cfg, err := f.check(start)
	if err != nil {
		return err
	}
	if cr != nil {
		if err := cr.configure(&cfg, f.modules, f.rootfs, f.overlays); err != nil {
			return err
		}
	} else {
		for _, o := range []struct {
			name string
			set  bool
		}{{"modules", f.modules != ""}, {"rootfs", f.rootfs != ""}, {"overlay", len(f.overlays) > 0}} {
			if o.set {
				return usageError{fmt.Errorf("--%s is for command mode: give the command after --, e.g. mvm run --kernel Image --%s DIR -- uname -r", o.name, o.name)}
			}
		}
	}

	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	if f.timeout > 0 {
		t := time.AfterFunc(f.timeout, func() { cancel(timeoutCause{f.timeout}) })
		defer t.Stop()
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	if cr != nil {
		// A write to a closed stdout pipe returns EPIPE (pipeOut passes
		// it on to CMD) instead of killing mvm.
		pipe := make(chan os.Signal, 1)
		signal.Notify(pipe, syscall.SIGPIPE)
		defer signal.Stop(pipe)
	}
	go func() {
		for s := range sigs {
			// In command mode a signal goes to CMD, whose status then
			// says what happened; a second one while the first is still
			// undelivered stops the VM.
			if cr != nil && cr.forward(s.(syscall.Signal)) {
				continue
			}
			cancel(signalCause{s.(syscall.Signal)})
			return
		}
	}()
	if cr != nil {
		cr.onStatus = func() { cancel(statusCause) }
	}

	con, err := openConsole(f.console, cancel)
	if err != nil {
		return err
	}
	defer con.Close()
	cfg.Console, cfg.ConsoleIn = con.out, con.in
	if cr != nil {
		cfg.Console, cfg.ConsoleIn = &consoleWatcher{c: cr, out: con.out}, nil
	}
	if cr != nil && cr.tty {
		// The guest's terminal does the line editing, echo and Ctrl-C
		// (to its foreground job); mvm's passes every byte.
		old, err := term.MakeRaw(int(os.Stdin.Fd()))
		if err != nil {
			return fmt.Errorf("put the terminal in raw mode: %w", err)
		}
		defer term.Restore(int(os.Stdin.Fd()), old)
		defer cr.watchTerminal()()
	}

	m, err := vmm.New(cfg)
	if err != nil {
		return err
	}
	closeVM := sync.OnceValue(m.Close)
	defer closeVM()
	// The VM has its own reference to command mode's initramfs archive,
	// and drops it once it is in guest RAM.
	cfg.InitrdArchive = nil
	if cr != nil {
		cr.mu.Lock()
		cr.vm = m
		cr.mu.Unlock()
	}
	if err := con.create(); err != nil {
		return err
	}
	// kill -USR1 prints where each vCPU is (a guest that seems stuck).
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer func() { signal.Stop(usr1); close(usr1) }()
	go func() {
		for range usr1 {
			m.WriteState(os.Stderr, time.Second)
		}
	}()
	res, err := m.Run(ctx)
	con.Close() // restore the terminal before printing anything
	if err != nil {
		return err
	}
	sum := res.Summary()
	if f.resultJSON != "" {
		if err := writeJSON(f.resultJSON, sum); err != nil {
			return fmt.Errorf("--result-json: %w", err)
		}
	}
	if f.report != "" {
		if err := report.WriteFile(f.report, func(w io.Writer) error { return report.WriteRun(w, &sum, "mvm run") }); err != nil {
			return fmt.Errorf("--report: %w", err)
		}
	}
	if res.Profile != nil {
		if err := writeProfile(f, res); err != nil {
			return err
		}
	}
	if cr != nil {
		// Stopping the devices takes in what the guest wrote last: a
		// status queued just before its power-off.
		closeVM()
		return cr.exit(res, context.Cause(ctx))
	}
	var tc timeoutCause
	if errors.As(context.Cause(ctx), &tc) {
		return &exitError{124, tc.Error()}
	}
	return exitFor(res, context.Cause(ctx))
}

// signalCause is the context cause when a signal stopped the VM.
type signalCause struct{ sig syscall.Signal }

func (s signalCause) Error() string { return "stopped by " + s.sig.String() }

// errQuit is the cause when the user typed the console escape.
var errQuit = errors.New("stopped from the console (Ctrl-A x)")

// exitFor maps a run's result to mvm's exit status.
func exitFor(res vmm.Result, cause error) error {
	switch res.Exit {
	case runsummary.ExitPowerOff, runsummary.ExitReset:
		return nil
	case runsummary.ExitCrash:
		return &exitError{1, res.Err.Error()}
	case runsummary.ExitFault:
		return &exitError{1, fmt.Sprintf("guest stopped: %v", res.Err)}
	case runsummary.ExitStopped:
		var sc signalCause
		if errors.As(cause, &sc) {
			return &exitError{128 + int(sc.sig), sc.Error()}
		}
		if errors.Is(cause, errQuit) {
			return &exitError{130, errQuit.Error()}
		}
		return &exitError{1, fmt.Sprintf("stopped: %v", cause)}
	}
	return &exitError{1, fmt.Sprintf("unexpected end of run: %s", res.Exit)}
}

// writeJSON writes v as indented JSON to path ("-" is stdout).
func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	if path == "-" {
		_, err = os.Stdout.Write(data)
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// writeProfile prints the exit profile where --profile-out says.
func writeProfile(f *runFlags, res vmm.Result) error {
	w := os.Stderr
	if f.profileOut != "" {
		out, err := os.Create(f.profileOut)
		if err != nil {
			return fmt.Errorf("--profile-out: %w", err)
		}
		defer out.Close()
		w = out
	}
	var err error
	if f.profileFormat == "json" {
		err = res.Profile.WriteJSON(w)
	} else {
		err = render.Table(w, res.Profile, render.Options{PerVCPU: f.perVCPU})
	}
	if err != nil {
		return fmt.Errorf("write the profile: %w", err)
	}
	return nil
}
