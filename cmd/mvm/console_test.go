package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"

	"github.com/mvm-dev/mvm/runsummary"
	"github.com/mvm-dev/mvm/vmm"
)

// readAllFrom reads e to EOF or error with buffers of size bufSize and
// returns what the guest would get.
func readAllFrom(t *testing.T, e *escapeReader, bufSize int) ([]byte, error) {
	t.Helper()
	var got []byte
	buf := make([]byte, bufSize)
	for i := 0; i < 10000; i++ {
		n, err := e.Read(buf)
		if n < 0 || n > len(buf) {
			t.Fatalf("Read returned n = %d for a %d-byte buffer", n, len(buf))
		}
		got = append(got, buf[:n]...)
		if err != nil {
			return got, err
		}
	}
	t.Fatal("escapeReader never reached EOF")
	return nil, nil
}

func TestEscapeReader(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
		quit bool
	}{
		{"plain input", "ls -l\r", "ls -l\r", false},
		{"empty", "", "", false},
		{"Ctrl-A x quits", "\x01x", "", true},
		{"input before Ctrl-A x is kept", "echo hi\r\x01x", "echo hi\r", true},
		{"input after Ctrl-A x is dropped", "ab\x01xcd", "ab", true},
		{"Ctrl-A Ctrl-A sends one Ctrl-A", "a\x01\x01b", "a\x01b", false},
		{"Ctrl-A then a byte sends both", "\x01b", "\x01b", false},
		{"Ctrl-A then Ctrl-C", "\x01\x03", "\x01\x03", false},
		{"Ctrl-A Ctrl-A x is not an escape", "\x01\x01x", "\x01x", false},
		{"two Ctrl-A pairs", "\x01\x01\x01\x01", "\x01\x01", false},
		{"x alone is input", "xx", "xx", false},
		{"Ctrl-A a then Ctrl-A x", "\x01a\x01x", "\x01a", true},
	}
	for _, tt := range tests {
		// The same bytes in one read and one byte per read: where reads
		// split the input must not matter.
		for _, split := range []string{"whole", "byte at a time"} {
			t.Run(tt.name+"/"+split, func(t *testing.T) {
				var r io.Reader = bytes.NewReader([]byte(tt.in))
				if split != "whole" {
					r = iotest.OneByteReader(r)
				}
				quits := 0
				e := &escapeReader{r: r, quit: func() { quits++ }}
				got, err := readAllFrom(t, e, 64)
				if err != io.EOF {
					t.Errorf("ended with %v, want io.EOF", err)
				}
				if string(got) != tt.want {
					t.Errorf("guest got %q, want %q", got, tt.want)
				}
				if want := map[bool]int{false: 0, true: 1}[tt.quit]; quits != want {
					t.Errorf("quit called %d times, want %d", quits, want)
				}
			})
		}
	}
}

func TestEscapeReaderQuitStopsReading(t *testing.T) {
	src := &countingReader{r: bytes.NewReader([]byte("\x01xmore input"))}
	quit := false
	e := &escapeReader{r: src, quit: func() { quit = true }}
	buf := make([]byte, 2)
	n, err := e.Read(buf)
	if n != 0 || err != io.EOF || !quit {
		t.Errorf("Read = %d, %v (quit %v), want 0, EOF after quitting", n, err, quit)
	}
	if src.reads != 1 {
		t.Errorf("%d reads from the terminal, want 1", src.reads)
	}
}

type countingReader struct {
	r     io.Reader
	reads int
}

func (c *countingReader) Read(p []byte) (int, error) { c.reads++; return c.r.Read(p) }

func TestEscapeReaderPassesErrors(t *testing.T) {
	boom := errors.New("tty gone")
	e := &escapeReader{r: iotest.ErrReader(boom), quit: func() { t.Error("quit called") }}
	if _, err := e.Read(make([]byte, 8)); err != boom {
		t.Errorf("Read = %v, want the reader's error", err)
	}
}

func TestExitFor(t *testing.T) {
	// A vCPU fault as vmm.Result carries it: one line with the PC and
	// PSTATE, printed as it is.
	fault := errors.New("vCPU 2: KVM_EXIT_INTERNAL_ERROR at PC 0x40001000 PSTATE 0x3c5: emulation failure")
	tests := []struct {
		name  string
		res   vmm.Result
		cause error
		code  int // 0: exitFor returns nil
		says  []string
	}{
		{"poweroff", vmm.Result{Exit: runsummary.ExitPowerOff}, nil, 0, nil},
		{"reset with --on-reset exit", vmm.Result{Exit: runsummary.ExitReset}, nil, 0, nil},
		{"crash", vmm.Result{Exit: runsummary.ExitCrash, Err: errors.New("guest reported a crash on vCPU 0")}, nil, 1, []string{"crash"}},
		{"fault", vmm.Result{Exit: runsummary.ExitFault, Err: fault}, nil, 1, []string{"guest stopped: " + fault.Error()}},
		{"other fault", vmm.Result{Exit: runsummary.ExitFault, Err: errors.New("a vCPU stopped without a reason")}, nil, 1, []string{"without a reason"}},
		{"SIGINT", vmm.Result{Exit: runsummary.ExitStopped}, signalCause{syscall.SIGINT}, 128 + int(syscall.SIGINT), []string{"interrupt"}},
		{"SIGTERM", vmm.Result{Exit: runsummary.ExitStopped}, signalCause{syscall.SIGTERM}, 128 + int(syscall.SIGTERM), []string{"terminated"}},
		{"wrapped SIGTERM", vmm.Result{Exit: runsummary.ExitStopped}, fmt.Errorf("stop: %w", signalCause{syscall.SIGTERM}), 143, nil},
		{"Ctrl-A x", vmm.Result{Exit: runsummary.ExitStopped}, errQuit, 130, []string{"Ctrl-A x"}},
		{"stopped otherwise", vmm.Result{Exit: runsummary.ExitStopped}, errors.New("deadline"), 1, []string{"deadline"}},
		{"unknown end", vmm.Result{Exit: "weird"}, nil, 1, []string{"weird"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := exitFor(tt.res, tt.cause)
			if tt.code == 0 {
				if err != nil {
					t.Errorf("exitFor = %v, want nil (exit 0)", err)
				}
				return
			}
			var ee *exitError
			if !errors.As(err, &ee) {
				t.Fatalf("exitFor = %v, want an *exitError", err)
			}
			if ee.code != tt.code {
				t.Errorf("exit code %d, want %d", ee.code, tt.code)
			}
			for _, s := range tt.says {
				if !bytes.Contains([]byte(ee.msg), []byte(s)) {
					t.Errorf("message %q does not mention %q", ee.msg, s)
				}
			}
		})
	}
	// The conventional shell codes, spelled out.
	if e := exitFor(vmm.Result{Exit: runsummary.ExitStopped}, signalCause{syscall.SIGINT}).(*exitError); e.code != 130 {
		t.Errorf("SIGINT exit %d, want 130", e.code)
	}
	if e := exitFor(vmm.Result{Exit: runsummary.ExitStopped}, signalCause{syscall.SIGTERM}).(*exitError); e.code != 143 {
		t.Errorf("SIGTERM exit %d, want 143", e.code)
	}
}

