//go:build linux

// Package vcpu runs one virtual CPU: a goroutine locked to its OS thread that
// owns every ioctl on the vCPU fd, the KVM_RUN loop, register access, and the
// kick that forces the vCPU out of the guest. A vCPU that is powered off
// waits here in userspace (not inside KVM_RUN) until the VMM powers it on;
// only with KVM's in-kernel PSCI does a secondary wait inside KVM_RUN for
// KVM to start it (PowerOnRequest.InitOnly).
//
// The loop decodes each exit from kvm_run into an Exit record, decides the
// exits that are its own (an interrupted KVM_RUN, a failed entry, ...), and
// asks the VMM's Handler for an Action about the rest, which it then carries
// out (exit.go: none of that needs KVM, so it is tested on any host). A
// vCPU's lifecycle is one State value that moves by Step.
package vcpu

import (
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mvm-dev/mvm/internal/kvm"
	"github.com/mvm-dev/mvm/psci"
)

// Handler is the VMM side of a vCPU's exits. Every method is called on the
// vCPU's own thread, so it may use the vCPU's register accessors.
type Handler interface {
	// Entering is called just before the first KVM_RUN after a power-on.
	Entering(v *VCPU)
	// Exit decides what a KVM_EXIT_MMIO, KVM_EXIT_HYPERCALL or
	// KVM_EXIT_SYSTEM_EVENT means (the loop decides the others itself:
	// decide); for an MMIO read it fills e.MMIO.Data. The loop carries
	// out the Action: writes X0, re-enters, parks or ends.
	Exit(v *VCPU, e *Exit) Action
	// Exited is called after every KVM_RUN return with the exit reason
	// (kvm.Exit*, or kvm.ExitIntr for EINTR), the Action's Key (-1 if
	// none), the time from KVM_RUN's return until the exit was handled
	// and that moment (done, an offset from v.Origin(): a time.Time built
	// and taken apart again on every exit cost the MMIO round trip about
	// a hundred instructions, docs/boot-phases.md); for accounting.
	Exited(v *VCPU, reason uint32, sub int, handle, done time.Duration)
}

// PowerOnRequest says how a vCPU starts running.
type PowerOnRequest struct {
	// Entry, Context: PC and X0 to start with (PSCI CPU_ON's entry point
	// and context_id, or the kernel entry and DTB address for the boot CPU).
	Entry, Context uint64
	// InitOnly resets the vCPU with KVM_ARM_VCPU_INIT but sets no
	// registers: with KVM's in-kernel PSCI a secondary initialised with
	// POWER_OFF waits inside KVM_RUN and KVM starts it on CPU_ON.
	InitOnly bool
	// Exited is when the KVM_RUN of the vCPU that made the request
	// returned (the CPU_ON hypercall exit); Issued is when the request
	// was made (the CPU_ON serviced). For the timeline.
	Exited, Issued time.Time
	// Ready, if not nil, is closed once the vCPU is reset and about to
	// enter the guest.
	Ready chan struct{}
}

// FaultError is a vCPU stop the guest caused (failed entry, internal error,
// unknown exit); it carries the vCPU state for the report.
type FaultError struct {
	VCPU   int
	What   string
	PC     uint64
	PSTATE uint64
	Detail string
}

func (e *FaultError) Error() string {
	return fmt.Sprintf("vCPU %d: %s at PC %#x PSTATE %#x: %s", e.VCPU, e.What, e.PC, e.PSTATE, e.Detail)
}

