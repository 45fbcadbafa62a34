package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Exec boots each job as a child `mvm run` process: the Runner mvm bench
// uses. Its Run method is a Runner.
type Exec struct {
	// Exe is the mvm binary; Tmp a directory for the runs' result files.
	Exe, Tmp string
	// Timeout stops a boot that takes longer; it counts as failed.
	Timeout time.Duration
	// Quiet adds "quiet" to every run's kernel command line.
	Quiet bool
	// Console is every run's --console value; ConsoleDir, when set,
	// gives each run a console file of its own there instead.
	Console, ConsoleDir string
	// Common are the mvm run flags passed verbatim to every run.
	Common   []string
	Variants []Variant
	Log      *slog.Logger
	// Starting, when set, is called as each job starts.
	Starting func(Job)
	// Command, when set, is run in the guest by every run (after --: mvm
	// run's command mode), and CommandExit says what a run's non-zero
	// exit status means there: CMD's own status, or mvm's (it failed,
	// timed out, the guest died), which command mode keeps apart.
	Command     []string
	CommandExit func(code int) string
}

// stopGrace is how long a run may take to stop after SIGTERM (it writes
// its result first) before it is killed.
const stopGrace = 10 * time.Second

// Run boots one job and records it; a Runner.
func (b *Exec) Run(ctx context.Context, job Job) Run {
	if b.Starting != nil {
		b.Starting(job)
	}
	var v Variant
	for _, x := range b.Variants {
		if x.Name == job.Variant {
			v = x
		}
	}
	res := filepath.Join(b.Tmp, fmt.Sprintf("run-%d.json", job.Seq))
	console := b.Console
	if b.ConsoleDir != "" {
		console = "file:" + filepath.Join(b.ConsoleDir, fmt.Sprintf("run-%03d-%s-cpus%d.log", job.Seq, job.Variant, job.CPUs))
	}
	args := RunArgs(v.Settings, job.CPUs, b.Quiet)
	args = append(args, "--console", console, "--result-json", res)
	args = append(args, b.Common...)
	if len(b.Command) > 0 {
		args = append(append(args, "--"), b.Command...)
	}
	r := Run{Args: args}

	rctx, cancel := context.WithTimeout(ctx, b.Timeout)
	defer cancel()
	cmd := exec.CommandContext(rctx, b.Exe, args...)
	// SIGTERM rather than the default SIGKILL: mvm stops the guest and
	// still writes its result, which the record keeps.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = stopGrace
	stderr := &tailBuffer{max: 4096}
	cmd.Stdout, cmd.Stderr = io.Discard, stderr
	b.Log.Debug("bench: start run", "seq", job.Seq, "args", strings.Join(args, " "))
	t0 := time.Now()
	err := cmd.Run()
	wall := time.Since(t0)

	r.PhasesNS = map[string]int64{}
	if ps := cmd.ProcessState; ps != nil {
		r.ExitCode = ps.ExitCode()
		r.PhasesNS[PhaseProcessWall] = int64(wall)
		r.PhasesNS[PhaseProcessCPU] = int64(ps.UserTime() + ps.SystemTime())
	}
	if data, rerr := os.ReadFile(res); rerr == nil {
		sum, prof, perr := ParseResult(data)
		if perr == nil {
			r.Summary, r.Profile = sum, prof
			// mvm run computed every phase (runsummary.Moments.Phases).
			for k, v := range sum.PhasesNS {
				if v >= 0 {
					r.PhasesNS[k] = v
				}
			}
		} else if err == nil {
			err = perr
		}
		os.Remove(res)
	} else if err == nil {
		err = fmt.Errorf("mvm run wrote no result: %w", rerr)
	}

	switch {
	case ctx.Err() != nil:
		r.Status, r.Error = StatusInterrupted, "interrupted"
	case errors.Is(rctx.Err(), context.DeadlineExceeded):
		r.Status, r.Error = StatusFailed, fmt.Sprintf("timed out after %v and was stopped", b.Timeout)
	case err != nil:
		r.Status = StatusFailed
		r.Error = strings.TrimSpace(stderr.String())
		if killedBySIGSYS(cmd.ProcessState) {
			// The seccomp filter killed the run: say so, it prints nothing.
			r.Error = "killed by SIGSYS: a system call outside mvm's seccomp allow-list (docs/seccomp.md; dmesg names it)"
		} else if len(b.Command) > 0 && r.ExitCode > 0 && b.CommandExit != nil {
			// Not a timing sample: the command's status (or why mvm
			// ended), then the end of what it wrote to stderr.
			r.Error = b.CommandExit(r.ExitCode)
			if tail := strings.TrimSpace(stderr.String()); tail != "" {
				r.Error += ": " + tail
			}
		} else if r.Error == "" {
			r.Error = err.Error()
		} else if r.ExitCode > 0 {
			r.Error = fmt.Sprintf("exit status %d: %s", r.ExitCode, r.Error)
		}
	default:
		r.Status = StatusOK
	}
	return r
}

// tailBuffer keeps the last max bytes written to it: the end of a failed
// run's stderr says why it failed.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = t.b[over:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// killedBySIGSYS reports whether a finished run was killed by SIGSYS, which
// is what mvm's seccomp filter does on a call outside its allow-list.
func killedBySIGSYS(ps *os.ProcessState) bool {
	if ps == nil {
		return false
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGSYS
}
