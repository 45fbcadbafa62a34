package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/mvm-dev/mvm/cmdmode"
	"github.com/mvm-dev/mvm/runsummary"
	"github.com/mvm-dev/mvm/vmm"
)

// commandRun is command mode's host side (mvm run --kernel K -- CMD): the
// guest's configuration and initramfs, the ports of CMD's streams and
// status, and the mapping of how the run ended to mvm's exit status.
type commandRun struct {
	args []string
	// tty: an interactive shell (nothing after --, on a terminal): the
	// guest gives it a terminal, mvm's is raw meanwhile.
	tty bool

	sigs chan []byte // messages for the init (cmdmode.ParseControl), read by the status port

	mu          sync.Mutex
	status      *cmdmode.Status
	statusErr   error
	initLine    string // the init's console failure line, if any
	initCode    int
	onStatus    func() // stops the VM once the status is in
	vm          interface{ MarkCommandEnd(time.Time) }
	statusBytes bytes.Buffer
}

// commandGiven reports whether a run command line has a command after
// "--" (decided before cobra parses the flags, so that a bad flag in
// command mode exits 125 too).
func commandGiven(args []string) bool {
	if len(args) == 0 || args[0] != "run" {
		return false
	}
	i := slices.Index(args, "--")
	return i >= 0 && i < len(args)-1
}

// commandArgs returns the command after "--", or an error when words come
// before it (mvm run takes no other arguments). Nothing after "--" on a
// terminal is an interactive shell: $SHELL, else /bin/sh.
func commandArgs(cmd *cobra.Command, args []string) ([]string, error) {
	dash := cmd.ArgsLenAtDash()
	if len(args) == 0 {
		if dash < 0 {
			return nil, nil
		}
		if !term.IsTerminal(int(os.Stdin.Fd())) || !term.IsTerminal(int(os.Stdout.Fd())) {
			return nil, usageError{errors.New("nothing after --: give the command to run in the guest, or run mvm on a terminal for an interactive shell")}
		}
		if sh := os.Getenv("SHELL"); sh != "" {
			return []string{sh}, nil
		}
		return []string{"/bin/sh"}, nil
	}
	if dash != 0 {
		return nil, usageError{fmt.Errorf("unexpected argument %q: put the command to run in the guest after --, e.g. mvm run --kernel Image -- uname -r", args[0])}
	}
	return args, nil
}

// commandCmdline is command mode's default kernel command line: the
// console on the UART without earlycon (the guest's console is hidden or
// logged; quiet keeps it short, and every character costs exits),
// panic=-1 so that a kernel panic resets the guest at once (mvm: 255)
// instead of hanging, and cryptomgr.notests: no self-tests of the crypto
// algorithms the kernel registers (Documentation/admin-guide/
// kernel-parameters.txt; the flag was added for short-lived VMs, and
// fips=1 overrides it). Those tests run at boot and again when a module
// load first verifies a signature, in the middle of the command's run:
// in the lab they were a third of a Debian kernel's boot (kernel_to_user
// 1.14 s -> 0.75 s) and scattered the command phase over 0.2-0.6 s
// (docs/devices.md, "Command mode against QEMU + virtiofsd"). A kernel
// developer testing crypto code gives --cmdline.
func commandCmdline(serial string) string {
	tty := "ttyS0"
	if serial == string(vmm.SerialPL011) {
		tty = "ttyAMA0"
	}
	return "console=" + tty + " quiet panic=-1 cryptomgr.notests"
}

