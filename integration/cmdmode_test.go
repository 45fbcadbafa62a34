//go:build linux && arm64

package integration

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// commandArgs is mvm run in command mode on the lab kernel: its modules
// (virtio_mmio is one there), the lab's virtiofsd, the host's root (the
// lab machine's) shared read-only.
func commandArgs(t *testing.T, extra ...string) []string {
	args := []string{"run", "--kernel", env(t, "MVM_LINUX"), "--modules", env(t, "MVM_MODULES"),
		"--virtiofsd", env(t, "MVM_VIRTIOFSD"), "--memory", "256M", "--rng=false"}
	return append(args, extra...)
}

// rootDir is a fresh directory on the host's root outside /tmp (the guest
// has its own tmpfs there), removed after the test.
func rootDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/", "mvm-cmdmode-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// TestCommandMode: one boot of mvm run -- CMD with a shell script that
// copies its stdin (random binary bytes piped in) and then a host file
// (through the read-only root) to stdout, writes text and binary bytes to
// stderr, tries to write to the read-only root, checks its working
// directory and /tmp, writes a file to a writable --share mounted at its
// host path, and exits 7. mvm's stdout must be exactly stdin then the
// host file (byte-exact, without a byte of the kernel's console), its
// stderr exactly what the script wrote there, its status 7, the share's
// file on the host with the invoking user as owner, the command phase in
// --result-json, and no virtiofsd left.
func TestCommandMode(t *testing.T) {
	dir, share := rootDir(t), rootDir(t)
	resultJSON := filepath.Join(t.TempDir(), "result.json")
	in := make([]byte, 70000)
	rand.Read(in)
	host := randomFile(t, dir, "host.bin", 150000)
	hostData, err := os.ReadFile(host)
	if err != nil {
		t.Fatal(err)
	}
	script := `cat; cat "$1"
printf 'to stderr\n\000\377\n' >&2
(echo x >/mvm-cmdmode-rw) 2>&1 | grep -q 'Read-only file system' || echo "a write to the root did not fail with EROFS" >&2
[ "$(pwd)" = "$2" ] || echo "cwd is $(pwd), want $2" >&2
echo ok >/tmp/x && [ "$(cat /tmp/x)" = ok ] || echo "/tmp is not writable" >&2
echo "written in the guest" >"$3/out.txt"
exit 7`
	r := mvmCmd(t, 3*time.Minute, func(c *exec.Cmd) {
		c.Stdin = bytes.NewReader(in)
		c.Dir = dir
	}, append(commandArgs(t, "--share", share, "--result-json", resultJSON), "--", "/bin/sh", "-c", script, "sh", host, dir, share)...)
	if r.code != 7 {
		t.Errorf("exit status %d, want the command's 7\nstderr:\n%q", r.code, r.stderr)
	}
	want := append(append([]byte{}, in...), hostData...)
	if !bytes.Equal([]byte(r.stdout), want) {
		t.Errorf("stdout is %d bytes, want %d: stdin (%d) then the host file (%d); first difference at %d",
			len(r.stdout), len(want), len(in), len(hostData), firstDiff([]byte(r.stdout), want))
	}
	if wantErr := "to stderr\n\x00\xff\n"; r.stderr != wantErr {
		t.Errorf("stderr %q, want exactly %q", r.stderr, wantErr)
	}
	if b, err := os.ReadFile(filepath.Join(share, "out.txt")); err != nil || string(b) != "written in the guest\n" {
		t.Errorf("the share's out.txt on the host: %q, %v", b, err)
	} else if st, err := os.Stat(filepath.Join(share, "out.txt")); err == nil && int(st.Sys().(*syscall.Stat_t).Uid) != os.Getuid() {
		t.Errorf("out.txt belongs to uid %d, want the invoking user's %d", st.Sys().(*syscall.Stat_t).Uid, os.Getuid())
	}
	if _, err := os.Stat("/mvm-cmdmode-rw"); err == nil {
		os.Remove("/mvm-cmdmode-rw")
		t.Error("the guest's write to the read-only root reached the host")
	}
	commandPhase(t, resultJSON)
	noVirtiofsdLeft(t)
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestCommandModeEnds: the other ways a command ends, one boot each (exit
// 7 is TestCommandMode's, 0 TestCommandModeShell's) — not found (127, one
// line); SIGTERM to mvm reaches the command,
// whose trap prints and then dies of it (143: killed by signal 15, its
// output there); --timeout (124); a kernel that lacks virtio-mmio
// (no modules given: 125, one line naming the option); and a kernel panic
// the command causes (255, one line).
// After each, no virtiofsd, socket or runtime directory is left.
func TestCommandModeEnds(t *testing.T) {
	empty := t.TempDir()
	for _, c := range []struct {
		name     string
		args     []string
		code     int
		stdout   string // exact, unless empty
		stderrRe string // one mvm: line containing this, unless empty
		stderrOK string // also accepted as stderr, when stderrRe is empty
		sigterm  bool
	}{
		{name: "not-found", args: []string{"--", "/no/such/command"}, code: 127, stderrRe: "not found"},
		{name: "sigterm", args: []string{"--", "/bin/sh", "-c", `trap 'echo got TERM; trap - TERM; kill -TERM $$' TERM; echo ready; while :; do sleep 1; done`},
			// The signal goes to the command's process group, as Ctrl-C
			// on a terminal does: when it lands while the shell waits
			// for a sleep, the shell reports that child's death on its
			// stderr (seen once in the insn lab).
			code: 128 + 15, stdout: "ready\ngot TERM\n", stderrOK: "Terminated\n", sigterm: true},
		// Short: the VM is stopped wherever it is (the cleanup is the point).
		{name: "timeout", args: []string{"--timeout", "3s", "--", "sleep", "600"}, code: 124, stderrRe: "timed out"},
		{name: "no-virtio-mmio", args: []string{"--modules", empty, "--", "true"}, code: 125, stderrRe: "CONFIG_VIRTIO_MMIO"},
		// The command crashes the kernel (sysrq c, root in the lab): no
		// status comes back, the guest resets (panic=-1), mvm says so.
		{name: "kernel-panic", args: []string{"--", "/bin/sh", "-c", "echo c > /proc/sysrq-trigger; sleep 600"}, code: 255, stderrRe: "panic"},
	} {
		t.Run(c.name, func(t *testing.T) {
			// For no-virtio-mmio, the later --modules wins.
			args := commandArgs(t, c.args...)
			var r result
			switch {
			case c.sigterm:
				r = runAndSignal(t, args, "ready", syscall.SIGTERM)
			default:
				r = mvm(t, 3*time.Minute, args...)
			}
			if r.code != c.code {
				t.Errorf("exit status %d, want %d\nstdout %q\nstderr %q", r.code, c.code, r.stdout, r.stderr)
			}
			if c.stdout != "" && r.stdout != c.stdout {
				t.Errorf("stdout %q, want %q", r.stdout, c.stdout)
			}
			if c.stderrRe != "" {
				oneLineError(t, r, c.code, c.stderrRe)
			} else if r.stderr != "" && r.stderr != c.stderrOK {
				t.Errorf("stderr %q, want none", r.stderr)
			}
			noVirtiofsdLeft(t)
		})
	}
}

// commandPhase checks the command phase of a run's --result-json: there,
// after kernel_to_user (the init's marker starts it), within total.
func commandPhase(t *testing.T, path string) {
	t.Helper()
	p := readJSON[struct {
		Phases map[string]int64 `json:"phases_ns"`
	}](t, path).Phases
	t.Logf("phases: vmm_setup %v, kernel_to_user %v, command %v, total %v", time.Duration(p["vmm_setup"]),
		time.Duration(p["kernel_to_user"]), time.Duration(p["command"]), time.Duration(p["total"]))
	if p["command"] <= 0 || p["kernel_to_user"] <= 0 {
		t.Errorf("no command or kernel_to_user phase in %v", p)
	}
	if p["vmm_setup"]+p["kernel_to_user"]+p["command"] > p["total"] {
		t.Errorf("vmm_setup + kernel_to_user + command exceed total: %v", p)
	}
}

// runAndSignal starts mvm, waits for a stdout line, sends sig and returns
// the finished run.
func runAndSignal(t *testing.T, args []string, line string, sig syscall.Signal) result {
	t.Helper()
	cmd := exec.Command(env(t, "MVM_BIN"), args...)
	var errb lockedBuffer
	cmd.Stderr = &errb
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(3*time.Minute, func() { cmd.Process.Kill() })
	defer timer.Stop()
	var out strings.Builder
	br := bufio.NewReader(pipe)
	for {
		l, err := br.ReadString('\n')
		out.WriteString(l)
		if strings.TrimSpace(l) == line {
			cmd.Process.Signal(sig)
		}
		if err != nil {
			break
		}
	}
	cmd.Wait()
	return result{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
}

// TestCommandModeBadInput: command mode's bad input exits 125 (never a
// status a command could have) with one line, before any guest or
// virtiofsd starts.
func TestCommandModeBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, want string
		args       []string
	}{
		{"initrd", "--initrd", []string{"--initrd", env(t, "MVM_LINUX"), "--", "true"}},
		{"modules-missing", "--modules", []string{"--modules", filepath.Join(dir, "nope"), "--", "true"}},
		{"bad-flag", "unknown flag", []string{"--no-such-flag", "--", "true"}},
		{"no-virtiofsd", "does not exist", []string{"--virtiofsd", filepath.Join(dir, "virtiofsd"), "--", "true"}},
		{"word-before-dash", "after --", []string{"true", "--", "true"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := mvm(t, 30*time.Second, commandArgs(t, c.args...)...)
			oneLineError(t, r, 125, c.want)
			noVirtiofsdLeft(t)
		})
	}
}

// hostPTY opens a pseudo-terminal pair in the lab machine, rows by cols.
func hostPTY(t *testing.T, rows, cols uint16) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetWinsize(int(m.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols}); err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}

