//go:build linux

package kvmproc

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ErrGone is returned when the process has exited (or never existed).
var ErrGone = errors.New("no such process")

// ErrNotKVM is returned when the process holds no KVM VM file descriptor.
var ErrNotKVM = errors.New("not a KVM process (no anon_inode:kvm-vm file descriptor)")

// AccessError says that looking into the process needs ptrace access mvm
// does not have.
type AccessError struct {
	PID int
	Op  string // what failed, e.g. "read /proc/PID/fd"
	Err error
}

func (e *AccessError) Error() string {
	return fmt.Sprintf("%s of process %d: %v (needs ptrace access: root, the same user, or CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH)", e.Op, e.PID, e.Err)
}

func (e *AccessError) Unwrap() error { return e.Err }

// Process is another process, held by a pidfd so that its PID cannot be
// reused under mvm's feet while it looks.
type Process struct {
	PID   int
	pidfd int
	proc  string // /proc/PID
}

// Open takes a pidfd of process pid (pidfd_open, Linux 5.3+).
func Open(pid int) (*Process, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("process %d: %w", pid, ErrGone)
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil, fmt.Errorf("process %d: %w", pid, ErrGone)
		}
		return nil, fmt.Errorf("pidfd_open(%d): %w", pid, err)
	}
	return &Process{PID: pid, pidfd: fd, proc: "/proc/" + strconv.Itoa(pid)}, nil
}

// Close releases the pidfd.
func (p *Process) Close() error {
	if p.pidfd < 0 {
		return nil
	}
	err := unix.Close(p.pidfd)
	p.pidfd = -1
	if err != nil {
		return fmt.Errorf("close pidfd of %d: %w", p.PID, err)
	}
	return nil
}

// Exited reports whether the process has exited: its pidfd polls readable
// then (a zombie not yet reaped counts as exited).
func (p *Process) Exited() bool {
	pfd := []unix.PollFd{{Fd: int32(p.pidfd), Events: unix.POLLIN}}
	n, err := unix.Poll(pfd, 0)
	return err == nil && n > 0
}

// WaitExit blocks until the process exits or ctx ends (then it returns
// ctx's error).
func (p *Process) WaitExit(ctx context.Context) error {
	for {
		if p.Exited() {
			return nil
		}
		pfd := []unix.PollFd{{Fd: int32(p.pidfd), Events: unix.POLLIN}}
		if _, err := unix.Poll(pfd, 50); err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("poll pidfd of %d: %w", p.PID, err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// Name is the process's command name (/proc/PID/comm).
func (p *Process) Name() (string, error) {
	b, err := os.ReadFile(p.proc + "/comm")
	if err != nil {
		return "", p.procErr("read comm", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// procErr turns a /proc error into ErrGone, an AccessError, or a wrapped
// error.
func (p *Process) procErr(op string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH) || p.Exited():
		return fmt.Errorf("process %d: %w", p.PID, ErrGone)
	case errors.Is(err, fs.ErrPermission) || errors.Is(err, unix.EPERM):
		return &AccessError{PID: p.PID, Op: op, Err: err}
	}
	return fmt.Errorf("%s of process %d: %w", op, p.PID, err)
}

// FD is one KVM file descriptor of the process.
type FD struct {
	Num  int  // the descriptor number in the process
	Kind Kind // VM or vCPU
	VCPU int  // the vCPU id (KindVCPU)
}

// KVM is what the process holds of KVM.
type KVM struct {
	VMs   []FD // usually one
	VCPUs []FD // by vCPU id
	// The VMM's own KVM_GET_STATS_FD files, if it opened any: VMStats
	// (kvm-vm-stats) and VCPUStats (kvm-vcpu-stats:N, by vCPU id).
	VMStats   []FD
	VCPUStats []FD
}

// KVM lists the process's VM and vCPU descriptors. It fails with ErrNotKVM
// when there is no VM descriptor, ErrGone when the process has exited and
// an *AccessError without ptrace access.
func (p *Process) KVM() (*KVM, error) {
	dir := p.proc + "/fd"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, p.procErr("read "+dir, err)
	}
	k := &KVM{}
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		link, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		kind, id, ok := ParseFDLink(link)
		switch {
		case !ok:
		case kind == KindVM:
			k.VMs = append(k.VMs, FD{Num: n, Kind: kind})
		case kind == KindVCPU:
			k.VCPUs = append(k.VCPUs, FD{Num: n, Kind: kind, VCPU: id})
		case kind == KindVMStats:
			k.VMStats = append(k.VMStats, FD{Num: n, Kind: kind})
		case kind == KindVCPUStats:
			k.VCPUStats = append(k.VCPUStats, FD{Num: n, Kind: kind, VCPU: id})
		}
	}
	if len(k.VMs) == 0 {
		if p.Exited() {
			return nil, fmt.Errorf("process %d: %w", p.PID, ErrGone)
		}
		return nil, fmt.Errorf("process %d: %w", p.PID, ErrNotKVM)
	}
	slices.SortFunc(k.VMs, func(a, b FD) int { return a.Num - b.Num })
	byVCPU := func(a, b FD) int { return a.VCPU - b.VCPU }
	slices.SortFunc(k.VCPUs, byVCPU)
	slices.SortFunc(k.VCPUStats, byVCPU)
	return k, nil
}

// CopyFD duplicates the process's descriptor num into mvm (pidfd_getfd,
// Linux 5.6+; the copy is close-on-exec).
func (p *Process) CopyFD(num int) (*os.File, error) {
	fd, err := unix.PidfdGetfd(p.pidfd, num, 0)
	if err != nil {
		switch {
		case errors.Is(err, unix.ESRCH):
			return nil, fmt.Errorf("process %d: %w", p.PID, ErrGone)
		case errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES):
			return nil, &AccessError{PID: p.PID, Op: "pidfd_getfd of fd " + strconv.Itoa(num), Err: err}
		case errors.Is(err, unix.ENOSYS):
			return nil, fmt.Errorf("pidfd_getfd: %w (needs Linux 5.6+)", err)
		}
		return nil, fmt.Errorf("pidfd_getfd of fd %d of process %d: %w", num, p.PID, err)
	}
	return os.NewFile(uintptr(fd), fmt.Sprintf("pid%d-fd%d", p.PID, num)), nil
}

// Thread is one thread of the process.
type Thread struct {
	TID  int
	Name string // /proc/PID/task/TID/comm
}

// Threads lists the process's threads.
func (p *Process) Threads() ([]Thread, error) {
	dir := p.proc + "/task"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, p.procErr("read "+dir, err)
	}
	var ts []Thread
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "comm"))
		if err != nil {
			continue // exited meanwhile
		}
		ts = append(ts, Thread{TID: tid, Name: strings.TrimSpace(string(b))})
	}
	if len(ts) == 0 {
		return nil, fmt.Errorf("process %d: %w", p.PID, ErrGone)
	}
	slices.SortFunc(ts, func(a, b Thread) int { return a.TID - b.TID })
	return ts, nil
}

