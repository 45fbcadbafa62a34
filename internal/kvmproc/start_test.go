//go:build linux

package kvmproc

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestStartStopsAtExec: the command has exec'd (its comm is the new
// program's) and sits in a tracing stop until Resume; then it runs to its
// own exit status.
func TestStartStopsAtExec(t *testing.T) {
	s, err := Start(exec.Command("sh", "-c", "exit 7"))
	if err != nil {
		t.Fatal(err)
	}
	stat, err := os.ReadFile("/proc/" + itoa(s.PID()) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	// "PID (comm) STATE ...": t is a tracing stop (fs/proc/array.c).
	f := strings.Fields(string(stat))
	if len(f) < 3 || f[1] != "(sh)" || f[2] != "t" {
		t.Errorf("stopped command's stat: %.40q, want comm (sh) in state t", stat)
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	err = s.Cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("command ended with %v, want exit status 7", err)
	}
}

func TestStartKill(t *testing.T) {
	s, err := Start(exec.Command("sleep", "60"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(s.PID()); !errors.Is(err, ErrGone) {
		t.Errorf("killed command still there: %v", err)
	}
}

func TestStartMissing(t *testing.T) {
	if _, err := Start(exec.Command("/nonexistent/vmm")); err == nil {
		t.Fatal("Start of a missing program succeeded")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
