package main

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mvm-dev/mvm/cmdmode"
	"github.com/mvm-dev/mvm/runsummary"
	"github.com/mvm-dev/mvm/vmm"
)

// TestCommandExit: how a command-mode run ended becomes mvm's status —
// the command's own when its status came in (whatever else happened),
// else 124 for --timeout, 128+N for a signal that stopped the VM, the
// init's console failure, and 255 for a guest that died without a word.
func TestCommandExit(t *testing.T) {
	st := func(s cmdmode.Status) *cmdmode.Status { return &s }
	for _, c := range []struct {
		name     string
		status   *cmdmode.Status
		initLine string
		res      vmm.Result
		cause    error
		code     int
		msg      string
	}{
		{"exit 0", st(cmdmode.Status{Exited: true, Code: 0}), "", vmm.Result{Exit: runsummary.ExitStopped}, statusCause, 0, ""},
		{"exit 7 despite a later timeout", st(cmdmode.Status{Exited: true, Code: 7}), "", vmm.Result{Exit: runsummary.ExitStopped}, timeoutCause{time.Second}, 7, ""},
		{"signal", st(cmdmode.Status{Signal: 15}), "", vmm.Result{Exit: runsummary.ExitStopped}, statusCause, 143, ""},
		{"not found", st(cmdmode.Status{Code: 127, Error: "x: command not found in the guest"}), "", vmm.Result{}, statusCause, 127, "not found"},
		{"timeout", nil, "", vmm.Result{Exit: runsummary.ExitStopped}, timeoutCause{3 * time.Second}, 124, "timed out after 3s"},
		{"second SIGINT", nil, "", vmm.Result{Exit: runsummary.ExitStopped}, signalCause{syscall.SIGINT}, 130, "stopped by"},
		{"missing driver", nil, "the guest kernel lacks CONFIG_VIRTIO_MMIO", vmm.Result{Exit: runsummary.ExitPowerOff}, nil, 125, "CONFIG_VIRTIO_MMIO"},
		{"panic", nil, "", vmm.Result{Exit: runsummary.ExitReset}, nil, 255, "kernel panic"},
		{"crash", nil, "", vmm.Result{Exit: runsummary.ExitCrash, Err: errors.New("vCPU 0 failed")}, nil, 255, "vCPU 0 failed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cr := &commandRun{args: []string{"x"}, status: c.status, initLine: c.initLine}
			if c.initLine != "" {
				cr.initCode = 125
			}
			err := cr.exit(c.res, c.cause)
			code, msg := exitStatus(err)
			if code != c.code || !strings.Contains(msg, c.msg) || (c.msg == "" && msg != "") {
				t.Errorf("exit = %d %q, want %d with %q", code, msg, c.code, c.msg)
			}
		})
	}
}

// TestStatusWriter: the status line may arrive in pieces; it is parsed
// once whole, stops the VM once, and garbage from the guest is an error
// kept for the exit, not a status.
func TestStatusWriter(t *testing.T) {
	stops := 0
	cr := &commandRun{args: []string{"x"}, onStatus: func() { stops++ }}
	w := statusWriter{cr}
	line := cmdmode.Status{Exited: true, Code: 3}.Encode()
	w.Write(line[:5])
	if cr.status != nil || stops != 0 {
		t.Fatal("a status before the line ended")
	}
	w.Write(line[5:])
	w.Write(cmdmode.Status{Exited: true, Code: 9}.Encode())
	if cr.status == nil || cr.status.ExitCode() != 3 || stops != 1 {
		t.Errorf("status %+v after %d stops, want exit 3 once", cr.status, stops)
	}
	bad := &commandRun{args: []string{"x"}}
	statusWriter{bad}.Write([]byte("{\"signal\":200}\n"))
	if bad.status != nil || bad.statusErr == nil {
		t.Errorf("a bad status line gave %+v, %v", bad.status, bad.statusErr)
	}
	if code, _ := exitStatus(bad.exit(vmm.Result{}, statusCause)); code != 255 {
		t.Errorf("exit %d after a bad status, want 255", code)
	}
}

// TestConsoleWatcher passes the console through and keeps the init's
// failure line, across writes split anywhere.
func TestConsoleWatcher(t *testing.T) {
	cr := &commandRun{}
	var out strings.Builder
	w := &consoleWatcher{c: cr, out: &out}
	text := "[ 1.0] booting\n" + cmdmode.ConsoleLine(125, "the guest kernel lacks CONFIG_VIRTIO_FS") + "tail"
	for i := 0; i < len(text); i += 7 {
		w.Write([]byte(text[i:min(i+7, len(text))]))
	}
	if out.String() != text {
		t.Errorf("console passed on as %q", out.String())
	}
	if cr.initCode != 125 || cr.initLine != "the guest kernel lacks CONFIG_VIRTIO_FS" {
		t.Errorf("init line %d %q", cr.initCode, cr.initLine)
	}
}

func TestCommandGiven(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{
		{[]string{"run", "--kernel", "k", "--", "true"}, true},
		{[]string{"run", "--kernel", "k", "--"}, false},
		{[]string{"run", "--kernel", "k"}, false},
		{[]string{"bench", "--", "x"}, false},
	} {
		if got := commandGiven(c.args); got != c.want {
			t.Errorf("commandGiven(%q) = %v", c.args, got)
		}
	}
}

func TestSigReader(t *testing.T) {
	ch := make(chan []byte, 4)
	ch <- []byte{15}
	ch <- cmdmode.Resize(50, 132)
	r := &sigReader{ch: ch}
	var got []byte
	b := make([]byte, 3) // smaller than a resize message
	for len(got) < 6 {
		n, err := r.Read(b)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, b[:n]...)
	}
	msgs, rest := cmdmode.ParseControl(got)
	if len(rest) != 0 || len(msgs) != 2 || msgs[0].Signal != 15 || msgs[1].Rows != 50 || msgs[1].Cols != 132 {
		t.Errorf("read %v: %+v", got, msgs)
	}
	close(ch)
	if _, err := r.Read(b); err == nil {
		t.Error("no EOF after close")
	}
}

// TestPipeOut: a write to a pipe whose reader is gone fails with EPIPE and
// passes SIGPIPE on to CMD, once.
func TestPipeOut(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	r.Close()
	cr := &commandRun{sigs: make(chan []byte, 8)}
	p := &pipeOut{w: w, c: cr}
	for range 2 {
		if _, err := p.Write([]byte("x")); !errors.Is(err, syscall.EPIPE) {
			t.Fatalf("write to a pipe without reader: %v, want EPIPE", err)
		}
	}
	if len(cr.sigs) != 1 || !bytes.Equal(<-cr.sigs, []byte{byte(syscall.SIGPIPE)}) {
		t.Error("want exactly one SIGPIPE queued for the command")
	}
}