// A file:PATH console is created by create(), before the guest starts; one
// that cannot be created fails there with one line naming the flag. Before
// the fix the file was made at the guest's first write and an error there
// only stopped the UART's output: the guest ran without a console.
func TestConsoleFileCreatedBeforeTheGuest(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "console.log")
	c, err := openConsole("file:"+ok, func(error) {})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ok); err == nil {
		t.Error("openConsole created the file: a run failing before the guest starts would leave it behind")
	}
	if err := c.create(); err != nil {
		t.Fatalf("create: %v", err)
	}
	c.Close()
	if st, err := os.Stat(ok); err != nil || st.Size() != 0 {
		t.Errorf("after create: %v, %v; want an empty file", st, err)
	}

	// A directory that does not exist is bad input, found before the
	// host is probed.
	bad := filepath.Join(dir, "no-such-dir", "console.log")
	_, err = openConsole("file:"+bad, func(error) {})
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--console file:"+bad) || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("openConsole(file:%s) = %v; want a usage error naming --console and the path", bad, err)
	}

	// One that goes away after the check: create says so.
	gone := filepath.Join(dir, "gone")
	if err := os.Mkdir(gone, 0o755); err != nil {
		t.Fatal(err)
	}
	bad = filepath.Join(gone, "console.log")
	c, err = openConsole("file:"+bad, func(error) {})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	err = c.create()
	if err == nil || !strings.Contains(err.Error(), "--console file:"+bad) || strings.Contains(err.Error(), "\n") {
		t.Errorf("create of %s: %v; want one line naming --console and the path", bad, err)
	}
}

// A run that fails before the guest boots must not leave the --console
// file behind: nothing was written to it.
func TestRunConsoleFileNotCreatedOnEarlyFailure(t *testing.T) {
	in := inputs(t)
	for _, tt := range []struct {
		name string
		args []string
		says string
	}{
		{"missing kernel", []string{"run", "--kernel", in["missing"], "--console", "file:console.log"}, "does not exist"},
		{"ELF kernel", []string{"run", "--kernel", in["vmlinux"], "--console", "file:console.log"}, "ELF"},
		{"missing initrd", []string{"run", "--kernel", in["payload.bin"], "--initrd", in["missing"], "--console", "file:console.log"}, "does not exist"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			checkFailure(t, dir, mvm(t, dir, tt.args...), 2, tt.says)
		})
	}
}

// chunkReader returns one chunk per Read.
type chunkReader struct{ chunks []string }

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.chunks[0])
	c.chunks[0] = c.chunks[0][n:]
	if c.chunks[0] == "" {
		c.chunks = c.chunks[1:]
	}
	return n, nil
}

// A Ctrl-A at the end of one read followed by a read of several bytes:
// the Ctrl-A and the next byte are written over input not yet scanned.
func TestEscapeReaderCtrlAAcrossReads(t *testing.T) {
	for _, tt := range []struct {
		chunks []string
		want   string
	}{
		{[]string{"\x01", "bc"}, "\x01bc"},
		{[]string{"a\x01", "bcdef"}, "a\x01bcdef"},
		{[]string{"\x01", "b\x01x"}, "\x01b"},
	} {
		e := &escapeReader{r: &chunkReader{chunks: append([]string(nil), tt.chunks...)}, quit: func() {}}
		got, _ := readAllFrom(t, e, 64)
		if string(got) != tt.want {
			t.Errorf("chunks %q: guest got %q, want %q", tt.chunks, got, tt.want)
		}
	}
}

// Read must never return more than len(p): vmm's console pump does
// buf[:n] on a 64-byte buffer, which panics for n = 65.
func TestEscapeReaderNeverOverfillsBuffer(t *testing.T) {
	full := make([]byte, 64)
	for i := range full {
		full[i] = 'a'
	}
	for _, size := range []int{1, 64} {
		e := &escapeReader{r: &chunkReader{chunks: []string{"\x01", string(full[:size])}}, quit: func() {}}
		buf := make([]byte, size)
		for i := 0; i < 3; i++ {
			n, err := e.Read(buf)
			if n > len(buf) {
				t.Fatalf("%d-byte buffer: Read returned n = %d", size, n)
			}
			if err != nil {
				break
			}
		}
	}
}
