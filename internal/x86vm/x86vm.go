//go:build linux && amd64

package x86vm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/c35s/hype/kvm"
	"golang.org/x/sys/unix"

	ukvm "github.com/mvm-dev/mvm/internal/kvm"
)

// DonePort is the I/O port the guest writes once when it has finished.
const DonePort = 0x3f0

// Guest memory layout: 64 KiB at guest-physical 0, code at CodeAddr.
const (
	memSize  = 64 << 10
	CodeAddr = 0x1000
)

// The KVM_EXIT_* values the helper handles (internal/kvm has them all).
const (
	ExitIO   = ukvm.ExitIO
	ExitHLT  = ukvm.ExitHLT
	ExitIntr = ukvm.ExitIntr
)

// Program is what the guest does.
type Program struct {
	// Port receives Outs one-byte writes.
	Port uint16
	// Outs and Halts are the numbers of `out` and `hlt` instructions
	// (at most 65535 each: they are counted in CX).
	Outs, Halts int
}

// Code assembles the guest program (16-bit real mode, loaded at CodeAddr).
func (p Program) Code() ([]byte, error) {
	if p.Outs < 0 || p.Outs > 0xffff || p.Halts < 0 || p.Halts > 0xffff {
		return nil, fmt.Errorf("x86vm: Outs %d and Halts %d must be in 0..65535", p.Outs, p.Halts)
	}
	if p.Port == DonePort {
		return nil, fmt.Errorf("x86vm: port %#x is the done port", p.Port)
	}
	lo, hi := func(v int) byte { return byte(v) }, func(v int) byte { return byte(v >> 8) }
	return []byte{
		0xba, lo(int(p.Port)), hi(int(p.Port)), // mov dx, Port
		0xb9, lo(p.Outs), hi(p.Outs), // mov cx, Outs
		0xe3, 0x03, // jcxz +3 (skip the loop when Outs is 0)
		0xee,       // 1: out dx, al
		0xe2, 0xfd, // loop 1b
		0xb9, lo(p.Halts), hi(p.Halts), // mov cx, Halts
		0xe3, 0x03, // jcxz +3
		0xf4,       // 2: hlt
		0xe2, 0xfd, // loop 2b
		0xba, lo(DonePort), hi(DonePort), // mov dx, DonePort
		0xee,       // out dx, al
		0xeb, 0xfe, // jmp . (never re-entered)
	}, nil
}

// Result counts what the guest did, as seen from userspace.
type Result struct {
	// IO is the number of KVM_EXIT_IO exits to Program.Port, Halts the
	// number of KVM_EXIT_HLT exits, Done whether the guest reached the
	// done port (one more KVM_EXIT_IO).
	IO, Halts int
	Done      bool
	// Intr is the number of KVM_RUN calls that returned EINTR (signals
	// such as the Go runtime's preemption SIGURG).
	Intr int
	// Runs is the number of KVM_RUN calls.
	Runs int
}

// Options are optional hooks.
type Options struct {
	// Exit is called on the vCPU thread after every KVM_RUN return with
	// the KVM_EXIT_* reason (ExitIntr for EINTR) and the time from
	// KVM_RUN's return until the helper handled it.
	Exit func(reason uint32, handle time.Duration)
}

// VM is one tiny guest with one vCPU.
type VM struct {
	prog Program
	opts Options

	sys   *os.File
	vm    *kvm.VM
	vcpu  *kvm.VCPU
	mem   []byte
	run   []byte
	state *kvm.VCPUState

	startOnce sync.Once
	tid       int
	startErr  error
	goCh      chan struct{}
	doneCh    chan runResult
	ran       atomic.Bool
	started   atomic.Bool
	cancelled atomic.Bool
	stop      atomic.Bool
	closeOnce sync.Once
}

type runResult struct {
	res Result
	err error
}