// configure turns cfg into command mode's VM: the host's root as a
// read-only share before the --share ones, the console ports, and the
// initramfs with mvm itself as /init and the modules the guest needs.
func (c *commandRun) configure(cfg *vmm.Config, modulesFlag, rootfs string, overlays []string) error {
	if cfg.Initrd != "" {
		return usageError{errors.New("--initrd cannot be used with a command: mvm builds the guest's initramfs itself (drop --initrd, or drop the command after --)")}
	}
	if cfg.OnReset != vmm.ResetExit {
		return usageError{errors.New("--on-reset reboot cannot be used with a command: a guest reset ends the command")}
	}
	rootDir, lowers, err := commandRoot(rootfs, overlays)
	if err != nil {
		return err
	}
	root := vmm.Share{HostDir: rootDir, At: "/", Tag: cmdmode.RootTag, ReadOnly: true}
	var mounts []cmdmode.GuestMount
	for _, s := range cfg.Shares {
		if s.Tag == cmdmode.RootTag {
			return usageError{fmt.Errorf("--share tag %s is the guest root's; choose another tag=", s.Tag)}
		}
		mounts = append(mounts, cmdmode.GuestMount{Tag: s.Tag, At: s.At, ReadOnly: s.ReadOnly})
	}
	cfg.Shares = append([]vmm.Share{root}, cfg.Shares...)
	if err := cfg.Validate(); err != nil {
		return usageError{err}
	}

	mods, err := c.modules(cfg, modulesFlag, len(lowers) > 0)
	if err != nil {
		return usageError{err}
	}
	env := childEnviron()
	if env == nil {
		env = os.Environ()
	}
	dir, err := os.Getwd()
	if err != nil {
		dir = "/"
	}
	groups, _ := os.Getgroups()
	gcfg := cmdmode.GuestConfig{
		Args: c.args, Env: env, Dir: dir,
		UID: os.Getuid(), GID: os.Getgid(), Groups: groups,
		RootTag: cmdmode.RootTag, Tmpfs: cmdmode.DefaultTmpfs, Shares: mounts, Overlays: lowers,
	}
	if c.tty {
		gcfg.TTY = true
		if cols, rows, err := term.GetSize(int(os.Stdout.Fd())); err == nil {
			gcfg.Rows, gcfg.Cols = uint16(rows), uint16(cols)
		}
	}
	// The guest's init is this very binary (an arm64 Linux one wherever
	// mvm can run a VM); it knows it is the init by being PID 1 as /init.
	// Without its DWARF and symbol table (a third of it): less to copy
	// into the guest and for the guest kernel to unpack. Only its headers
	// are read here: the rest goes from the file straight into guest RAM
	// when the VM loads the archive (reading and copying the ~20 MB
	// binary through the heap cost more than a tenth of a command's run
	// in the lab, docs/devices.md).
	initBin, err := cmdmode.StrippedFile("/proc/self/exe")
	if err != nil {
		return fmt.Errorf("read mvm's own binary for the guest's init: %w", err)
	}
	archive, err := cmdmode.Archive(initBin, gcfg, mods)
	if err != nil {
		return fmt.Errorf("build the guest's initramfs: %w", err)
	}
	cfg.InitrdArchive = archive

	c.sigs = make(chan []byte, 8)
	cfg.Ports = []vmm.Port{
		{Name: cmdmode.PortStdin, In: os.Stdin},
		{Name: cmdmode.PortStdout, Out: &pipeOut{w: os.Stdout, c: c}},
		{Name: cmdmode.PortStderr, Out: &pipeOut{w: os.Stderr, c: c}},
		{Name: cmdmode.PortStatus, In: &sigReader{ch: c.sigs}, Out: statusWriter{c}},
	}
	return nil
}

// modules resolves the modules the guest needs: from --modules DIR, else
// the kernel build tree --kernel named, else the host's
// /lib/modules/RELEASE with the kernel's release; none when there is no
// such directory (the init then names what the kernel lacks).
func (c *commandRun) modules(cfg *vmm.Config, flag string, overlay bool) ([]cmdmode.Module, error) {
	var names []string
	for _, d := range cmdmode.Drivers {
		names = append(names, d.Module)
	}
	if overlay {
		names = append(names, cmdmode.OverlayDriver.Module)
	}
	dir := flag
	if dir != "" {
		st, err := os.Stat(dir)
		if err != nil {
			return nil, fmt.Errorf("--modules %w", unwrapPath(err))
		}
		if !st.IsDir() {
			return nil, fmt.Errorf("--modules %s is not a directory (give an INSTALL_MOD_PATH tree, a /lib/modules/RELEASE directory or a directory of .ko files)", dir)
		}
	}
	if dir != "" {
		// The release only picks among several lib/modules/RELEASE
		// directories; unpacking the kernel for it costs (a compressed
		// one is unpacked again by vmm.New), so only then.
		release := ""
		if cmdmode.NeedsRelease(dir) {
			var err error
			if release, err = kernelRelease(cfg); err != nil {
				return nil, fmt.Errorf("--modules %s has several lib/modules directories and the kernel's release is unknown: %w", dir, err)
			}
		}
		return findModules(cmdmode.ModuleDir(dir, release), names)
	}
	k, err := vmm.OpenKernel(cfg.Kernel, cfg.Memory)
	if err != nil {
		return nil, err
	}
	if k.Tree != "" {
		return findModules(k.Tree, names)
	}
	img, err := kernelImage(k)
	if err != nil {
		return nil, nil
	}
	release, err := cmdmode.KernelRelease(img)
	if err != nil {
		return nil, nil
	}
	dir = filepath.Join("/lib/modules", release)
	if _, err := os.Stat(dir); err != nil {
		return nil, nil
	}
	return findModules(dir, names)
}

