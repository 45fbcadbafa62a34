//go:build linux && arm64

package vmm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"time"
	"unsafe"

	"github.com/mvm-dev/mvm/devices"
	"github.com/mvm-dev/mvm/exits/profile"
	"github.com/mvm-dev/mvm/exits/symbols"
	"github.com/mvm-dev/mvm/internal/kvm"
	"github.com/mvm-dev/mvm/psci"
	"github.com/mvm-dev/mvm/runsummary"
	"github.com/mvm-dev/mvm/vcpu"
)

// VM is one virtual machine.
type VM struct {
	// exitCore: the logger, the device bus, PSCI (user mode), the exit
	// accounting and the guest-misbehaviour counters; the VM's answer
	// to each vCPU exit.
	exitCore

	cfg  Config
	psci runsummary.PSCIMode // resolved: user or kernel

	sys *os.File
	vm  *os.File
	gic *os.File
	ram *guestRAM

	bootPlan
	dtb []byte
	// guestSyms is the --guest-symbols table, read with the rest of the
	// input before the host is touched (checkInput).
	guestSyms *symbols.Table
	// shareSandbox is virtiofsd's --sandbox, decided by the input check.
	shareSandbox string

	uart    devices.ConsoleUART // the 16550 or, with --serial pl011, the PL011
	marker  *devices.Marker
	rtc     *devices.PL031
	watcher *consoleWatcher
	virtio  []*virtioSlot

	cpus    []*cpuThread
	heat    *exitHeat
	metrics *metricsServer

	events chan endEvent // first guest-initiated end of the run

	mu       sync.Mutex
	timeline Timeline
}

// cpuThread is the goroutine that owns one vCPU for the VM's life: it creates
// the vCPU on its own locked OS thread and runs every boot's loop there.
type cpuThread struct {
	v    *vcpu.VCPU
	runs chan runCmd
	gone chan struct{}
}

type runCmd struct {
	stop <-chan struct{}
	done chan<- error
	// fn, if set, runs on the vCPU's thread instead of the run loop.
	fn func(*vcpu.VCPU) error
}