// VCPU is one virtual CPU.
type VCPU struct {
	ID   int
	fd   *os.File
	run  *kvm.Run
	init kvm.VCPUInit
	// rawFD is fd.Fd(), taken once: os.File.Fd is a call (and a
	// blocking-mode check) that every KVM_RUN would otherwise make.
	rawFD uintptr

	mpidr uint64
	tid   atomic.Int32
	box   mailbox

	// state is the vCPU's lifecycle (State): written by the vCPU's
	// thread only (step), read by others (Inspect: a waiting vCPU has
	// no guest position to report).
	state atomic.Uint32
	// vbar: VBAR_EL1 as the guest last left it (LastVBAR).
	vbar atomic.Uint64
	// resetSCTLR, resetPSTATE: SCTLR_EL1 and PSTATE as KVM's reset left
	// them, for a warm reset (rearm).
	resetSCTLR, resetPSTATE uint64

	// exit is the exit being handled, decoded from run; owned by the
	// loop, reused so that an exit allocates nothing.
	exit Exit
	// timer bounds the raw KVM_RUNs (runGuest). Owned by the vCPU's
	// thread.
	timer rawTimer

	// LastOn is the most recent power-on request this vCPU acted on;
	// Woken when this thread took it, Reset when its registers were set,
	// Entered when it then entered the guest (taken just before the
	// Entering callback, which may use it). Read them after Loop returns
	// or from the Entering callback.
	LastOn                PowerOnRequest
	Woken, Reset, Entered time.Time

	// origin is when the vCPU was created; lastExitNS is when its
	// KVM_RUN last returned, as nanoseconds after it (0: no exit yet).
	// An offset from a time with a monotonic reading keeps LastExitTime
	// on the monotonic clock, which a wall-clock step does not move. The
	// loop stores only the offset; a time.Time is built when asked for.
	origin     time.Time
	lastExitNS atomic.Int64
	// clock times the exits (exitClock); owned by the loop.
	clock exitClock

	// inspect is a pending Inspect's callback, run on the vCPU's thread
	// at its next KVM_RUN return.
	inspect atomic.Pointer[func(Snapshot)]
}

// LastExitTime is when the vCPU's KVM_RUN last returned (zero before its
// first exit); from a Handler method, when the exit being handled
// happened. Safe from any goroutine.
func (v *VCPU) LastExitTime() time.Time {
	if ns := v.lastExitNS.Load(); ns != 0 {
		return v.origin.Add(time.Duration(ns))
	}
	return time.Time{}
}

// Origin is when the vCPU was created: Handler.Exited's times are offsets
// from it.
func (v *VCPU) Origin() time.Time { return v.origin }

// Now is the current moment on the vCPU's exit clock (exitClock: a read of
// the generic timer's counter, re-anchored to the monotonic clock when
// 100 ms old) rather than time.Now's vDSO call, for the moments of the
// CPU_ON path (Woken, Reset, Entered, and the caller's PowerOnRequest.Issued):
// each vDSO read through the runtime's trampoline was about a hundred
// instructions on that path. Call it only on the vCPU's own thread (from
// a Handler method or the loop), which owns the clock.
func (v *VCPU) Now() time.Time { return v.origin.Add(v.clock.now()) }

// Snapshot is where a vCPU's guest was when Inspect reached it.
type Snapshot struct {
	// PC and PSTATE of the guest (ONE_REG reads), valid when Err is nil.
	PC, PSTATE uint64
	Err        error
}

// Inspect asks a running vCPU for its guest PC and PSTATE, for a report of
// a guest that seems stuck: the vCPU is kicked out of KVM_RUN, reads them
// on its own thread (KVM takes a vCPU's registers only from outside
// KVM_RUN, and a second thread would wait on the vCPU's mutex) and
// re-enters; the guest sees one more exit. report is called once, from
// the vCPU's thread, at its next KVM_RUN return; not at all if the vCPU
// parks, ends or is stuck in an exit handler first, so callers wait for it
// with a timeout. It reports whether the vCPU was asked (false when
// parked: it has no guest position, its registers are in reset state).
func (v *VCPU) Inspect(report func(Snapshot)) bool {
	if v.State().Waiting() {
		return false
	}
	v.inspect.Store(&report)
	v.run.SetImmediateExit(true)
	v.signalThread()
	return true
}

