//go:build linux

package cmdmode

import (
	"fmt"
	"io/fs"
	"os/exec"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestExitCode: mvm's status follows the shells' conventions (POSIX XCU
// 2.8.2): the code itself, 128+N for signal N, the start failures' own.
func TestExitCode(t *testing.T) {
	for _, c := range []struct {
		s    Status
		want int
	}{
		{Status{Exited: true, Code: 0}, 0},
		{Status{Exited: true, Code: 7}, 7},
		{Status{Exited: true, Code: 255}, 255},
		{Status{Signal: 9}, 137},
		{Status{Signal: 15}, 143},
		{Status{Code: ExitNotFound, Error: "x: not found"}, 127},
		{Status{Code: ExitNotExec, Error: "x: cannot execute"}, 126},
		{Status{Error: "no code"}, ExitMVM},
	} {
		if got := c.s.ExitCode(); got != c.want {
			t.Errorf("%+v.ExitCode() = %d, want %d", c.s, got, c.want)
		}
	}
}

// TestWaitStatus decodes real wait statuses of processes this test runs.
func TestWaitStatus(t *testing.T) {
	for _, c := range []struct {
		script string
		want   Status
	}{
		{"exit 0", Status{Exited: true, Code: 0}},
		{"exit 7", Status{Exited: true, Code: 7}},
		{"kill -9 $$", Status{Signal: 9}},
		{"kill -TERM $$", Status{Signal: 15}},
	} {
		cmd := exec.Command("/bin/sh", "-c", c.script)
		cmd.Run()
		ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if got := WaitStatus(ws); got != c.want {
			t.Errorf("sh -c %q: %+v, want %+v", c.script, got, c.want)
		}
	}
}

// TestStartFailure: the errors os/exec gives for a missing command and
// for a file that cannot be executed map to 127 and 126.
func TestStartFailure(t *testing.T) {
	dir := t.TempDir()
	_, notFound := exec.LookPath("mvm-no-such-command-here")
	noExec := exec.Command(dir).Start() // a directory
	for _, c := range []struct {
		err  error
		want int
	}{
		{notFound, ExitNotFound},
		{&fs.PathError{Op: "fork/exec", Path: "/x", Err: unix.ENOENT}, ExitNotFound},
		{&fs.PathError{Op: "fork/exec", Path: "/x", Err: unix.EACCES}, ExitNotExec},
		{&fs.PathError{Op: "fork/exec", Path: "/x", Err: unix.ENOEXEC}, ExitNotExec},
		{noExec, ExitNotExec},
	} {
		s := StartFailure("cmd", c.err)
		if s.ExitCode() != c.want || s.Error == "" {
			t.Errorf("StartFailure(%v) = %+v, want code %d with a message", c.err, s, c.want)
		}
	}
}

// TestStatusRoundTrip: what the init encodes, the host parses back.
func TestStatusRoundTrip(t *testing.T) {
	for _, s := range []Status{{Exited: true, Code: 3}, {Signal: 2}, {Code: 127, Error: "ls: not found"}} {
		line := s.Encode()
		if line[len(line)-1] != '\n' {
			t.Errorf("%+v encodes without a newline: %q", s, line)
		}
		got, err := ParseStatus(line[:len(line)-1])
		if err != nil || got != s {
			t.Errorf("ParseStatus(%q) = %+v, %v; want %+v", line, got, err, s)
		}
	}
}

// TestParseStatusRejects: a guest's garbage is an error, not a status.
func TestParseStatusRejects(t *testing.T) {
	for _, line := range []string{``, `{`, `{}`, `{"exited":true,"code":300}`, `{"signal":99}`,
		`{"signal":-1}`, `{"exited":true,"signal":9}`, `{"exited":true,"code":-1}`, `[1]`} {
		if s, err := ParseStatus([]byte(line)); err == nil {
			t.Errorf("ParseStatus(%q) = %+v, accepted", line, s)
		}
	}
}

func FuzzParseStatus(f *testing.F) {
	for _, s := range []string{`{"exited":true,"code":7}`, `{"signal":9,"code":0}`, `{"code":127,"error":"x"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseStatus(b)
		if err != nil {
			return
		}
		if c := s.ExitCode(); c < 0 || c > 255 {
			t.Fatalf("ParseStatus(%q) gives exit code %d", b, c)
		}
		if len(s.Error) > 303 {
			t.Fatalf("error message of %d bytes kept", len(s.Error))
		}
	})
}

// TestConsoleLine: the init's console line parses back; other console
// lines do not.
func TestConsoleLine(t *testing.T) {
	line := ConsoleLine(125, "the guest kernel lacks CONFIG_VIRTIO_MMIO")
	code, msg, ok := ParseConsoleLine(line)
	if !ok || code != 125 || msg != "the guest kernel lacks CONFIG_VIRTIO_MMIO" {
		t.Errorf("ParseConsoleLine(%q) = %d, %q, %v", line, code, msg, ok)
	}
	for _, l := range []string{"[    0.1] Linux version 6.12", "mvm-init: error x: y", "mvm-init: error 0: y", "mvm-init: error 300: y", "mvm-init: error 0125: y", "mvm-init: error 125"} {
		if _, _, ok := ParseConsoleLine(l); ok {
			t.Errorf("ParseConsoleLine(%q) accepted", l)
		}
	}
}

// fakeProbe is a guest kernel's sysfs and /proc/filesystems.
type fakeProbe struct {
	paths map[string]bool
	fs    string
}

func (p fakeProbe) Exists(path string) bool { return p.paths[path] }
func (p fakeProbe) Filesystems() string     { return p.fs }

// TestMissingDrivers names exactly the options whose drivers are absent.
func TestMissingDrivers(t *testing.T) {
	all := fakeProbe{paths: map[string]bool{"/sys/bus/platform/drivers/virtio-mmio": true, "/sys/bus/virtio/drivers/virtio_console": true},
		fs: "nodev\tsysfs\nnodev\tfuse\n\tfuseblk\nnodev\tvirtiofs\n"}
	if m := MissingDrivers(all); len(m) != 0 {
		t.Errorf("all there: missing %v", m)
	}
	none := fakeProbe{fs: "nodev\tsysfs\nnodev\tfusectl\n"}
	if got := fmt.Sprint(MissingDrivers(none)); got != "[CONFIG_VIRTIO_MMIO CONFIG_VIRTIO_CONSOLE CONFIG_FUSE_FS CONFIG_VIRTIO_FS]" {
		t.Errorf("none there: missing %s", got)
	}
	noFS := all
	noFS.fs = "nodev\tfuse\n"
	if got := fmt.Sprint(MissingDrivers(noFS)); got != "[CONFIG_VIRTIO_FS]" {
		t.Errorf("no virtiofs: missing %s", got)
	}
}