// TestCommandModeShell: nothing after -- on a terminal is an interactive
// shell on a terminal of the guest's, driven here through a pty as a user
// would type: the terminal has the host's size, job control works (a
// background job listed and killed by its job number), and the shell's
// exit status, 0, is mvm's. The kill is SIGKILL: an interactive ash
// ignores SIGTERM and its forked child keeps that until it resets its
// signals, so a SIGTERM sent right after the fork can be lost and the
// wait then lasts the whole sleep (seen once in CI: the shell hung after
// "[1]+ Running sleep 300").
func TestCommandModeShell(t *testing.T) {
	master, slave := hostPTY(t, 50, 132)
	defer master.Close()
	cmd := exec.Command(env(t, "MVM_BIN"), commandArgs(t, "--")...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	cmd.Env = append(os.Environ(), "SHELL=/bin/sh", "PS1=prompt$ ")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	timer := time.AfterFunc(3*time.Minute, func() { cmd.Process.Kill() })
	defer timer.Stop()
	var out lockedBuffer
	done := make(chan struct{})
	go func() {
		io.Copy(&out, master) // until EIO: mvm and the pty's last holder gone
		close(done)
	}()
	io.WriteString(master, "stty size; echo $((6*7)); tty; sleep 300 & jobs; kill -KILL %1; wait %1; echo killed $?; exit 0\n")
	err := cmd.Wait()
	<-done
	code := cmd.ProcessState.ExitCode()
	text := out.String()
	t.Logf("mvm -- (a shell): exit %d, err %v\n%s", code, err, text)
	if code != 0 {
		t.Errorf("exit status %d, want the shell's 0", code)
	}
	for _, want := range []string{"50 132", "42", "/dev/pts/", "sleep 300", "killed 137"} {
		if !strings.Contains(text, want) {
			t.Errorf("the session lacks %q", want)
		}
	}
	if strings.Contains(text, "job control turned off") {
		t.Error("the shell has no job control")
	}
	noVirtiofsdLeft(t)
}

// TestCommandModeCompressedModules: modules as distributions ship them,
// xz-compressed (Debian's virtio_mmio.ko.xz from the lab kernel's
// package, not recompressed here): with a modules.dep the init hands the
// file to the kernel to decompress and the command runs on the share it
// made possible, virtio_mmio listed in /proc/modules; without one mvm
// cannot read the module's depends= and says what to do (125, one line),
// before any boot.
func TestCommandModeCompressedModules(t *testing.T) {
	src := filepath.Join(env(t, "MVM_MODULES_XZ"), "virtio_mmio.ko.xz")
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte("\xfd7zXZ\x00")) {
		t.Fatalf("%s is not xz data", src)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "virtio_mmio.ko.xz"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Run("no-modules.dep", func(t *testing.T) {
		r := mvm(t, time.Minute, commandArgs(t, "--modules", dir, "--", "true")...)
		oneLineError(t, r, 125, "depmod")
		noVirtiofsdLeft(t)
	})
	if err := os.WriteFile(filepath.Join(dir, "modules.dep"), []byte("virtio_mmio.ko.xz:\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Run("modules.dep", func(t *testing.T) {
		r := mvm(t, 3*time.Minute, commandArgs(t, "--modules", dir, "--", "cat", "/proc/modules")...)
		if r.code != 0 {
			t.Fatalf("exit %d, want 0\nstdout %q\nstderr %q", r.code, r.stdout, r.stderr)
		}
		if !regexp.MustCompile(`(?m)^virtio_mmio `).MatchString(r.stdout) {
			t.Errorf("virtio_mmio not in the guest's /proc/modules:\n%s", r.stdout)
		}
		noVirtiofsdLeft(t)
	})
}
