//go:build linux && amd64

package x86vm

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// A holder is the test binary run again as another process that owns a
// tiny VM, as a VMM would: the tests that find another process's KVM
// descriptors, copy them or attach to its VM need one. The test package's
// TestMain calls ServeHolder first; a test starts a holder with
// StartHolder, or runs HolderCommand itself.

// holderEnv carries the holder's mode; its absence makes a normal test run.
const holderEnv = "MVM_X86VM_HOLDER"

// ServeHolder returns at once in a normal test run. In a holder it calls
// hold with the mode the holder was started in and exits: 0, or 1 after
// printing hold's error on stderr.
func ServeHolder(hold func(mode string) error) {
	mode := os.Getenv(holderEnv)
	if mode == "" {
		return
	}
	if err := hold(mode); err != nil {
		fmt.Fprintln(os.Stderr, "holder:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// HolderEnv is the environment entry that makes the test binary a holder
// in mode, for t.Setenv when the code under test starts the command.
func HolderEnv(mode string) (key, value string) { return holderEnv, mode }

// HolderCommand is the test binary run as a holder in mode, running no
// tests of its own.
func HolderCommand(mode string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holderEnv+"="+mode)
	cmd.Stderr = os.Stderr
	return cmd
}

// Holder is a running holder process.
type Holder struct {
	Cmd   *exec.Cmd
	stdin io.Closer
}

// StartHolder starts a holder in mode and returns it with the first line
// it printed (without the newline): what it holds. The holder runs until
// Stop, which the test's cleanup calls too.
func StartHolder(t testing.TB, mode string) (*Holder, string) {
	t.Helper()
	cmd := HolderCommand(mode)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &Holder{Cmd: cmd, stdin: in}
	t.Cleanup(h.Stop)
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("holder: %v", err)
	}
	return h, strings.TrimSuffix(line, "\n")
}

// Stop closes the holder's stdin, which makes WaitForStop return in it,
// and waits for it to exit.
func (h *Holder) Stop() {
	h.stdin.Close()
	_ = h.Cmd.Wait()
}

// WaitForStop, in a holder, returns when the test calls Stop.
func WaitForStop() {
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
}

// NeedKVM skips a test on a host without /dev/kvm. The x86 host's KVM is an
// extra here, where a machine has one: it runs the exit accounting against
// real x86 exits. mvm's own behaviour is arm64's, tested on real KVM in the
// arm64 lab whatever this host has. Any other failure to open it (a
// permission, a broken module) still fails the test.
func NeedKVM(t testing.TB) {
	t.Helper()
	if _, err := os.Stat("/dev/kvm"); errors.Is(err, fs.ErrNotExist) {
		t.Skip("this host has no /dev/kvm: the x86 KVM host tests run only where a machine has one (the arm64 lab tests do not need it)")
	}
}
