//go:build linux && arm64

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// readJSON decodes the JSON file path (a --result-json, a profile, a
// bench report) into a T, or fails the test.
func readJSON[T any](tb testing.TB, path string) T {
	tb.Helper()
	var v T
	data, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(data, &v)
	}
	if err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	return v
}

// noCryptoTests goes on the kernel command line of the Linux test guests
// whose checks do not depend on how long the kernel's own boot takes:
// cryptomgr.notests skips the self-tests of the crypto algorithms the
// kernel registers (Documentation/admin-guide/kernel-parameters.txt).
// They test the guest kernel, not mvm, and were more than a third of the
// Debian kernel's kernel_to_user in the instruction-time lab (TestBenchCPUs
// with the test initrd: 1.04 s -> 0.65 s on 1 vCPU, 1.79 -> 0.91 s on 4,
// 2.15 -> 1.05 s on 8, where the tests run one after another on the lab's
// single host thread). Command mode's default command line has it for the
// same reason (cmd/mvm/command.go, commandCmdline).
const noCryptoTests = "cryptomgr.notests"

// env returns a required environment variable or fails the test.
func env(t testing.TB, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		t.Fatalf("%s is not set: run the integration tests with 'make lab-test' (or 'make test')", name)
	}
	if _, err := os.Stat(v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v
}

func payload(t testing.TB, name string) string {
	return filepath.Join(env(t, "MVM_GUEST_DIR"), name)
}

// result is one finished mvm process.
type result struct {
	code           int
	stdout, stderr string
	elapsed        time.Duration
	// cpu is the process's user + system CPU time (all its threads).
	cpu time.Duration
}

// mvm runs the mvm binary with args, failing the test if it does not finish
// within timeout.
func mvm(t testing.TB, timeout time.Duration, args ...string) result {
	t.Helper()
	return mvmCmd(t, timeout, nil, args...)
}

func mvmCmd(t testing.TB, timeout time.Duration, setup func(*exec.Cmd), args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, env(t, "MVM_BIN"), args...)
	// On a hang, first SIGUSR1 (mvm prints where each vCPU is), then
	// SIGQUIT (the Go runtime prints every goroutine's stack), then the
	// kill: the failure shows both.
	cmd.Cancel = func() error {
		cmd.Process.Signal(syscall.SIGUSR1)
		time.Sleep(3 * time.Second)
		cmd.Process.Signal(syscall.SIGQUIT)
		time.Sleep(5 * time.Second)
		return cmd.Process.Kill()
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if setup != nil {
		setup(cmd)
	}
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String(), elapsed: time.Since(start)}
	if ps := cmd.ProcessState; ps != nil {
		r.cpu = ps.UserTime() + ps.SystemTime()
	}
	if ctx.Err() != nil {
		t.Fatalf("mvm %s did not finish within %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), timeout, r.stdout, r.stderr)
	}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("run mvm: %v", err)
	}
	t.Logf("mvm %s: exit %d in %v", strings.Join(args, " "), r.code, r.elapsed.Round(time.Millisecond))
	return r
}

// oneLineError checks the shape every bad-input error must have: non-zero
// status, one line on stderr starting with "mvm:", no panic or stack trace.
var goPanic = regexp.MustCompile(`(?m)^panic: |^goroutine \d+ \[|^fatal error: `)

func oneLineError(t testing.TB, r result, wantCode int, wantSubstr string) {
	t.Helper()
	if r.code != wantCode {
		t.Errorf("exit status %d, want %d (stderr %q)", r.code, wantCode, r.stderr)
	}
	lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "mvm: ") {
		t.Errorf("stderr is not one 'mvm: ...' line:\n%s", r.stderr)
	}
	// A Go panic's own words, not mvm's line about a guest kernel panic.
	if goPanic.MatchString(r.stderr) {
		t.Errorf("stderr shows a panic:\n%s", r.stderr)
	}
	if !strings.Contains(r.stderr, wantSubstr) {
		t.Errorf("stderr %q does not mention %q", r.stderr, wantSubstr)
	}
}

// publicDir is a fresh world-writable directory, removed after the test.
func publicDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "mvm-public-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// publicCopy copies a host file into a fresh world-readable directory, so
// the unprivileged user can read it, and returns the copy's path.
func publicCopy(t testing.TB, src string) string {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(publicDir(t), filepath.Base(src))
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

// asNobody makes a command run as an unprivileged user (nobody).
func asNobody(c *exec.Cmd) {
	c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
}

// lockedBuffer collects a process's output while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
