//go:build linux

package cmdmode

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mvm-dev/mvm/devices"
	"github.com/mvm-dev/mvm/vmm"
)

// IsGuestInit reports whether this process is the init of a command-mode
// guest: PID 1, started as /init (the kernel's rdinit default). mvm's
// main calls Main then, before anything else.
func IsGuestInit() bool {
	return os.Getpid() == 1 && len(os.Args) > 0 && os.Args[0] == "/"+InitPath
}

// Main is the guest's init: it never returns. It sets the guest up, runs
// the command, reports its status on the status port and powers off.
func Main() {
	in := &guestInit{}
	in.run()
	in.powerOff()
}

type guestInit struct {
	cfg    GuestConfig
	status *os.File // the status port, once open
}

// powerOff ends the guest: mvm has the status by now, or reads the
// console line and the missing status as the guest's failure.
func (in *guestInit) powerOff() {
	unix.Sync()
	unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	// Only if the reboot call failed: init exiting panics the kernel,
	// which mvm's panic=-1 turns into a reset (exit 255).
	os.Exit(1)
}

// fail reports an error that stops the init: on the status port when it
// is open, else on the kernel console.
func (in *guestInit) fail(code int, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if in.status != nil {
		in.status.Write(Status{Code: code, Error: msg}.Encode())
		return
	}
	os.Stderr.WriteString(ConsoleLine(code, msg))
}

func (in *guestInit) run() {
	// What the kernel gives init: an empty initramfs root and /dev/console.
	for _, m := range []struct{ src, dir, fstype string }{
		{"proc", "/proc", "proc"}, {"sysfs", "/sys", "sysfs"}, {"devtmpfs", "/dev", "devtmpfs"},
	} {
		if err := unix.Mount(m.src, m.dir, m.fstype, unix.MS_NOSUID, ""); err != nil && err != unix.EBUSY {
			in.fail(ExitMVM, "mount %s on %s: %v", m.fstype, m.dir, err)
			return
		}
	}
	writeBootMarker()
	data, err := os.ReadFile("/" + ConfigPath)
	if err == nil {
		err = json.Unmarshal(data, &in.cfg)
	}
	if err != nil {
		in.fail(ExitMVM, "read /%s: %v", ConfigPath, err)
		return
	}
	for _, m := range in.cfg.Modules {
		if err := loadModule(m); err != nil {
			// Not fatal by itself: what is missing is named below.
			os.Stderr.WriteString("mvm-init: " + err.Error() + "\n")
		}
	}
	missing := MissingDrivers(hostProbe{})
	if hasConfig(missing, "CONFIG_VIRTIO_MMIO") || hasConfig(missing, "CONFIG_VIRTIO_CONSOLE") {
		// No ports without these: the console is the only way out.
		in.fail(ExitMVM, "%s", MissingMessage(missing))
		return
	}
	ports, err := findPorts(portsWait)
	if err != nil {
		in.fail(ExitMVM, "%v", err)
		return
	}
	open := func(name string, flag int) (*os.File, error) {
		// A blocking descriptor (not Go's poller), so that the command
		// inherits it blocking.
		fd, err := unix.Open(ports[name], flag|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("open %s (%s): %w", ports[name], name, err)
		}
		return os.NewFile(uintptr(fd), ports[name]), nil
	}
	if in.status, err = open(PortStatus, unix.O_RDWR); err != nil {
		in.fail(ExitMVM, "%v", err)
		return
	}
	if len(missing) > 0 {
		in.fail(ExitMVM, "%s", MissingMessage(missing))
		return
	}
	if len(in.cfg.Overlays) > 0 && !hasFilesystem(hostProbe{}, "overlay") {
		in.fail(ExitMVM, "the guest kernel lacks %s: --overlay needs it, built in or as a module (--modules DIR, or /lib/modules/RELEASE on the host)", OverlayDriver.Config)
		return
	}
	var stdio [3]*os.File
	for i, p := range []struct {
		name string
		flag int
	}{{PortStdin, unix.O_RDONLY}, {PortStdout, unix.O_WRONLY}, {PortStderr, unix.O_WRONLY}} {
		if stdio[i], err = open(p.name, p.flag); err != nil {
			in.fail(ExitMVM, "%v", err)
			return
		}
	}
	if err := in.switchRoot(); err != nil {
		in.fail(ExitMVM, "%v", err)
		return
	}
	in.status.Write(in.runCommand(stdio).Encode())
}