// answerInspect runs a pending Inspect's callback.
func (v *VCPU) answerInspect() {
	f := v.inspect.Swap(nil)
	if f == nil {
		return
	}
	var s Snapshot
	if s.PC, s.Err = kvm.GetOneReg(v.fd, kvm.RegPC); s.Err == nil {
		s.PSTATE, s.Err = kvm.GetOneReg(v.fd, kvm.RegPSTATE)
	}
	(*f)(s)
}

// New creates vCPU id on the VM and initialises it with init. Call it from
// the goroutine that will run the vCPU (after runtime.LockOSThread), since
// KVM binds a vCPU to the thread that uses it. New names that thread
// "mvm-vcpu-<id>" (as QEMU, Firecracker and others name theirs), so that
// ps, top and mvm profile --pid can tell the vCPU threads apart.
func New(sys, vm *os.File, id int, init kvm.VCPUInit) (*VCPU, error) {
	fd, err := kvm.CreateVCPU(vm, id)
	if err != nil {
		return nil, fmt.Errorf("create vCPU %d: %w", id, err)
	}
	v := &VCPU{ID: id, fd: fd, rawFD: fd.Fd(), init: init, origin: time.Now()}
	v.clock = newExitClock(v.origin)
	if err := kvm.InitVCPU(v.fd, &v.init); err != nil {
		fd.Close()
		return nil, fmt.Errorf("KVM_ARM_VCPU_INIT vCPU %d: %w", id, err)
	}
	// StateReset, the zero State: the init above.
	if v.run, err = kvm.MapRun(sys, v.fd); err != nil {
		fd.Close()
		return nil, fmt.Errorf("vCPU %d: %w", id, err)
	}
	if v.mpidr, err = kvm.GetOneReg(v.fd, kvm.RegMPIDREL1); err != nil {
		v.Close()
		return nil, fmt.Errorf("read MPIDR_EL1 of vCPU %d: %w", id, err)
	}
	if v.resetSCTLR, err = kvm.GetOneReg(v.fd, kvm.RegSCTLREL1); err == nil {
		v.resetPSTATE, err = kvm.GetOneReg(v.fd, kvm.RegPSTATE)
	}
	if err != nil {
		v.Close()
		return nil, fmt.Errorf("read the reset state of vCPU %d: %w", id, err)
	}
	v.tid.Store(int32(unix.Gettid()))
	nameThread(fmt.Sprintf("mvm-vcpu-%d", id))
	return v, nil
}

// nameThread sets the calling thread's name (PR_SET_NAME, at most 15
// bytes). A name is a convenience: failing to set one is not an error.
func nameThread(name string) {
	if b, err := unix.BytePtrFromString(name); err == nil {
		_ = unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(b)), 0, 0, 0)
	}
}

// State is where the vCPU is in its lifecycle. Safe from any goroutine.
func (v *VCPU) State() State { return State(v.state.Load()) }

// step moves the vCPU's lifecycle by e. Called on the vCPU's thread.
func (v *VCPU) step(e Event) error {
	s := v.State()
	n, ok := s.Step(e)
	if !ok {
		// Only a bug in this package gets here.
		return fmt.Errorf("vCPU %d: lifecycle event %v in state %v", v.ID, e, s)
	}
	v.state.Store(uint32(n))
	return nil
}

// Fd is the vCPU file descriptor (for the stats fd and tracepoints).
func (v *VCPU) Fd() uintptr { return v.fd.Fd() }

// MPIDR is the affinity value KVM gave this vCPU (MPIDR_EL1 with the RES1
// and MT bits cleared: Aff3<<32 | Aff2<<16 | Aff1<<8 | Aff0).
func (v *VCPU) MPIDR() uint64 { return v.mpidr & psci.AffinityMask }

// TID is the OS thread currently running this vCPU's loop.
func (v *VCPU) TID() int { return int(v.tid.Load()) }

