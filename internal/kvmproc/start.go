//go:build linux

package kvmproc

import (
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// Started is a command that Start left stopped at its first instruction
// after exec, so that mvm can set up everything that must see the whole
// run (tracepoint events inherited by every thread the command creates)
// before it does anything.
type Started struct {
	Cmd  *exec.Cmd
	done chan error
	op   chan func() error
}

// Start starts cmd traced (PTRACE_TRACEME), which stops it with SIGTRAP
// right after a successful execve. Call Resume to let it run: mvm detaches
// then, so the command runs untraced. ptrace requests must come from the
// thread that traced, so Start keeps one locked OS thread for them.
func Start(cmd *exec.Cmd) (*Started, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Ptrace = true
	s := &Started{Cmd: cmd, done: make(chan error, 1), op: make(chan func() error)}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		// The exec stop: the child is traced by this thread.
		var ws unix.WaitStatus
		pid := cmd.Process.Pid
		for {
			_, err := unix.Wait4(pid, &ws, unix.WALL, nil)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				started <- fmt.Errorf("wait for %s to exec: %w", cmd.Path, err)
				return
			}
			break
		}
		if !ws.Stopped() || ws.StopSignal() != unix.SIGTRAP {
			started <- fmt.Errorf("%s did not stop at exec (wait status %#x)", cmd.Path, uint32(ws))
			return
		}
		started <- nil
		// Serve the one Resume (or a kill) from this thread.
		f := <-s.op
		s.done <- f()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return s, nil
}

// PID is the command's process id.
func (s *Started) PID() int { return s.Cmd.Process.Pid }

// Resume detaches from the stopped command and lets it run (PTRACE_DETACH
// with no signal). After Resume, wait for it with s.Cmd.Wait.
func (s *Started) Resume() error {
	s.op <- func() error {
		if err := unix.PtraceDetach(s.PID()); err != nil {
			return fmt.Errorf("resume %s (PTRACE_DETACH): %w", s.Cmd.Path, err)
		}
		return nil
	}
	return <-s.done
}

// Kill kills the stopped command instead of resuming it and reaps it.
func (s *Started) Kill() error {
	s.op <- func() error { return s.Cmd.Process.Kill() }
	err := <-s.done
	_ = s.Cmd.Wait()
	return err
}