// commandRoot checks --rootfs and --overlay (mvm run and mvm bench, before
// anything starts) and returns the guest root's host directory and the
// overlays' guest paths.
func commandRoot(rootfs string, overlays []string) (string, []string, error) {
	rootDir := "/"
	if rootfs != "" {
		st, err := os.Stat(rootfs)
		if err != nil {
			return "", nil, usageError{fmt.Errorf("--rootfs %s: %w: give a directory tree for the guest's root", rootfs, unwrapPath(err))}
		}
		if !st.IsDir() {
			return "", nil, usageError{fmt.Errorf("--rootfs %s is not a directory: give a directory tree for the guest's root", rootfs)}
		}
		if rootDir, err = filepath.Abs(rootfs); err != nil {
			return "", nil, usageError{fmt.Errorf("--rootfs %s: %w", rootfs, err)}
		}
		// The init moves its /proc, /sys and /dev onto the new root: it
		// cannot make the directories in a read-only share.
		for _, d := range []string{"proc", "sys", "dev"} {
			if st, err := os.Stat(filepath.Join(rootDir, d)); err != nil || !st.IsDir() {
				return "", nil, usageError{fmt.Errorf("--rootfs %s has no /%s directory: the guest's root needs /proc, /sys and /dev (empty directories will do)", rootfs, d)}
			}
		}
	}
	var lowers []string
	for _, o := range overlays {
		at, err := overlayPath(rootDir, o)
		if err != nil {
			return "", nil, usageError{err}
		}
		if slices.Contains(lowers, at) {
			return "", nil, usageError{fmt.Errorf("--overlay %s is given twice", o)}
		}
		lowers = append(lowers, at)
	}
	return rootDir, lowers, nil
}

// overlayPath checks an --overlay DIR against the guest's root (the
// host's /, or --rootfs) and returns its path in the guest: DIR itself
// (made absolute) without --rootfs, DIR inside that tree with it.
func overlayPath(root, dir string) (string, error) {
	at := dir
	if root == "/" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return "", fmt.Errorf("--overlay %s: %w", dir, err)
		}
		at = abs
	} else if !filepath.IsAbs(dir) {
		return "", fmt.Errorf("--overlay %s: with --rootfs give the directory's absolute path in that tree, e.g. /usr", dir)
	}
	at = filepath.Clean(at)
	if at == "/" {
		return "", errors.New("--overlay /: the root itself cannot be overlaid; name a directory in it, e.g. /usr or /etc")
	}
	host := filepath.Join(root, at)
	st, err := os.Stat(host)
	if err != nil {
		return "", fmt.Errorf("--overlay %s: %w: give a directory of the guest's root", host, unwrapPath(err))
	}
	if !st.IsDir() {
		return "", fmt.Errorf("--overlay %s is not a directory: give a directory of the guest's root", host)
	}
	return at, nil
}

// kernelRelease is the release of the kernel cfg names.
func kernelRelease(cfg *vmm.Config) (string, error) {
	k, err := vmm.OpenKernel(cfg.Kernel, cfg.Memory)
	if err != nil {
		return "", err
	}
	img, err := kernelImage(k)
	if err != nil {
		return "", err
	}
	return cmdmode.KernelRelease(img)
}

func findModules(dir string, names []string) ([]cmdmode.Module, error) {
	mods, err := cmdmode.FindModules(dir, names)
	if err != nil {
		return nil, fmt.Errorf("--modules: %w", err)
	}
	return mods, nil
}

// kernelImage is the whole (unpacked) Image.
func kernelImage(k vmm.Kernel) ([]byte, error) {
	if k.Size == 0 {
		return k.Data, nil
	}
	return os.ReadFile(k.Path)
}

// sigReader gives the messages for the init (signals for CMD, window
// sizes) to the status port.
type sigReader struct {
	ch      chan []byte
	pending []byte
}

func (s *sigReader) Read(p []byte) (int, error) {
	if len(s.pending) == 0 {
		b, ok := <-s.ch
		if !ok {
			return 0, io.EOF
		}
		s.pending = b
	}
	n := copy(p, s.pending)
	s.pending = s.pending[n:]
	return n, nil
}

// forward passes a signal mvm received to CMD; false when the queue is
// full (the guest is not taking them: stop the VM).
func (c *commandRun) forward(sig syscall.Signal) bool {
	return c.send([]byte{byte(sig)})
}

// send queues a message for the init without blocking.
func (c *commandRun) send(m []byte) bool {
	select {
	case c.sigs <- m:
		return true
	default:
		return false
	}
}