// VCPUThread is a thread known to run a vCPU.
type VCPUThread struct {
	VCPU int
	TID  int
	Name string
	// How it was found: "name" (the VMM's thread name) or "KVM_RUN"
	// (the thread was seen in KVM_RUN on that vCPU's descriptor).
	How string
}

// MapVCPUs finds the thread of each vCPU in k: first by thread names, then
// for the rest by looking, up to tries times gap apart, for threads blocked
// in KVM_RUN on a vCPU's descriptor (/proc/PID/task/TID/syscall, which
// needs ptrace access; a vCPU running guest code shows as "running" and is
// caught on a later try). vCPUs not found are missing from the result.
func (p *Process) MapVCPUs(ctx context.Context, k *KVM, tries int, gap time.Duration) ([]VCPUThread, error) {
	ts, err := p.Threads()
	if err != nil {
		return nil, err
	}
	want := map[int]bool{}
	for _, v := range k.VCPUs {
		want[v.VCPU] = true
	}
	found := map[int]VCPUThread{}
	for _, t := range ts {
		if id, _, ok := VCPUFromName(t.Name); ok && want[id] {
			if _, dup := found[id]; !dup {
				found[id] = VCPUThread{VCPU: id, TID: t.TID, Name: t.Name, How: "name"}
			}
		}
	}
	byFD := map[int]int{}
	for _, v := range k.VCPUs {
		byFD[v.Num] = v.VCPU
	}
	taken := map[int]bool{}
	for _, v := range found {
		taken[v.TID] = true
	}
	var accessErr error
	for try := 0; try < tries && len(found) < len(want); try++ {
		if try > 0 {
			select {
			case <-ctx.Done():
				return sortedThreads(found), ctx.Err()
			case <-time.After(gap):
			}
		}
		for _, t := range ts {
			if taken[t.TID] {
				continue
			}
			b, err := os.ReadFile(fmt.Sprintf("%s/task/%d/syscall", p.proc, t.TID))
			if err != nil {
				if e := p.procErr("read task syscall", err); errors.As(e, new(*AccessError)) {
					accessErr = e
				}
				continue
			}
			fd, ok := ParseSyscall(string(b), unix.SYS_IOCTL)
			if !ok {
				continue
			}
			if id, ok := byFD[fd]; ok {
				if _, dup := found[id]; !dup {
					found[id] = VCPUThread{VCPU: id, TID: t.TID, Name: t.Name, How: "KVM_RUN"}
					taken[t.TID] = true
				}
			}
		}
		if accessErr != nil {
			break
		}
	}
	if len(found) == 0 && accessErr != nil {
		return nil, accessErr
	}
	return sortedThreads(found), nil
}

func sortedThreads(m map[int]VCPUThread) []VCPUThread {
	out := make([]VCPUThread, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b VCPUThread) int { return a.VCPU - b.VCPU })
	return out
}