// New creates the VM, its memory and its vCPU and loads the program. It
// fails when /dev/kvm cannot be opened.
func New(p Program, opts Options) (*VM, error) {
	code, err := p.Code()
	if err != nil {
		return nil, err
	}
	v := &VM{prog: p, opts: opts, goCh: make(chan struct{}), doneCh: make(chan runResult, 1)}
	ok := false
	defer func() {
		if !ok {
			v.Close()
		}
	}()
	if v.sys, err = os.OpenFile("/dev/kvm", os.O_RDWR|unix.O_CLOEXEC, 0); err != nil {
		return nil, fmt.Errorf("x86vm: %w", err)
	}
	if v.vm, err = kvm.CreateVM(v.sys); err != nil {
		return nil, fmt.Errorf("x86vm: KVM_CREATE_VM: %w", err)
	}
	if v.mem, err = unix.Mmap(-1, 0, memSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE); err != nil {
		return nil, fmt.Errorf("x86vm: mmap guest memory: %w", err)
	}
	copy(v.mem[CodeAddr:], code)
	region := &kvm.UserspaceMemoryRegion{
		MemorySize:    memSize,
		UserspaceAddr: uint64(uintptr(unsafe.Pointer(&v.mem[0]))),
	}
	if err := kvm.SetUserMemoryRegion(v.vm, region); err != nil {
		return nil, fmt.Errorf("x86vm: KVM_SET_USER_MEMORY_REGION: %w", err)
	}
	if v.vcpu, err = kvm.CreateVCPU(v.vm, 0); err != nil {
		return nil, fmt.Errorf("x86vm: KVM_CREATE_VCPU: %w", err)
	}
	size, err := kvm.GetVCPUMmapSize(v.sys)
	if err != nil {
		return nil, fmt.Errorf("x86vm: KVM_GET_VCPU_MMAP_SIZE: %w", err)
	}
	if v.run, err = unix.Mmap(int(v.vcpu.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		return nil, fmt.Errorf("x86vm: mmap kvm_run: %w", err)
	}
	v.state = (*kvm.VCPUState)(unsafe.Pointer(&v.run[0]))
	ok = true
	return v, nil
}

// VMFd is the VM file descriptor (for KVM_GET_STATS_FD).
func (v *VM) VMFd() uintptr { return v.vm.Fd() }

// VCPUFd is the vCPU file descriptor (for KVM_GET_STATS_FD).
func (v *VM) VCPUFd() uintptr { return v.vcpu.Fd() }

// Thread starts the goroutine that will run the vCPU, locked to its OS
// thread, and returns that thread's id, so tracepoints can be attached to
// it before the guest runs. The goroutine sets up the registers and waits
// for Run. Calling Thread again returns the same id.
func (v *VM) Thread() (int, error) {
	v.startOnce.Do(func() {
		ready := make(chan error, 1)
		tid := make(chan int, 1)
		v.started.Store(true)
		go v.loop(tid, ready)
		if err := <-ready; err != nil {
			v.startErr = err
			return
		}
		v.tid = <-tid
	})
	return v.tid, v.startErr
}

// RunAll runs the guest to its end (Run, bounded by a minute: the guest
// takes milliseconds) and checks that it made exactly its program's exits:
// Outs I/O exits to Port, Halts HLT exits and the done port.
func (v *VM) RunAll() (Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := v.Run(ctx)
	if err != nil {
		return res, err
	}
	if res.IO != v.prog.Outs || res.Halts != v.prog.Halts || !res.Done {
		return res, fmt.Errorf("x86vm: the guest did %+v, want %d I/O exits, %d HLT exits and done", res, v.prog.Outs, v.prog.Halts)
	}
	return res, nil
}

// Run lets the vCPU goroutine run the guest to the done port and returns
// what it saw. If ctx ends first the vCPU is kicked out of KVM_RUN and Run
// returns ctx's error. Run may be called once.
func (v *VM) Run(ctx context.Context) (Result, error) {
	if _, err := v.Thread(); err != nil {
		return Result{}, err
	}
	if v.ran.Swap(true) {
		return Result{}, errors.New("x86vm: Run called twice")
	}
	close(v.goCh)
	select {
	case r := <-v.doneCh:
		return r.res, r.err
	case <-ctx.Done():
		// immediate_exit makes a KVM_RUN that has not started yet return
		// EINTR at once; the signal interrupts one in progress.
		v.stop.Store(true)
		setImmediateExit(v.run)
		_ = unix.Tgkill(unix.Getpid(), v.tid, unix.SIGURG)
		r := <-v.doneCh
		if r.err == nil {
			r.err = ctx.Err()
		}
		return r.res, fmt.Errorf("x86vm: guest did not finish: %w", r.err)
	}
}

// loop is the vCPU goroutine. It stays locked to its thread and never
// unlocks, so the thread exits with it and the TID attached to is never
// reused for other goroutines' work.
func (v *VM) loop(tidCh chan<- int, ready chan<- error) {
	runtime.LockOSThread()
	if err := v.setupRegs(); err != nil {
		ready <- err
		return
	}
	ready <- nil
	tidCh <- unix.Gettid()
	<-v.goCh
	if v.cancelled.Load() {
		return
	}
	res, err := v.runGuest()
	v.doneCh <- runResult{res, err}
}

func (v *VM) setupRegs() error {
	var regs kvm.Regs
	var sregs kvm.Sregs
	if err := kvm.GetRegs(v.vcpu, &regs); err != nil {
		return fmt.Errorf("x86vm: KVM_GET_REGS: %w", err)
	}
	if err := kvm.GetSregs(v.vcpu, &sregs); err != nil {
		return fmt.Errorf("x86vm: KVM_GET_SREGS: %w", err)
	}
	// Real mode, CS base 0, starting at CodeAddr; RFLAGS bit 1 is
	// reserved and must be set.
	sregs.CS.Base, sregs.CS.Selector = 0, 0
	regs.RIP, regs.RFlags = CodeAddr, 2
	if err := kvm.SetSregs(v.vcpu, &sregs); err != nil {
		return fmt.Errorf("x86vm: KVM_SET_SREGS: %w", err)
	}
	if err := kvm.SetRegs(v.vcpu, &regs); err != nil {
		return fmt.Errorf("x86vm: KVM_SET_REGS: %w", err)
	}
	return nil
}

func (v *VM) runGuest() (Result, error) {
	var res Result
	// Every planned exit plus generous room for EINTRs; a guest that
	// does more has gone wrong.
	limit := v.prog.Outs + v.prog.Halts + 100_000
	for res.Runs < limit {
		if v.stop.Load() { // kicked by Run's timeout
			return res, errors.New("x86vm: stopped")
		}
		res.Runs++
		err := kvm.Run(v.vcpu)
		t0 := time.Now()
		reason := uint32(v.state.ExitReason)
		if err != nil {
			if !errors.Is(err, unix.EINTR) && !errors.Is(err, unix.EAGAIN) {
				return res, fmt.Errorf("x86vm: KVM_RUN: %w", err)
			}
			res.Intr++
			reason = ExitIntr
		} else {
			switch reason {
			case ExitIO:
				io := v.state.IOExitData()
				switch io.Port {
				case v.prog.Port:
					res.IO++
				case DonePort:
					res.Done = true
				default:
					return res, fmt.Errorf("x86vm: unexpected I/O to port %#x", io.Port)
				}
			case ExitHLT:
				res.Halts++
			case ExitIntr:
				res.Intr++
			default:
				return res, fmt.Errorf("x86vm: unexpected exit reason %d", reason)
			}
		}
		if v.opts.Exit != nil {
			v.opts.Exit(reason, time.Since(t0))
		}
		if res.Done {
			return res, nil
		}
	}
	return res, fmt.Errorf("x86vm: guest still running after %d KVM_RUNs", res.Runs)
}

// setImmediateExit sets kvm_run.immediate_exit (byte 1) with an atomic on
// the aligned word holding it, since the vCPU thread reads the page too.
func setImmediateExit(run []byte) {
	p := (*uint32)(unsafe.Pointer(&run[0]))
	for {
		old := atomic.LoadUint32(p)
		if atomic.CompareAndSwapUint32(p, old, old&^0xff00|0x0100) {
			return
		}
	}
}

// Close releases the VM. Call it after Run has returned; a vCPU goroutine
// that was started but never run is released without running the guest.
func (v *VM) Close() error {
	var errs []error
	v.closeOnce.Do(func() {
		if v.started.Load() && v.ran.CompareAndSwap(false, true) {
			v.cancelled.Store(true)
			close(v.goCh)
		}
		if v.run != nil {
			errs = append(errs, unix.Munmap(v.run))
		}
		if v.vcpu != nil {
			errs = append(errs, v.vcpu.Close())
		}
		if v.vm != nil {
			errs = append(errs, v.vm.Close())
		}
		if v.mem != nil {
			errs = append(errs, unix.Munmap(v.mem))
		}
		if v.sys != nil {
			errs = append(errs, v.sys.Close())
		}
	})
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("x86vm: close: %w", err)
	}
	return nil
}