// PowerOn asks the vCPU's loop to start the guest with req. It never blocks:
// a request while one is pending is dropped and reported false (PSCI has
// already refused a second CPU_ON for the same target by then).
//
// It only posts the request and wakes the vCPU's thread, which writes its
// own entry registers (reset): the caller, a vCPU thread in the middle of
// its CPU_ON exit, goes back into its own guest as soon as it can. Where
// the caller wrote them instead whenever it got to them first (to overlap
// the write with the wake-up), the target, whenever it ran before the
// caller had finished, slept again until the caller was done, and a target
// woken on an idle CPU waited for a caller that had more to do: CPU_ON
// latency in the instruction-time lab was 25 or 35 µs at random, by where
// the scheduler put the two threads (BenchmarkCPUOnFew,
// docs/boot-phases.md "CPU_ON in instruction time").
func (v *VCPU) PowerOn(req PowerOnRequest) bool { return v.box.post(req) }

// DropPowerOn discards a power-on request that was never acted on (before a
// reboot, so a CPU_ON from the previous boot cannot start a vCPU).
func (v *VCPU) DropPowerOn() { v.box.drop() }

// Kick forces the vCPU out of KVM_RUN (or keeps it from entering): it sets
// kvm_run.immediate_exit and signals the vCPU's thread. The signal is SIGURG,
// for which the Go runtime has a handler that ignores foreign sends, so
// KVM_RUN returns EINTR. A parked vCPU is woken to re-check its stop
// channel. Safe from any goroutine.
func (v *VCPU) Kick() {
	v.run.SetImmediateExit(true)
	v.box.wake()
	v.signalThread()
}

// signalThread sends SIGURG to the vCPU's thread, so that a KVM_RUN in
// progress returns EINTR.
func (v *VCPU) signalThread() {
	if tid := v.TID(); tid > 0 {
		// tgkill(2) may fail with EAGAIN when the kernel cannot queue
		// the signal (documented for real-time signals, which SIGURG is
		// not); a lost kick would leave the vCPU in the guest, so send
		// it again rather than rely on that.
		for unix.Tgkill(unix.Getpid(), tid, unix.SIGURG) == unix.EAGAIN {
			runtime.Gosched()
		}
	}
}

// Close releases the vCPU.
func (v *VCPU) Close() error {
	v.timer.close()
	if v.run != nil {
		v.run.Unmap()
	}
	return v.fd.Close()
}

// Prewarm does the vCPU's first KVM_RUN without entering the guest
// (immediate_exit set, so KVM returns EINTR after its first-run set-up:
// binding the thread, vGIC and timer resources). Without it that one-off
// cost would land on the vCPU's first power-on — a secondary's CPU_ON
// latency with PSCI in userspace. Call it on the vCPU's thread after the
// vGIC is initialised.
func (v *VCPU) Prewarm() error {
	v.run.SetImmediateExit(true)
	defer v.run.SetImmediateExit(false)
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, v.rawFD, kvm.ReqRun, 0)
	if errno != 0 && errno != unix.EINTR {
		return fmt.Errorf("vCPU %d: first KVM_RUN: %w", v.ID, errno)
	}
	return nil
}

// InitPMU connects the vCPU's PMU (created with kvm.FeaturePMUv3) to its
// overflow interrupt intid and initialises it. Call it on the vCPU's
// thread after the vGIC is initialised and before Prewarm. The PMU
// survives the KVM_ARM_VCPU_INIT of every later power-on, since KVM keeps
// an initialised PMU across vCPU resets; v.init keeps the feature bit that
// each of those inits must repeat.
func (v *VCPU) InitPMU(intid uint32) error {
	if err := kvm.SetPMUIRQ(v.fd, int32(intid)); err != nil {
		return fmt.Errorf("vCPU %d: set the PMU interrupt (KVM_ARM_VCPU_PMU_V3_IRQ = %d): %w", v.ID, intid, err)
	}
	if err := kvm.InitPMU(v.fd); err != nil {
		return fmt.Errorf("vCPU %d: KVM_ARM_VCPU_PMU_V3_INIT: %w", v.ID, err)
	}
	return nil
}

