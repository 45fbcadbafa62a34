//go:build linux && arm64

package integration

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestConsoleInputFromPipe: bytes on a non-terminal stdin reach the guest's
// UART receive FIFO in order.
func TestConsoleInputFromPipe(t *testing.T) {
	r := mvmCmd(t, time.Minute, func(c *exec.Cmd) {
		c.Stdin = strings.NewReader("hello, mvm q")
	}, "run", "--kernel", payload(t, "echo.bin"))
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if r.stdout != "ready\nHELLO, MVM " {
		t.Errorf("console %q, want %q", r.stdout, "ready\nHELLO, MVM ")
	}
}

// openPTY returns a pseudo-terminal pair.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx (is devpts mounted?): %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}

// readUntil reads the master side until want appears or the time is up.
func readUntil(m *os.File, buf *bytes.Buffer, want string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	tmp := make([]byte, 256)
	for time.Now().Before(deadline) {
		m.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		n, _ := m.Read(tmp)
		buf.Write(tmp[:n])
		if strings.Contains(buf.String(), want) {
			return true
		}
	}
	return false
}

// TestConsoleTerminal runs mvm on a pseudo-terminal: input reaches the
// guest in raw mode (no line buffering, no echo by the host), Ctrl-A x
// quits, and the terminal's settings are restored on every way out
// (guest power-off, Ctrl-A x, SIGTERM).
func TestConsoleTerminal(t *testing.T) {
	cases := []struct {
		name  string
		input string
		sig   syscall.Signal
		code  int
	}{
		{"poweroff", "abc q", 0, 0},
		{"ctrl-a x", "ab\x01x", 0, 130},
		{"sigterm", "ab", syscall.SIGTERM, 143},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, s := openPTY(t)
			defer m.Close()
			defer s.Close()
			before, err := unix.IoctlGetTermios(int(s.Fd()), unix.TCGETS)
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(env(t, "MVM_BIN"), "run", "--kernel", payload(t, "echo.bin"))
			cmd.Stdin, cmd.Stdout, cmd.Stderr = s, s, s
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			var out bytes.Buffer
			if !readUntil(m, &out, "ready", 30*time.Second) {
				cmd.Process.Kill()
				t.Fatalf("no ready line; got %q", out.String())
			}
			// In raw mode the guest sees each byte at once, without
			// waiting for a newline.
			m.Write([]byte(c.input))
			if !strings.Contains(c.input, "\x01") {
				if !readUntil(m, &out, "AB", 30*time.Second) {
					t.Errorf("guest did not echo the input without a newline (raw mode): %q", out.String())
				}
			}
			if c.sig != 0 {
				cmd.Process.Signal(c.sig)
			}
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("mvm did not exit; output %q", out.String())
			}
			if got := cmd.ProcessState.ExitCode(); got != c.code {
				t.Errorf("exit status %d, want %d; output %q", got, c.code, out.String())
			}
			after, err := unix.IoctlGetTermios(int(s.Fd()), unix.TCGETS)
			if err != nil {
				t.Fatal(err)
			}
			if *after != *before {
				t.Errorf("terminal settings not restored:\nbefore %+v\nafter  %+v", *before, *after)
			}
		})
	}
}
