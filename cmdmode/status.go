package cmdmode

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Port names of the virtio-console (what the init finds in
// /sys/class/virtio-ports/*/name), in the device's port order. The status
// port comes last: the console delivers output in port order, so the
// command's status reaches mvm after the output the command wrote before
// it ended.
const (
	PortStdin  = "mvm.stdin"
	PortStdout = "mvm.stdout"
	PortStderr = "mvm.stderr"
	PortStatus = "mvm.status"
)

// Ports lists the port names in device order.
func Ports() []string { return []string{PortStdin, PortStdout, PortStderr, PortStatus} }

// RootTag is the virtio-fs tag of the guest's root (the host's /).
const RootTag = "mvmroot"

// Exit statuses of mvm in command mode besides CMD's own. 126, 127 and
// 128+N follow POSIX shells (XCU 2.8.2 "Exit Status for Commands"), 124
// and 125 timeout(1) and env(1)/docker run.
const (
	ExitTimeout     = 124
	ExitMVM         = 125
	ExitNotExec     = 126
	ExitNotFound    = 127
	ExitSignalBase  = 128
	ExitGuestDied   = 255
	maxSignalNumber = 64
)

// Status is what the init reports on the status port when CMD has ended,
// or could not be started: one JSON object on one line.
type Status struct {
	// Exited: CMD ran and exited with Code.
	Exited bool `json:"exited,omitempty"`
	// Signal: CMD was killed by this signal.
	Signal int `json:"signal,omitempty"`
	// Code is CMD's exit code when Exited; otherwise, with Error, the
	// status mvm exits with (ExitNotFound, ExitNotExec, ExitMVM).
	Code int `json:"code"`
	// Error says why CMD did not run (one line).
	Error string `json:"error,omitempty"`
}

// ExitCode is mvm's exit status for s.
func (s Status) ExitCode() int {
	switch {
	case s.Signal > 0:
		return ExitSignalBase + s.Signal
	case s.Exited:
		return s.Code & 0xff
	case s.Code > 0 && s.Code < 256:
		return s.Code
	}
	return ExitMVM
}

// Encode renders s as the line the init writes.
func (s Status) Encode() []byte {
	b, _ := json.Marshal(s)
	return append(b, '\n')
}

// ParseStatus reads one status line. A guest is not trusted: anything but
// one of the forms Encode writes is an error.
func ParseStatus(line []byte) (Status, error) {
	var s Status
	if err := json.Unmarshal(line, &s); err != nil {
		return Status{}, fmt.Errorf("command status %q: %w", truncate(string(line)), err)
	}
	switch {
	case s.Signal < 0 || s.Signal > maxSignalNumber:
		return Status{}, fmt.Errorf("command status: signal %d is out of range", s.Signal)
	case s.Exited && s.Signal != 0:
		return Status{}, errors.New("command status: both an exit code and a signal")
	case s.Exited && (s.Code < 0 || s.Code > 255):
		return Status{}, fmt.Errorf("command status: exit code %d is out of range", s.Code)
	case !s.Exited && s.Signal == 0 && s.Error == "":
		return Status{}, errors.New("command status: neither an exit, a signal nor an error")
	}
	s.Error = truncate(s.Error)
	return s, nil
}

// truncate keeps a guest's message to one printable line of at most 300
// bytes.
func truncate(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// ConsolePrefix starts the line the init writes to the kernel console when
// it fails before the status port exists (no virtio-console, no
// virtio-mmio): "mvm-init: error CODE: MESSAGE".
const ConsolePrefix = "mvm-init: error "

// ConsoleLine is the console form of an init failure.
func ConsoleLine(code int, msg string) string {
	return fmt.Sprintf("%s%d: %s\n", ConsolePrefix, code, msg)
}

// ParseConsoleLine reads a ConsoleLine; ok is false for any other line.
func ParseConsoleLine(line string) (code int, msg string, ok bool) {
	rest, found := strings.CutPrefix(strings.TrimRight(line, "\r\n"), ConsolePrefix)
	if !found {
		return 0, "", false
	}
	num, msg, found := strings.Cut(rest, ": ")
	if !found {
		return 0, "", false
	}
	if _, err := fmt.Sscanf(num, "%d", &code); err != nil || code < 1 || code > 255 || fmt.Sprint(code) != num {
		return 0, "", false
	}
	return code, truncate(msg), true
}