// LastVBAR is the guest's VBAR_EL1 when it last left the guest (0 before
// that, or if it was never set).
func (v *VCPU) LastVBAR() uint64 { return v.vbar.Load() }

// Reg reads a ONE_REG register.
func (v *VCPU) Reg(id kvm.RegID) (uint64, error) { return kvm.GetOneReg(v.fd, id) }

// SetReg writes a ONE_REG register.
func (v *VCPU) SetReg(id kvm.RegID, val uint64) error { return kvm.SetOneReg(v.fd, id, val) }

// X reads general-purpose register Xn.
func (v *VCPU) X(n int) (uint64, error) { return kvm.GetOneReg(v.fd, kvm.RegX(n)) }

// SetX writes general-purpose register Xn.
func (v *VCPU) SetX(n int, val uint64) error { return kvm.SetOneReg(v.fd, kvm.RegX(n), val) }

// Loop runs the vCPU until stop is closed or a handler says Halt. Close
// stop and then Kick the vCPU: a vCPU in the guest sees stop only at its
// next exit that is not MMIO (runGuest says why). It locks the calling
// goroutine to its OS thread for its whole life. A fault
// (failed entry, internal error, unhandled exit) returns a *FaultError.
func (v *VCPU) Loop(stop <-chan struct{}, h Handler) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	v.tid.Store(int32(unix.Gettid()))
	for {
		if err := v.park(); err != nil {
			if v.State() == StateRunning {
				// A failed rearm: the guest ran, so the next boot
				// must initialise this vCPU again.
				_ = v.step(EventHalt)
			}
			return err
		}
		req, ok := v.box.wait(stop)
		if !ok {
			return v.step(EventStop)
		}
		if err := v.step(EventWake); err != nil {
			return err
		}
		v.Woken = v.Now()
		next, err := v.start(req, stop, h)
		// Where the guest kernel's exception vectors are, for the exit
		// profile's KASLR offset; read here, on the vCPU's own thread,
		// before a power-off reset clears it.
		if vbar, verr := kvm.GetOneReg(v.fd, kvm.RegVBAREL1); verr == nil && vbar != 0 {
			v.vbar.Store(vbar)
		}
		if err != nil || next == Halt {
			if serr := v.step(EventHalt); err == nil {
				err = serr
			}
			return err
		}
	}
}

// park readies the vCPU to wait for a power-on. The reset happens here,
// while it is parked, so a power-on only has to set registers: the reset
// is the costly part of starting a vCPU and would otherwise sit on the
// CPU_ON path. A boot's first park initialises the vCPU (resetState,
// unless it is still in reset state); a park after the guest's CPU_OFF
// only rearms it (rearm says why).
func (v *VCPU) park() error {
	switch v.State() {
	case StateRunning:
		if err := v.rearm(); err != nil {
			return err
		}
		return v.step(EventPowerOff)
	case StateStopped:
		if err := v.resetState(); err != nil {
			return err
		}
	}
	return v.step(EventPark)
}

// start takes the vCPU from a power-on request into the guest and runs it
// until its next power-off or halt.
func (v *VCPU) start(req PowerOnRequest, stop <-chan struct{}, h Handler) (Next, error) {
	if err := v.reset(req); err != nil {
		return Halt, err
	}
	v.Reset = v.Now()
	v.LastOn = req
	if req.Ready != nil {
		close(req.Ready)
	}
	v.Entered = v.Now()
	h.Entering(v)
	return v.runGuest(stop, h)
}

// Reinit puts a vCPU whose loop has ended back in its reset state
// (KVM_ARM_VCPU_INIT, unless it is still in it), for a reboot: done for
// every vCPU before the next boot starts any, the init's stage-2 unmap on
// hosts without FEAT_S2FWB (resetState) happens while no vCPU runs, and
// each Loop's first park finds its vCPU fresh. Call it on the vCPU's
// thread.
func (v *VCPU) Reinit() error { return v.resetState() }