// writeBootMarker writes 0x41 to mvm's marker device: the userspace boot
// marker, the end of kernel_to_user and the start of the command phase
// (docs/boot-phases.md). The device is outside RAM and claimed by no
// driver, so /dev/mem maps it under STRICT_DEVMEM. A kernel without
// /dev/mem just has no marker.
func writeBootMarker() {
	fd, err := unix.Open("/dev/mem", unix.O_RDWR|unix.O_SYNC|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	b, err := unix.Mmap(fd, vmm.MarkerBase, 4096, unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return
	}
	b[0] = devices.MarkUserspace
	unix.Munmap(b)
}

// loadModule loads one module file; a compressed one is decompressed by
// the kernel (MODULE_INIT_COMPRESSED_FILE, include/uapi/linux/module.h).
// A module already there (built in, or loaded) is not an error.
func loadModule(path string) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("module %s: %w", path, err)
	}
	defer unix.Close(fd)
	flags := 0
	if Compressed(path) {
		flags = unix.MODULE_INIT_COMPRESSED_FILE
	}
	if err := unix.FinitModule(fd, "", flags); err != nil && err != unix.EEXIST {
		return fmt.Errorf("load module %s: %w", filepath.Base(path), err)
	}
	return nil
}

// Probe answers whether the guest kernel has what the init needs.
type Probe interface {
	// Exists reports whether a sysfs path exists.
	Exists(path string) bool
	// Filesystems is /proc/filesystems.
	Filesystems() string
}

type hostProbe struct{}

func (hostProbe) Exists(p string) bool { _, err := os.Stat(p); return err == nil }
func (hostProbe) Filesystems() string {
	b, _ := os.ReadFile("/proc/filesystems")
	return string(b)
}

// MissingDrivers lists the Config options of the Drivers the kernel has
// neither built in nor loaded: a driver shows as its directory under
// /sys/bus/*/drivers, a file system in /proc/filesystems.
func MissingDrivers(p Probe) []string {
	fsList := map[string]bool{}
	for _, line := range strings.Split(p.Filesystems(), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 {
			fsList[f[len(f)-1]] = true
		}
	}
	var out []string
	for _, d := range Drivers {
		var ok bool
		switch d.Module {
		case "virtio_mmio":
			ok = p.Exists("/sys/bus/platform/drivers/virtio-mmio")
		case "virtio_console":
			ok = p.Exists("/sys/bus/virtio/drivers/virtio_console")
		case "fuse":
			ok = fsList["fuse"]
		case "virtiofs":
			ok = fsList["virtiofs"]
		}
		if !ok {
			out = append(out, d.Config)
		}
	}
	return out
}

// MissingMessage is the one line that names the missing options.
func MissingMessage(configs []string) string {
	return fmt.Sprintf("the guest kernel lacks %s: command mode needs them, built in or as modules (--modules DIR, or /lib/modules/RELEASE on the host)", strings.Join(configs, ", "))
}

// hasFilesystem reports whether /proc/filesystems lists fs.
func hasFilesystem(p Probe, fs string) bool {
	for _, line := range strings.Split(p.Filesystems(), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && f[len(f)-1] == fs {
			return true
		}
	}
	return false
}

func hasConfig(list []string, c string) bool {
	for _, x := range list {
		if x == c {
			return true
		}
	}
	return false
}

// portsWait bounds findPorts. The names come from mvm (PORT_NAME after the
// guest opens each port), so a slow host delays them: 5 s was too short
// once in the wall-clock lab on a host loaded with a dozen emulated
// machines (2026-12-03, BenchmarkCommandMode: exit 125, "did not appear
// within 5s"). Waiting costs nothing when they come; when they never do,
// the driver is there (MissingDrivers checked it) and mvm is stuck, which
// --timeout bounds on the host.
const portsWait = 60 * time.Second