// watchTerminal passes the terminal's size to the guest whenever it
// changes (SIGWINCH); the returned func stops it.
func (c *commandRun) watchTerminal() func() {
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	go func() {
		for range winch {
			if cols, rows, err := term.GetSize(int(os.Stdout.Fd())); err == nil {
				c.send(cmdmode.Resize(uint16(rows), uint16(cols)))
			}
		}
	}()
	return func() { signal.Stop(winch); close(winch) }
}

// pipeOut is one of CMD's output streams on mvm's. When its reader has
// gone (mvm run -- CMD | head), CMD gets SIGPIPE, as it would writing to
// that pipe itself; its status then says so (141). mvm's own SIGPIPE is
// caught in command mode, so the write fails with EPIPE instead of
// killing mvm before it stops virtiofsd.
type pipeOut struct {
	w    io.Writer
	c    *commandRun
	once sync.Once
}

func (p *pipeOut) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	if errors.Is(err, syscall.EPIPE) {
		p.once.Do(func() { p.c.forward(syscall.SIGPIPE) })
	}
	return n, err
}

// statusWriter takes the status port's output: one status line.
type statusWriter struct{ c *commandRun }

func (w statusWriter) Write(p []byte) (int, error) {
	c := w.c
	c.mu.Lock()
	if c.status != nil || c.statusErr != nil || c.statusBytes.Len()+len(p) > 4096 {
		c.mu.Unlock()
		return len(p), nil
	}
	c.statusBytes.Write(p)
	line, _, complete := bytes.Cut(c.statusBytes.Bytes(), []byte("\n"))
	if !complete {
		c.mu.Unlock()
		return len(p), nil
	}
	if c.vm != nil {
		c.vm.MarkCommandEnd(time.Now())
	}
	st, err := cmdmode.ParseStatus(line)
	if err != nil {
		c.statusErr = err
	} else {
		c.status = &st
	}
	stop := c.onStatus
	c.mu.Unlock()
	if stop != nil {
		stop()
	}
	return len(p), nil
}

// consoleWatcher passes the guest console on and remembers the init's
// failure line (cmdmode.ConsoleLine) for when no status comes.
type consoleWatcher struct {
	c    *commandRun
	out  io.Writer
	line []byte
}

func (w *consoleWatcher) Write(p []byte) (int, error) {
	for _, b := range p {
		if b == '\n' {
			if code, msg, ok := cmdmode.ParseConsoleLine(string(w.line)); ok {
				w.c.mu.Lock()
				w.c.initCode, w.c.initLine = code, msg
				w.c.mu.Unlock()
			}
			w.line = w.line[:0]
		} else if len(w.line) < 512 {
			w.line = append(w.line, b)
		}
	}
	return w.out.Write(p)
}

// timeoutCause is the context cause when --timeout ran out.
type timeoutCause struct{ d time.Duration }

func (t timeoutCause) Error() string { return fmt.Sprintf("timed out after %v", t.d) }

// statusCause is the context cause when CMD's status came in.
var statusCause = errors.New("the command ended")

// exit maps how the run ended to mvm's exit status in command mode.
func (c *commandRun) exit(res vmm.Result, cause error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	name := c.args[0]
	var tc timeoutCause
	var sc signalCause
	switch {
	case c.status != nil:
		code := c.status.ExitCode()
		if c.status.Error != "" {
			return &exitError{code, c.status.Error}
		}
		return &exitError{code, ""}
	case c.statusErr != nil:
		return &exitError{cmdmode.ExitGuestDied, fmt.Sprintf("the guest sent a bad status for %s: %v", name, c.statusErr)}
	case errors.As(cause, &tc):
		return &exitError{cmdmode.ExitTimeout, fmt.Sprintf("%s %v", name, tc)}
	case errors.As(cause, &sc):
		return &exitError{128 + int(sc.sig), sc.Error()}
	case c.initLine != "":
		return &exitError{c.initCode, c.initLine}
	}
	how := string(res.Exit)
	if res.Err != nil {
		how += ": " + res.Err.Error()
	}
	if res.Exit == runsummary.ExitReset {
		how = "the guest reset (a kernel panic, with the panic=-1 of command mode's command line)"
	}
	return &exitError{cmdmode.ExitGuestDied, fmt.Sprintf("the guest ended without %s's status: %s (--console file:PATH keeps the kernel's console)", name, how)}
}

// asCommandError makes any error of command mode that is not already an
// exit status mvm's own failure, 125, so it never passes for CMD's.
func asCommandError(err error) error {
	if err == nil {
		return nil
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	_, msg := exitStatus(err)
	return &exitError{cmdmode.ExitMVM, strings.TrimSpace(msg)}
}