// New builds the VM: it reads the kernel and initrd, checks the host,
// creates the VM, its RAM, vCPUs, vGICv3 and devices, and loads the boot
// images. Every error is one sentence a user can act on.
func New(cfg Config) (*VM, error) {
	if cfg.Start.IsZero() {
		cfg.Start = time.Now()
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	m := &VM{exitCore: newExitCore(log), cfg: cfg, events: make(chan endEvent, 1)}
	// Every vCPU thread sits in KVM_RUN holding a P while its guest runs;
	// with fewer Ps than vCPUs a goroutine woken for a CPU_ON or a device
	// waits for the runtime to retake one (up to milliseconds). Enough Ps
	// keep one idle for it.
	if want := cfg.CPUs + 2; runtime.GOMAXPROCS(0) < want {
		runtime.GOMAXPROCS(want)
	}
	if err := m.build(); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// CheckHost says whether this host can run mvm's VMs: whether /dev/kvm
// opens. A tool that starts many VMs (mvm bench) calls it once, after its
// input checks and before the first boot.
func CheckHost() error {
	sys, err := kvm.Open()
	if err != nil {
		return err
	}
	return sys.Close()
}

func (m *VM) build() error {
	in, err := checkInput(m.cfg)
	if err != nil {
		return err
	}
	m.bootPlan, m.guestSyms, m.shareSandbox = in.boot, in.symbols, in.sandbox
	m.log.Info("kernel", "path", m.kernel.Path, "format", m.kernel.Format, "size", m.kernel.size(),
		"unpack", m.kernel.UnpackTime.Round(time.Millisecond), "tree", m.kernel.Tree)
	if err := m.openVirtio(); err != nil {
		return err
	}
	if m.sys, err = kvm.Open(); err != nil {
		return err
	}
	if max := kvm.CheckExtension(m.sys, kvm.CapMaxVCPUs); max > 0 && m.cfg.CPUs > max {
		return fmt.Errorf("--cpus %d is more than this host's KVM allows (KVM_CAP_MAX_VCPUS = %d)", m.cfg.CPUs, max)
	}
	if m.cfg.PMU {
		if err := checkPMU(func(c kvm.Cap) int { return kvm.CheckExtension(m.sys, c) }); err != nil {
			return err
		}
	}
	vm, err := kvm.CreateVM(m.sys)
	if err != nil {
		return fmt.Errorf("KVM_CREATE_VM: %w", err)
	}
	m.vm = vm

	if err := m.setupPSCI(); err != nil {
		return err
	}
	if m.ram, err = newGuestRAM(m.vm, RAMRegions(m.cfg.Memory), len(m.cfg.Shares) > 0); err != nil {
		return err
	}
	if err := m.createVCPUs(); err != nil {
		return err
	}
	if err := m.createGIC(); err != nil {
		return err
	}
	if m.cfg.PMU {
		// After the vGIC's INIT, before any KVM_RUN (vcpu.rst 1.2).
		if err := m.onEachVCPU(func(v *vcpu.VCPU) error { return v.InitPMU(PMUIntID) }); err != nil {
			return fmt.Errorf("--pmu: %w", err)
		}
	}
	if err := m.onEachVCPU((*vcpu.VCPU).Prewarm); err != nil {
		return err
	}
	if err := m.createDevices(); err != nil {
		return err
	}
	if err := m.attachVirtio(); err != nil {
		return err
	}
	if err := m.setupProfile(); err != nil {
		return err
	}
	if m.dtb, err = m.deviceTree(); err != nil {
		return fmt.Errorf("build device tree: %w", err)
	}
	return m.load()
}

// guestVBAR is the boot vCPU's VBAR_EL1 as it last left the guest (any
// vCPU's if the boot vCPU never set one).
func (m *VM) guestVBAR() uint64 {
	for _, t := range m.cpus {
		if v := t.v.LastVBAR(); v != 0 {
			return v
		}
	}
	return 0
}

// setupProfile creates the exit recorders, opens the profiling sources when
// asked, and binds the metrics listener (so a bad address fails early).
func (m *VM) setupProfile() error {
	var names []string
	for _, d := range m.bus.Devices() {
		names = append(names, d.Name())
	}
	p, err := newProfile(m.log, len(m.cpus), names)
	if err != nil {
		return err
	}
	m.prof = p
	m.heat = newExitHeat(m.cfg.Start, len(m.cpus))
	if m.cfg.Profile {
		var fds []uintptr
		var tids []int
		for _, t := range m.cpus {
			fds = append(fds, t.v.Fd())
			tids = append(tids, t.v.TID())
		}
		pc := profile.Config{VMFd: m.vm.Fd(), VCPUFds: fds, TIDs: tids, Sources: m.cfg.ProfileSources,
			Layout:      profileLayout(len(m.cpus), append(m.bus.Ranges(), m.virtioRanges()...), RAMRegions(m.cfg.Memory)),
			NoBreakdown: m.cfg.ProfilePlain,
			VBAR:        m.guestVBAR, Via: m.cfg.ProfileVia, Light: m.cfg.ProfileLight}
		if m.guestSyms != nil {
			pc.Symbols, pc.SymbolsFile = m.guestSyms, m.cfg.GuestSymbols
		}
		p.enable(pc)
	}
	if m.cfg.MetricsAddr != "" {
		if m.metrics, err = newMetricsServer(m.cfg.MetricsAddr, m); err != nil {
			return err
		}
	}
	return nil
}

// setupPSCI resolves the PSCI mode and installs the SMCCC filter for user
// mode. The filter must be set before any vCPU runs.
func (m *VM) setupPSCI() error {
	has := kvm.HasSMCCCFilter(m.vm)
	switch m.cfg.PSCI {
	case runsummary.PSCIUser:
		if !has {
			return errors.New("--psci user needs the SMCCC filter (Linux 6.4+ on the host); use --psci kernel or auto")
		}
		m.psci = runsummary.PSCIUser
	case runsummary.PSCIKernel:
		m.psci = runsummary.PSCIKernel
	default:
		m.psci = runsummary.PSCIKernel
		if has {
			m.psci = runsummary.PSCIUser
		}
	}
	if m.psci != runsummary.PSCIUser {
		return nil
	}
	for _, r := range psci.FilterRanges() {
		f := kvm.SMCCCFilter{Base: r.Base, NrFunctions: r.Count, Action: kvm.SMCCCActionForward}
		if err := kvm.SetSMCCCFilter(m.vm, f); err != nil {
			return fmt.Errorf("install SMCCC filter %#x+%#x: %w", r.Base, r.Count, err)
		}
	}
	return nil
}

// createVCPUs starts one goroutine per vCPU; each creates and initialises
// its vCPU on its own locked OS thread.
func (m *VM) createVCPUs() error {
	target, err := kvm.PreferredTarget(m.vm)
	if err != nil {
		return fmt.Errorf("KVM_ARM_PREFERRED_TARGET: %w", err)
	}
	created := make(chan error, m.cfg.CPUs)
	m.cpus = make([]*cpuThread, m.cfg.CPUs)
	for id := range m.cpus {
		init := target
		init.Features[0] |= 1 << kvm.FeaturePSCI02
		if m.cfg.PMU {
			// Kept in the vCPU's init, so every re-init repeats it
			// (KVM refuses a KVM_ARM_VCPU_INIT with other features).
			init.Features[0] |= 1 << kvm.FeaturePMUv3
		}
		if m.psci == runsummary.PSCIKernel && id != 0 {
			// KVM's PSCI keeps secondaries off until CPU_ON.
			init.Features[0] |= 1 << kvm.FeaturePowerOff
		}
		t := &cpuThread{runs: make(chan runCmd), gone: make(chan struct{})}
		m.cpus[id] = t
		go func() {
			runtime.LockOSThread() // never unlocked: the thread dies with us
			defer close(t.gone)
			v, err := vcpu.New(m.sys, m.vm, id, init)
			t.v = v
			created <- err
			if err != nil {
				return
			}
			defer v.Close()
			for cmd := range t.runs {
				if cmd.fn != nil {
					cmd.done <- cmd.fn(v)
					continue
				}
				cmd.done <- v.Loop(cmd.stop, m)
			}
		}()
	}
	var first error
	for range m.cpus {
		if err := <-created; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return first
	}
	m.timeline.CPUs = make([]CPUTimeline, len(m.cpus))
	if m.psci == runsummary.PSCIUser {
		mpidrs := make([]uint64, len(m.cpus))
		for i, t := range m.cpus {
			mpidrs[i] = t.v.MPIDR()
		}
		return m.setUserPSCI(mpidrs, m.ram.contains)
	}
	return nil
}

// onEachVCPU runs fn on every vCPU's own thread, in parallel, and returns
// the first error.
func (m *VM) onEachVCPU(fn func(*vcpu.VCPU) error) error {
	done := make(chan error, len(m.cpus))
	for _, t := range m.cpus {
		t.runs <- runCmd{done: done, fn: fn}
	}
	var first error
	for range m.cpus {
		if err := <-done; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// createGIC creates the in-kernel vGICv3 with one redistributor region for
// all vCPUs (Documentation/virt/kvm/devices/arm-vgic-v3.rst).
func (m *VM) createGIC() error {
	gic, err := kvm.CreateDevice(m.vm, kvm.DevTypeARMVGICv3)
	if err != nil {
		return fmt.Errorf("create vGICv3: %w (this host's KVM has no GICv3 emulation; mvm needs it)", err)
	}
	m.gic = gic
	dist, redist := uint64(GICDistBase), uint64(GICRedistBase)
	nr := uint32(NrIRQs)
	steps := []struct {
		what  string
		group uint32
		attr  uint64
		val   unsafe.Pointer
	}{
		{"distributor address", kvm.VGICGroupAddr, kvm.VGICv3AddrDist, unsafe.Pointer(&dist)},
		{"redistributor address", kvm.VGICGroupAddr, kvm.VGICv3AddrRedist, unsafe.Pointer(&redist)},
		{"number of IRQs", kvm.VGICGroupNrIRQ, 0, unsafe.Pointer(&nr)},
		{"init", kvm.VGICGroupCtrl, kvm.VGICCtrlInit, nil},
	}
	for _, s := range steps {
		if err := kvm.SetDeviceAttr(gic, s.group, s.attr, s.val); err != nil {
			return fmt.Errorf("configure vGICv3 (%s): %w", s.what, err)
		}
	}
	return nil
}

func (m *VM) createDevices() error {
	console := m.cfg.Console
	if console == nil {
		console = io.Discard
	}
	m.watcher = newConsoleWatcher(console, append(DefaultConsoleMarkers(), m.cfg.Markers...))
	// Either UART's line is level-triggered: KVM_IRQ_LINE follows it.
	uartIRQ := func(level bool) {
		if err := kvm.IRQLine(m.vm, kvm.IRQTypeSPI, 0, SPIFirst+UARTSPI, level); err != nil {
			m.log.Warn("raise UART interrupt", "err", err)
		}
	}
	if m.cfg.Serial == SerialPL011 {
		m.uart = devices.NewPL011(m.watcher, uartIRQ)
	} else {
		m.uart = devices.NewUART(m.watcher, uartIRQ)
	}
	m.marker = devices.NewMarker(func(code byte, at time.Time) {
		if code != devices.MarkUserspace && code != devices.MarkFirecrackerEnd {
			return
		}
		m.mu.Lock()
		if m.timeline.UserspaceMark.IsZero() {
			m.timeline.UserspaceMark = at
		}
		m.mu.Unlock()
		m.prof.markUserspace()
	})
	// The PL031's line is level-triggered: KVM_IRQ_LINE follows it.
	m.rtc = devices.NewPL031(devices.HostClock{}, func(level bool) {
		if err := kvm.IRQLine(m.vm, kvm.IRQTypeSPI, 0, SPIFirst+RTCSPI, level); err != nil {
			m.log.Warn("raise RTC interrupt", "err", err)
		}
	})
	if err := m.bus.Add(UARTBase, UARTSize, m.uart); err != nil {
		return err
	}
	if err := m.bus.Add(RTCBase, RTCSize, m.rtc); err != nil {
		return err
	}
	return m.bus.Add(MarkerBase, MarkerSize, m.marker)
}

func (m *VM) deviceTree() ([]byte, error) {
	mpidrs := make([]uint64, 0, len(m.cpus))
	for _, t := range m.cpus {
		mpidrs = append(mpidrs, t.v.MPIDR())
	}
	var initrd Region
	if m.initrd.size() > 0 {
		initrd = m.place.Initrd
	}
	dt := boardTree(&m.cfg, mpidrs, initrd, m.virtioNodes())
	return dt.Build()
}

// load copies kernel, initrd and DTB into guest RAM.
func (m *VM) load() error {
	if uint64(len(m.dtb)) > m.place.DTB.Size {
		return fmt.Errorf("device tree of %d bytes does not fit its 2 MiB slot", len(m.dtb))
	}
	for _, c := range []struct {
		what string
		at   uint64
		file BootFile
	}{
		{"kernel", m.place.Kernel.Base, m.kernel.BootFile},
		{"initrd", m.place.Initrd.Base, m.initrd},
		{"device tree", m.place.DTB.Base, BootFile{Data: m.dtb}},
	} {
		n := c.file.size()
		if n == 0 {
			continue
		}
		dst, err := m.ram.slice(c.at, n)
		if err != nil {
			return fmt.Errorf("load %s: %w", c.what, err)
		}
		if err := c.file.loadInto(dst); err != nil {
			return fmt.Errorf("load %s: %w", c.what, err)
		}
	}
	// An unpacked kernel (tens of MiB) is in guest RAM now: drop the
	// heap copy, which the GC at the start of Run returns to the host.
	// A reboot unpacks the file again (prepare).
	if m.kernel.Unpacked() {
		m.kernel.Data = nil
	}
	// So is an initramfs built at load (command mode's); without reboots
	// nothing writes it again.
	if m.initrd.Path == "" && m.cfg.OnReset != ResetReboot {
		m.initrd.Archive, m.cfg.InitrdArchive = nil, nil
	}
	return nil
}

// Run boots the guest and runs it until it powers off, resets (with
// --on-reset exit), crashes, faults, or ctx ends. Reboots happen inside.
func (m *VM) Run(ctx context.Context) (Result, error) {
	res := Result{PSCI: m.psci}
	stopInput := m.startConsoleInput()
	defer stopInput()
	if m.metrics != nil {
		m.metrics.start()
		defer m.metrics.stop()
	}
	m.prof.start()
	// Setup is done: what it allocated (flag parsing, the device tree,
	// the loaders' buffers, the seccomp filter) is garbage, and at this
	// heap size no GC has run yet. Collect it and hand the free pages
	// back, then drop the executable pages setup touched; the collection
	// comes first because it walks type data and stack maps itself
	// (docs/footprint.md). The mappings are found before the sandbox,
	// which refuses opening /proc files, and dropped after it.
	text, err := setupText()
	if err != nil {
		m.log.Debug("executable pages stay mapped", "err", err)
	}
	if m.cfg.Seccomp {
		if err := m.sandbox(); err != nil {
			return res, err
		}
	}
	debug.FreeOSMemory()
	if err := dropText(text); err != nil {
		m.log.Debug("executable pages stay mapped", "err", err)
	}
	defer keepPoller()()
	for {
		ev := m.boot(ctx)
		res.Exit, res.Err = ev.kind, ev.err
		if ev.kind == runsummary.ExitReset && m.cfg.OnReset == ResetReboot && ctx.Err() == nil {
			if err := m.reboot(); err != nil {
				return res, err
			}
			res.Reboots++
			m.log.Info("guest reset: rebooting", "reboots", res.Reboots)
			continue
		}
		break
	}
	end := time.Now()
	res.Memory = m.memoryUse()
	res.Profile = m.prof.finish()
	m.mu.Lock()
	if at, ok := m.prof.firstUserExit(); ok && m.timeline.UserspaceMark.IsZero() {
		// No marker: the first exit from a user address (a late edge:
		// userspace started at or before it), moved from the tracepoint
		// clock (CLOCK_MONOTONIC) onto the timeline's.
		now, mono := time.Now(), profile.MonotonicNS()
		if at <= mono {
			m.timeline.UserspaceMark = now.Add(-time.Duration(mono - at))
			m.timeline.UserspaceFrom = runsummary.UserspaceFromFirstUserExit
		}
	} else if !m.timeline.UserspaceMark.IsZero() {
		m.timeline.UserspaceFrom = runsummary.UserspaceFromMarker
	}
	m.timeline.End = end
	res.Timeline = m.timeline
	res.Timeline.CPUs = append([]CPUTimeline(nil), m.timeline.CPUs...)
	m.mu.Unlock()
	res.Timeline.Marks = m.marker.Marks()
	res.Timeline.MarksDropped = m.marker.Dropped()
	res.Timeline.ConsoleMarks = m.watcher.marks()
	res.Timeline.Start = m.cfg.Start
	g := m.guestProblems()
	res.UnmappedAccesses, res.UnknownSMCCCCalls, res.PSCIRejected, res.VirtioProblems = g.unmapped, g.unknownSMCCC, g.psciRejected, g.virtio
	res.ExitHeat = m.heat.result()
	res.Config, res.Host = m.cfg.RunConfig(), runsummary.CurrentHost()
	res.Config.KernelFormat, res.Config.KernelTree = m.kernel.Format, m.kernel.Tree
	return res, nil
}

// guestProblems reads the guest-misbehaviour counters now.
func (m *VM) guestProblems() guestProblems {
	return guestProblems{unmapped: m.unmappedCount.Load(), unknownSMCCC: m.unknownCount.Load(),
		virtio: m.virtioProblems(), psciRejected: m.psciRejected.counts()}
}

// boot runs the vCPUs once, from power-on to the first end event.
func (m *VM) boot(ctx context.Context) endEvent {
	stop := make(chan struct{})
	done := make(chan error, len(m.cpus))
	running := 0
	for _, t := range m.cpus {
		t.v.DropPowerOn()
	}
	ev, ended := m.startLoops(stop, done, &running)
	if !ended {
		select {
		case <-ctx.Done():
			ev = endEvent{kind: runsummary.ExitStopped, err: ctx.Err()}
		case ev = <-m.events:
		case err := <-done:
			running--
			ev = m.loopEnded(err)
		}
	}
	close(stop)
	for _, t := range m.cpus {
		t.v.Kick()
	}
	// KVM always honours immediate_exit, so this wait is bounded.
	for ; running > 0; running-- {
		if err := <-done; err != nil && ev.kind != runsummary.ExitFault {
			m.log.Warn("vCPU stopped with an error", "err", err)
		}
	}
	// Drain an event that raced with the stop.
	select {
	case <-m.events:
	default:
	}
	return ev
}

// startLoops starts every vCPU's loop for one boot, secondaries first. With
// KVM's PSCI each secondary must be reset into its powered-off state before
// the boot CPU can send it a CPU_ON, or the reset would discard that CPU_ON.
// It reports an end event if a loop failed while starting.
func (m *VM) startLoops(stop chan struct{}, done chan error, running *int) (endEvent, bool) {
	for _, t := range m.cpus[1:] {
		var ready chan struct{}
		if m.psci == runsummary.PSCIKernel {
			ready = make(chan struct{})
			t.v.PowerOn(vcpu.PowerOnRequest{InitOnly: true, Ready: ready})
		}
		t.runs <- runCmd{stop: stop, done: done}
		*running++
		if ready != nil {
			select {
			case <-ready:
			case err := <-done:
				*running--
				return m.loopEnded(err), true
			}
		}
	}
	m.cpus[0].v.PowerOn(vcpu.PowerOnRequest{Entry: m.place.Entry, Context: m.place.DTB.Base, Issued: time.Now()})
	m.cpus[0].runs <- runCmd{stop: stop, done: done}
	*running++
	return endEvent{}, false
}

func (m *VM) loopEnded(err error) endEvent {
	if err != nil {
		return endEvent{kind: runsummary.ExitFault, err: err}
	}
	// A loop ended cleanly without an event only when a handler halted
	// it, which always posts the event first.
	select {
	case ev := <-m.events:
		return ev
	default:
		return endEvent{kind: runsummary.ExitFault, err: errors.New("a vCPU stopped without a reason")}
	}
}

// end records the first guest-initiated end of the run.
func (m *VM) end(kind runsummary.ExitKind, err error) {
	select {
	case m.events <- endEvent{kind: kind, err: err}:
	default:
	}
}

// reboot puts the machine back in its power-on state: the boot images
// reloaded, PSCI state reset, timeline cleared. Like a warm reset of real
// hardware, the rest of RAM keeps its contents.
func (m *VM) reboot() error {
	// Not prepare: a boot file that changed since the first boot is a
	// failure of the run (exit status 1), not bad input.
	plan, err := makePlan(m.cfg)
	if err != nil {
		return fmt.Errorf("reboot: %w", err)
	}
	if plan.place != m.place {
		return errors.New("reboot: the kernel or initrd changed size on disk since boot")
	}
	m.bootPlan = plan
	if err := m.load(); err != nil {
		return err
	}
	// Every vCPU is reset before any starts again (vcpu.Reinit).
	if err := m.onEachVCPU((*vcpu.VCPU).Reinit); err != nil {
		return fmt.Errorf("reboot: %w", err)
	}
	if m.pm != nil {
		m.pm.Reset()
	}
	m.marker.Reset()
	m.rtc.Reset()
	if r, ok := m.uart.(interface{ Reset() }); ok {
		r.Reset() // the PL011; the 16550 keeps its state across a reboot, as before
	}
	m.watcher.reset()
	m.resetVirtio()
	m.mu.Lock()
	m.timeline.FirstRun = time.Time{}
	m.timeline.UserspaceMark = time.Time{}
	m.timeline.UserspaceFrom = ""
	m.timeline.CommandEnd = time.Time{}
	m.timeline.CPUs = make([]CPUTimeline, len(m.cpus))
	m.mu.Unlock()
	return nil
}

// MarkCommandEnd records when command mode's status came in: the end of
// the command phase (the first call counts).
func (m *VM) MarkCommandEnd(at time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.timeline.CommandEnd.IsZero() {
		m.timeline.CommandEnd = at
	}
}

// startConsoleInput forwards ConsoleIn to the UART; the returned func stops it.
func (m *VM) startConsoleInput() func() {
	if m.cfg.ConsoleIn == nil {
		return func() {}
	}
	quit := make(chan struct{})
	go func() {
		buf := make([]byte, 64)
		for {
			n, err := m.cfg.ConsoleIn.Read(buf)
			p := buf[:n]
			for len(p) > 0 {
				room := m.uart.RxRoom()
				if room == 0 {
					select {
					case <-quit:
						return
					case <-time.After(time.Millisecond):
					}
					continue
				}
				k := min(room, len(p))
				m.uart.Input(p[:k])
				p = p[k:]
			}
			if err != nil {
				return
			}
			select {
			case <-quit:
				return
			default:
			}
		}
	}()
	return func() { close(quit) }
}

// Close releases everything the VM holds.
func (m *VM) Close() error {
	for _, t := range m.cpus {
		if t == nil {
			continue
		}
		close(t.runs)
		<-t.gone
	}
	m.cpus = nil
	if m.rtc != nil {
		m.rtc.Close()
	}
	m.prof.close()
	if m.metrics != nil {
		m.metrics.stop()
	}
	// Devices stop (and disks sync) before the RAM they use goes away.
	if err := m.closeVirtio(); err != nil {
		m.log.Error("closing virtio devices", "err", err)
	}
	if m.ram != nil {
		m.ram.close()
	}
	for _, f := range []*os.File{m.gic, m.sys} {
		if f != nil {
			f.Close()
		}
	}
	if m.vm != nil {
		m.vm.Close()
	}
	return nil
}

// memoryUse reads mvm's resident set and the resident guest RAM.
func (m *VM) memoryUse() MemoryUse {
	var u MemoryUse
	if g, err := m.ram.resident(); err == nil {
		u.GuestResident = g
	}
	u.RSS = procKB("/proc/self/status", "VmRSS")
	u.Anonymous = procKB("/proc/self/smaps_rollup", "Anonymous")
	u.GuestMemfd = m.ram.memfd >= 0
	return u
}