// findPorts waits until every port has its name (the driver creates the
// name file when the host's PORT_NAME arrives, which mvm sends after the
// port's open) and returns the device paths by name.
func findPorts(wait time.Duration) (map[string]string, error) {
	deadline := time.Now().Add(wait)
	for {
		found := map[string]string{}
		names, _ := filepath.Glob("/sys/class/virtio-ports/*/name")
		for _, n := range names {
			b, err := os.ReadFile(n)
			if err != nil {
				continue
			}
			found[strings.TrimSpace(string(b))] = "/dev/" + filepath.Base(filepath.Dir(n))
		}
		all := true
		for _, p := range Ports() {
			if _, ok := found[p]; !ok {
				all = false
			}
		}
		if all {
			return found, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the virtio-console ports %v did not appear within %v", Ports(), wait)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// switchRoot mounts the host's root read-only at /newroot with tmpfs over
// the writable places and the shares at their paths, moves /proc, /sys
// and /dev there and makes it the root (the initramfs cannot be
// pivot_root'ed away: switch_root's MS_MOVE and chroot instead).
func (in *guestInit) switchRoot() error {
	const nr = "/newroot"
	if err := unix.Mount(in.cfg.RootTag, nr, "virtiofs", unix.MS_RDONLY, ""); err != nil {
		return fmt.Errorf("mount the host's root (virtio-fs tag %s): %w", in.cfg.RootTag, err)
	}
	for _, d := range in.cfg.Tmpfs {
		if st, err := os.Stat(nr + d); err != nil || !st.IsDir() {
			continue
		}
		mode := "mode=1777"
		if d == "/root" {
			mode = "mode=0700"
		} else if d == "/run" {
			mode = "mode=0755"
		}
		if err := unix.Mount("tmpfs", nr+d, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, mode); err != nil {
			return fmt.Errorf("mount tmpfs on %s: %w", d, err)
		}
	}
	for i, d := range in.cfg.Overlays {
		if err := mountOverlay(nr+d, fmt.Sprintf("/mvm/overlay/%d", i)); err != nil {
			return fmt.Errorf("--overlay %s: %w", d, err)
		}
	}
	for _, s := range in.cfg.Shares {
		var flags uintptr
		if s.ReadOnly {
			flags = unix.MS_RDONLY
		}
		if err := unix.Mount(s.Tag, nr+s.At, "virtiofs", flags, ""); err != nil {
			return fmt.Errorf("mount share %s on %s: %w (the directory must exist in the guest)", s.Tag, s.At, err)
		}
	}
	for _, d := range []string{"/proc", "/sys", "/dev"} {
		if err := unix.Mount(d, nr+d, "", unix.MS_MOVE, ""); err != nil {
			return fmt.Errorf("move %s into the host's root: %w", d, err)
		}
	}
	// devtmpfs has no /dev/pts or /dev/shm; programs expect both.
	if os.Mkdir(nr+"/dev/pts", 0o755) == nil {
		unix.Mount("devpts", nr+"/dev/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "ptmxmode=0666,mode=0620")
	}
	if os.Mkdir(nr+"/dev/shm", 0o1777) == nil {
		unix.Mount("tmpfs", nr+"/dev/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777")
	}
	if err := unix.Chdir(nr); err != nil {
		return err
	}
	if err := unix.Mount(".", "/", "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("move the host's root to /: %w", err)
	}
	if err := unix.Chroot("."); err != nil {
		return fmt.Errorf("chroot: %w", err)
	}
	return unix.Chdir("/")
}

// mountOverlay puts a writable overlay over dir: the read-only directory
// is the lower layer, the upper and work directories are on a tmpfs of
// their own at scratch in the initramfs (they must be on one file system,
// Documentation/filesystems/overlayfs.rst), which nothing in the guest's
// root can reach, so the changes go when the guest does.
func mountOverlay(dir, scratch string) error {
	if err := os.MkdirAll(scratch, 0o700); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", scratch, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755"); err != nil {
		return fmt.Errorf("mount its tmpfs: %w", err)
	}
	upper, work := scratch+"/upper", scratch+"/work"
	for _, d := range []string{upper, work} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	// The upper directory's root takes the lower's owner and mode, so
	// that writing to it is allowed to whoever the host allows.
	if st, err := os.Stat(dir); err == nil {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			os.Chown(upper, int(sys.Uid), int(sys.Gid))
		}
		os.Chmod(upper, st.Mode().Perm()|st.Mode()&(fs.ModeSticky))
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", dir, upper, work)
	if err := unix.Mount("overlay", dir, "overlay", 0, opts); err != nil {
		return fmt.Errorf("mount overlay (%s): %w", opts, err)
	}
	return nil
}

// runCommand starts the command as the host's user in its working
// directory, passes on the signals the host sends, and waits for it.
func (in *guestInit) runCommand(stdio [3]*os.File) Status {
	cfg := in.cfg
	if len(cfg.Args) == 0 {
		return Status{Code: ExitMVM, Error: "no command given"}
	}
	dir := cfg.Dir
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		dir = "/"
	}
	if err := os.Chdir(dir); err != nil {
		return Status{Code: ExitMVM, Error: fmt.Sprintf("chdir %s: %v", dir, err)}
	}
	// LookPath searches the PATH of the command's environment.
	os.Setenv("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	for _, kv := range cfg.Env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			os.Setenv("PATH", v)
		}
	}
	path, err := exec.LookPath(cfg.Args[0])
	if err != nil {
		return StartFailure(cfg.Args[0], err)
	}
	groups := make([]uint32, len(cfg.Groups))
	for i, g := range cfg.Groups {
		groups[i] = uint32(g)
	}
	cred := &syscall.Credential{Uid: uint32(cfg.UID), Gid: uint32(cfg.GID), Groups: groups}
	cmd := &exec.Cmd{
		Path: path, Args: cfg.Args, Env: cfg.Env, Dir: dir,
		Stdin: stdio[0], Stdout: stdio[1], Stderr: stdio[2],
		// Its own process group, like a shell's foreground job: a
		// signal reaches the command's children too.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Credential: cred},
	}
	var pty *os.File
	var relayed chan struct{}
	if cfg.TTY {
		master, slave, err := openPTY(cfg)
		if err != nil {
			return Status{Code: ExitMVM, Error: err.Error()}
		}
		pty = master
		defer master.Close()
		cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
		// A session of its own with the pty as controlling terminal
		// (fd 0 in the child): job control works, as after a login.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0, Credential: cred}
		defer slave.Close()
	}
	if err := cmd.Start(); err != nil {
		return StartFailure(cfg.Args[0], err)
	}
	if pty != nil {
		cmd.Stdin.(*os.File).Close()
		stdio[2].Close() // the terminal carries stderr too
		relayed = make(chan struct{})
		go func() { io.Copy(pty, stdio[0]) }()
		go func() {
			// Until the last holder of the terminal closes it (EIO).
			io.Copy(stdio[1], pty)
			close(relayed)
		}()
	} else {
		for _, f := range stdio {
			f.Close()
		}
	}
	pid := cmd.Process.Pid
	go in.control(pid, pty)
	err = cmd.Wait()
	if relayed != nil {
		// What the shell wrote last is still in the pty; a background
		// job that keeps the terminal open does not hold the status up.
		select {
		case <-relayed:
		case <-time.After(2 * time.Second):
		}
	}
	unix.Sync() // what CMD wrote to a writable share reaches the host
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return Status{Code: ExitMVM, Error: fmt.Sprintf("wait for %s: %v", cfg.Args[0], err)}
	}
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	return WaitStatus(ws)
}