// resetState puts the vCPU in its reset state with KVM_ARM_VCPU_INIT,
// unless no guest instruction ran since the last one (StateReset: a vCPU
// parked for the first time, with only Prewarm's KVM_RUN behind it, which
// enters no guest). Only a vCPU whose loop is not running gets here.
//
// The init is skipped because on a vCPU that has been in KVM_RUN it is not
// just a reset: KVM prepares for a rebooted guest that runs with its MMU
// off, and on a host without FEAT_S2FWB it unmaps the whole VM's stage 2
// (every running vCPU then faults its memory back in), with FWB it
// invalidates every CPU's instruction cache (arch/arm64/kvm/arm.c,
// kvm_arch_vcpu_ioctl_vcpu_init). Without the skip, the secondaries' first
// parks did that while the boot CPU was already running, once per vCPU.
func (v *VCPU) resetState() error {
	if v.State() == StateReset {
		return nil
	}
	if err := kvm.InitVCPU(v.fd, &v.init); err != nil {
		return fmt.Errorf("reset vCPU %d: KVM_ARM_VCPU_INIT: %w", v.ID, err)
	}
	return v.step(EventInit)
}

// reset puts the parked vCPU in its power-on state for req: PC and X0.
// The park already set PSTATE = EL1h with DAIF masked (0x3c5), the MMU off
// and X0 zero (booting.rst's entry state; resetState, rearm), so X0 is
// written only when the context is not zero (Linux's CPU_ON passes 0):
// each write is a system call on the CPU_ON path.
func (v *VCPU) reset(req PowerOnRequest) error {
	if req.InitOnly {
		return nil
	}
	return v.setEntry(req)
}

// rearm readies a vCPU the guest powered off (PSCI CPU_OFF) for its next
// CPU_ON without KVM_ARM_VCPU_INIT: it writes the state PSCI gives a core
// it powers on that KVM_ARM_VCPU_INIT would have written (PSTATE EL1h with
// DAIF masked, SCTLR_EL1 as reset, so the MMU and caches are off, and X0
// zero); CPU_ON then sets PC and the context. The rest of the core's state
// is left as the guest had it, which PSCI allows: a core that was powered
// down comes back with its other registers UNKNOWN, and an OS brings up a
// secondary from that (Linux's secondary_entry sets every register it
// relies on, as it must on real hardware).
//
// Not KVM_ARM_VCPU_INIT, because on a vCPU that has run it also prepares
// KVM for a rebooted guest: without FEAT_S2FWB it unmaps the whole VM's
// stage 2, so every running vCPU faults its memory back in, once per
// CPU_OFF; with FWB it invalidates every host CPU's instruction cache
// (arch/arm64/kvm/arm.c, kvm_arch_vcpu_ioctl_vcpu_init). KVM's in-kernel
// PSCI does neither on CPU_ON (it resets with kvm_reset_vcpu alone).
// A reboot still re-initialises every vCPU (Loop's first park).
func (v *VCPU) rearm() error {
	for _, r := range [...]struct {
		id   kvm.RegID
		val  uint64
		name string
	}{
		{kvm.RegPSTATE, v.resetPSTATE, "PSTATE"},
		{kvm.RegSCTLREL1, v.resetSCTLR, "SCTLR_EL1"},
		{kvm.RegX(0), 0, "X0"},
	} {
		if err := kvm.SetOneReg(v.fd, r.id, r.val); err != nil {
			return fmt.Errorf("rearm vCPU %d after CPU_OFF: set %s: %w", v.ID, r.name, err)
		}
	}
	return nil
}

// setEntry writes PC and, if not zero, X0 for req. On the vCPU's own
// thread, between its wake-up and its KVM_RUN: raw calls
// (kvm.SetOneRegOwn).
func (v *VCPU) setEntry(req PowerOnRequest) error {
	if err := kvm.SetOneRegOwn(v.rawFD, kvm.RegPC, req.Entry); err != nil {
		return fmt.Errorf("reset vCPU %d: set PC: %w", v.ID, err)
	}
	if req.Context != 0 {
		if err := kvm.SetOneRegOwn(v.rawFD, kvm.RegX(0), req.Context); err != nil {
			return fmt.Errorf("reset vCPU %d: set X0: %w", v.ID, err)
		}
	}
	return nil
}

func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// runGuest is the KVM_RUN loop of one power-on period.
//
// An exit reads the clock twice (returned, handled), from the generic
// timer's counter (exitClock): two vDSO calls per exit were a measurable
// part of this loop. The moments are offsets from the vCPU's origin.
//
// An MMIO exit goes straight back into KVM_RUN: it neither clears
// kvm_run.immediate_exit nor polls stop (a non-blocking receive is a
// runtime call) nor looks for an Inspect. That is safe because whoever
// wants the loop's attention sets immediate_exit before signalling (Kick,
// Inspect; VM.boot closes stop and then kicks), and only the outer loop,
// after an exit that is not MMIO, clears it: a kick that lands while the
// thread is out of KVM_RUN leaves immediate_exit set, so the next KVM_RUN
// returns EINTR at once, and that exit, like the EINTR of a kick that
// lands in the guest, reaches the outer loop. immediate_exit is cleared
// before stop is polled, so a kick that lands after the poll sets it
// again and the next KVM_RUN returns at once.
//
// The re-entry after an MMIO exit is a RawSyscall: without the runtime's
// entersyscall/exitsyscall it saves about 250 instructions per round trip
// (instruction-time lab: MMIOExit 1.055 -> 1.025, docs/boot-phases.md).
// Other entries are plain Syscalls, which give the goroutine's P back
// while the vCPU is in the guest. A raw call keeps its P: vmm keeps
// GOMAXPROCS two above the vCPU count, so other goroutines still find one,
// but mvm runs with asyncpreemptoff=1 (cmd/mvm, runtimeSettings), so no
// preemption signal ends a raw KVM_RUN whose guest waits in WFI, and the
// garbage collector's stop-the-world would wait for that vCPU for as long
// as it sleeps (a 4-vCPU Linux boot with a metrics scraper hung in the lab
// when the raw call had no bound). So the first raw entry arms a periodic
// timer (rawTimer, rawBound) that ends it with EINTR; after any exit but
// MMIO the timer is disarmed and the next entry is a plain Syscall again.
func (v *VCPU) runGuest(stop <-chan struct{}, h Handler) (Next, error) {
	// No anchor here: the power-on's Now calls (Woken, Reset, Entered)
	// already re-anchored a clock that had been idle for 100 ms.
	clk := &v.clock
	fd := v.rawFD
	raw := false
	for {
		v.run.SetImmediateExit(false)
		if stopped(stop) {
			return Halt, nil
		}
		var errno unix.Errno
		var t0 time.Duration
		for {
			if raw {
				_, _, errno = unix.RawSyscall(unix.SYS_IOCTL, fd, kvm.ReqRun, 0)
			} else {
				_, _, errno = unix.Syscall(unix.SYS_IOCTL, fd, kvm.ReqRun, 0)
			}
			t0 = clk.now()
			v.lastExitNS.Store(int64(t0))
			if errno != 0 || v.run.ExitReason() != kvm.ExitMMIO {
				break
			}
			// The hot path, decoded in line: an MMIO exit is always
			// the Handler's, and its Action never writes a register
			// (the perf gate's MMIOExit counts every instruction
			// here).
			e := &v.exit
			e.Reason, e.Errno = kvm.ExitMMIO, 0
			e.MMIO.Addr, e.MMIO.Data, e.MMIO.Write = v.run.MMIO()
			a := h.Exit(v, e)
			t1 := clk.now()
			h.Exited(v, kvm.ExitMMIO, a.Key, t1-t0, t1)
			if a.Next != Continue {
				if raw {
					v.timer.disarm()
				}
				return a.Next, nil
			}
			if !raw {
				raw = v.timer.arm()
			}
		}
		if v.inspect.Load() != nil {
			// Any exit will do: the kick's EINTR, or a natural exit
			// when the kick landed while this thread was out of
			// KVM_RUN.
			v.answerInspect()
		}
		e := &v.exit
		a, err := v.otherExit(e, errno, h)
		if err != nil {
			if raw {
				v.timer.disarm()
			}
			return Halt, err
		}
		t1 := clk.now()
		h.Exited(v, e.Reason, a.Key, t1-t0, t1)
		if raw {
			// Out of the raw stretch: the next entry gives its P
			// back. Disarmed after the exit is handled, so that a
			// CPU_ON's start is posted first (and the profile's
			// handling time is the handler's).
			raw = false
			v.timer.disarm()
		}
		if a.Next != Continue {
			return a.Next, nil
		}
	}
}