// control applies what the host sends on the status port: signals to the
// command's process group (the session's, with a terminal), window sizes
// to the terminal.
func (in *guestInit) control(pid int, pty *os.File) {
	buf := make([]byte, 64)
	var rest []byte
	for {
		n, err := in.status.Read(buf)
		var msgs []Control
		msgs, rest = ParseControl(append(rest, buf[:n]...))
		for _, m := range msgs {
			switch {
			case m.Signal > 0:
				unix.Kill(-pid, unix.Signal(m.Signal))
			case pty != nil:
				// The kernel sends the foreground job SIGWINCH.
				unix.IoctlSetWinsize(int(pty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: m.Rows, Col: m.Cols})
			}
		}
		if err != nil || n == 0 {
			return
		}
	}
}

// openPTY opens a pseudo-terminal pair on the devpts mounted at
// /dev/pts (Documentation/filesystems/devpts.rst: its own ptmx node),
// sized as the host's terminal and owned by the command's user, as
// login(1) leaves it.
func openPTY(cfg GuestConfig) (master, slave *os.File, err error) {
	mfd, err := unix.Open("/dev/pts/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open /dev/pts/ptmx for the terminal: %w", err)
	}
	master = os.NewFile(uintptr(mfd), "/dev/pts/ptmx")
	if err := unix.IoctlSetPointerInt(mfd, unix.TIOCSPTLCK, 0); err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("unlock the terminal: %w", err)
	}
	n, err := unix.IoctlGetInt(mfd, unix.TIOCGPTN)
	if err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("terminal number: %w", err)
	}
	if cfg.Rows > 0 && cfg.Cols > 0 {
		unix.IoctlSetWinsize(mfd, unix.TIOCSWINSZ, &unix.Winsize{Row: cfg.Rows, Col: cfg.Cols})
	}
	name := fmt.Sprintf("/dev/pts/%d", n)
	sfd, err := unix.Open(name, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("open %s: %w", name, err)
	}
	unix.Fchown(sfd, cfg.UID, cfg.GID)
	unix.Fchmod(sfd, 0o620)
	return master, os.NewFile(uintptr(sfd), name), nil
}

// WaitStatus is the Status of an ended process.
func WaitStatus(ws syscall.WaitStatus) Status {
	if ws.Signaled() {
		return Status{Signal: int(ws.Signal())}
	}
	return Status{Exited: true, Code: ws.ExitStatus()}
}

// StartFailure is the Status of a command that could not be started:
// 127 when there is no such file (or no such command in PATH), 126 when
// it is there but cannot be executed, as a shell reports them.
func StartFailure(name string, err error) Status {
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return Status{Code: ExitNotFound, Error: fmt.Sprintf("%s: command not found in the guest", name)}
	case errors.Is(err, fs.ErrPermission), errors.Is(err, unix.ENOEXEC), errors.Is(err, unix.EISDIR):
		return Status{Code: ExitNotExec, Error: fmt.Sprintf("%s: cannot execute: %v", name, unwrapErrno(err))}
	}
	return Status{Code: ExitNotExec, Error: fmt.Sprintf("%s: %v", name, err)}
}

func unwrapErrno(err error) error {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return err
}