// otherExit decodes and carries out every exit but MMIO: the loop's own
// (decide) and the Handler's.
func (v *VCPU) otherExit(e *Exit, errno unix.Errno, h Handler) (Action, error) {
	if err := v.decode(e, errno); err != nil {
		return Action{}, err
	}
	switch decide(e) {
	case stepReenter:
		return Action{Next: Continue, Key: -1}, nil
	case stepFault:
		what, detail := faultText(e)
		return Action{}, v.fault(what, detail)
	}
	a := h.Exit(v, e)
	if a.SetX0 {
		if err := kvm.SetOneRegOwn(v.rawFD, kvm.RegX(0), a.X0); err != nil {
			return Action{}, fmt.Errorf("vCPU %d: write X0 (the result of SMCCC call %#x): %w", v.ID, e.Hypercall.FID, err)
		}
	}
	return a, nil
}

// decode fills e from KVM_RUN's result errno and the kvm_run page, and for
// a forwarded call in the PSCI ranges reads its argument registers (on
// the vCPU's own thread, so as raw calls: kvm.GetOneRegOwn; a CPU_ON's
// caller reads three before it can post the start).
func (v *VCPU) decode(e *Exit, errno unix.Errno) error {
	e.Errno = 0
	if errno == unix.EINTR || errno == unix.EAGAIN {
		e.Reason = kvm.ExitIntr
		return nil
	}
	if errno != 0 {
		e.Errno = errno
		return nil
	}
	e.Reason = v.run.ExitReason()
	switch e.Reason {
	case kvm.ExitMMIO:
		e.MMIO.Addr, e.MMIO.Data, e.MMIO.Write = v.run.MMIO()
	case kvm.ExitHypercall:
		nr, flags := v.run.Hypercall()
		fid := uint32(nr)
		e.At = v.LastExitTime()
		e.Hypercall = HypercallExit{FID: fid, SMC: flags&kvm.HypercallExitSMC != 0}
		if psci.InRange(fid) {
			for i := 1; i <= psci.Args(fid); i++ {
				x, err := kvm.GetOneRegOwn(v.rawFD, kvm.RegX(i))
				if err != nil {
					return fmt.Errorf("vCPU %d: read X%d for PSCI call %s: %w", v.ID, i, psci.Name(fid), err)
				}
				e.Hypercall.Args[i-1] = x
			}
		}
	case kvm.ExitSystemEvent:
		e.SystemEvent.Type, e.SystemEvent.NData = v.run.SystemEvent(&e.SystemEvent.Data)
	case kvm.ExitFailEntry:
		e.FailEntry.Reason, e.FailEntry.CPU = v.run.FailEntry()
	case kvm.ExitInternalError:
		e.Internal.Suberror, e.Internal.NData = v.run.InternalError(&e.Internal.Data)
	}
	return nil
}

func (v *VCPU) fault(what, detail string) error {
	e := &FaultError{VCPU: v.ID, What: what, Detail: detail}
	e.PC, _ = kvm.GetOneReg(v.fd, kvm.RegPC)
	e.PSTATE, _ = kvm.GetOneReg(v.fd, kvm.RegPSTATE)
	return e
}
