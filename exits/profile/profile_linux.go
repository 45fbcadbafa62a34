//go:build linux

// Package profile runs the optional sources of an exit profile for one VM
// and assembles the report: it opens the KVM stats files of the VM and
// vCPU file descriptors and the kvm_entry/kvm_exit tracepoints of the vCPU
// threads (BPF counters or perf rings, as exits/source decides), takes the "before" numbers when the guest starts, and at the end
// builds an exits.Report from them and from the userspace recorders'
// snapshots. It is not tied to mvm's own VMM: any VM fd, vCPU fds and vCPU
// thread ids will do.
package profile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mvm-dev/mvm/exits"
	"github.com/mvm-dev/mvm/exits/bpfagg"
	"github.com/mvm-dev/mvm/exits/kvmstat"
	"github.com/mvm-dev/mvm/exits/source"
	"github.com/mvm-dev/mvm/exits/symbols"
	"github.com/mvm-dev/mvm/exits/tracepoint"
	"github.com/mvm-dev/mvm/exits/userspace"
	"golang.org/x/sys/unix"
)

// Config says what to profile.
type Config struct {
	// VMFd is the VM file descriptor, VCPUFds the vCPU file descriptors
	// in vCPU order, TIDs the threads running them (same order).
	VMFd    uintptr
	VCPUFds []uintptr
	TIDs    []int
	// Sources limits the profile to these sources (exits.Source*); empty
	// means all. The userspace source is the caller's recorders and is
	// always present.
	Sources []string
	// Logger receives diagnostics (nil: slog.Default()).
	Logger *slog.Logger
	// Layout describes the guest to the tracepoint breakdown (regions,
	// RAM, vCPUs); NoBreakdown leaves the breakdown's tracepoints out.
	Layout      exits.Layout
	NoBreakdown bool
	// Symbols names the guest functions of the exit PCs (nil: raw PCs).
	// SymbolsFile is its path for the report. VBAR, if set, returns the
	// guest's VBAR_EL1 at the end of the run, for the KASLR offset.
	Symbols     *symbols.Table
	SymbolsFile string
	VBAR        func() uint64
	// Via is how the tracepoints are read: source.ViaAuto (BPF programs
	// where the kernel allows them, else perf rings), ViaBPF or ViaPerf.
	Via string
	// Light samples instead (mvm run --profile=light): the BPF programs,
	// without breakdown, attached for short windows only, their counts
	// scaled by the stats fd's exact exits (light_linux.go). Via,
	// NoBreakdown, Layout and Symbols are then not read; nothing live is
	// exported from the tracepoints (Trace is nil).
	Light bool
}

// bpfMissing is what the BPF path does not keep, for the Sources list.
const bpfMissing = "guest code (exit PCs) comes from the perf rings only (--guest-symbols or --profile-via perf)"

// topFunctions is how many guest functions (or PCs) the report lists per
// reason.
const topFunctions = 10

// Lag is how long tracepoint events wait before they are assigned a boot
// phase, so that a mark the VMM sets while handling an exit (the userspace
// marker) is known first. The VMM handles an exit within microseconds; the
// events wait in memory (about Lag x exit rate of them).
const Lag = 50 * time.Millisecond

// MonotonicNS reads CLOCK_MONOTONIC, the clock of the tracepoint samples.
func MonotonicNS() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return uint64(ts.Nano())
}

// Profile is one VM's optional profile sources. What cannot be opened is
// recorded with its reason and reported, never fatal.
type Profile struct {
	cfg       Config
	log       *slog.Logger
	statsErr  error
	vmStats   *kvmstat.File
	cpuStats  []*kvmstat.File
	before    []*kvmstat.StatsSnapshot // [0] VM, [1+i] vCPU i
	trace     *tracepoint.Profiler
	traceErr  error
	bpf       *bpfagg.Counter
	bpfErr    error
	traceStop context.CancelFunc
	traceDone chan struct{}
	started   time.Time
	// userspace and firstNS: from the tracepoints, after Finish.
	userspace *exits.UserspaceStart
	firstNS   uint64
	// light is the sampler of a light profile (nil: exact profile).
	light *sampler
}

// MarkUserspace tells the tracepoint phases that the guest's userspace
// marker arrived now.
func (p *Profile) MarkUserspace() {
	if p != nil && p.light != nil {
		return // no phases in a light profile
	}
	if p != nil && p.trace != nil {
		p.trace.Aggregator().MarkUserspace(MonotonicNS())
	}
	if p != nil && p.bpf != nil {
		p.bpf.MarkUserspace(MonotonicNS())
	}
}

// NoteSMC tells the tracepoint breakdown the SMCCC function of the SMC the
// calling vCPU thread is handling now: KVM has no tracepoint that carries
// an SMC's X0 (tracepoint.DetailSMC).
func (p *Profile) NoteSMC(fid uint32) {
	if p != nil && p.light != nil {
		return // no breakdown in a light profile
	}
	if p != nil && p.trace != nil {
		p.trace.Aggregator().NoteSMC(unix.Gettid(), MonotonicNS(), fid)
	}
	if p != nil && p.bpf != nil {
		if v, ok := p.vcpuOf(unix.Gettid()); ok {
			p.bpf.NoteSMC(v, fid)
		}
	}
}

// FirstUserExit is the CLOCK_MONOTONIC time of the first exit from a guest
// user address, after Finish (false when none was seen or without
// tracepoints).
func (p *Profile) FirstUserExit() (uint64, bool) {
	if p == nil || p.userspace == nil || p.userspace.FirstUserExitNS < 0 {
		return 0, false
	}
	return p.firstNS + uint64(p.userspace.FirstUserExitNS), true
}

// Open opens the KVM stats files and the tracepoint readers (those in
// cfg.Sources; all when empty): the BPF counters or the perf rings, as
// source.Plan decides.
func Open(cfg Config) *Profile {
	p := &Profile{cfg: cfg, log: cfg.Logger}
	if p.log == nil {
		p.log = slog.Default()
	}
	errNotAsked := errors.New("not requested (--profile-sources)")
	if !source.Wants(cfg.Sources, exits.SourceKVMStats) {
		p.statsErr = errNotAsked
	} else if f, err := kvmstat.Open(cfg.VMFd); err != nil {
		p.statsErr = fmt.Errorf("KVM_GET_STATS_FD: %w (needs Linux 5.14+)", err)
	} else {
		p.vmStats = f
		for i, fd := range cfg.VCPUFds {
			cf, err := kvmstat.Open(fd)
			if err != nil {
				p.statsErr = fmt.Errorf("KVM_GET_STATS_FD on vCPU %d: %w", i, err)
				break
			}
			p.cpuStats = append(p.cpuStats, cf)
		}
	}
	if cfg.Light {
		if !source.Wants(cfg.Sources, exits.SourceTracepoint) {
			p.traceErr = errNotAsked
		} else {
			p.openLight()
		}
		return p
	}
	plan := source.Plan{Via: cfg.Via, NeedPCs: cfg.Symbols != nil}
	if !source.Wants(cfg.Sources, exits.SourceTracepoint) {
		plan.NotAsked = errNotAsked
	}
	try, bpfErr := plan.TryBPF()
	if try {
		p.bpf, bpfErr = source.OpenBPF(bpfagg.Config{TGID: os.Getpid(), Layout: cfg.Layout, NoBreakdown: cfg.NoBreakdown, TIDs: cfg.TIDs}, p.log)
	}
	choice := plan.Decide(bpfErr)
	p.bpfErr, p.traceErr = choice.BPFErr, choice.Err
	if !choice.Perf {
		return p
	}
	tp, err := tracepoint.New(tracepoint.Config{Logger: p.log, NoBreakdown: cfg.NoBreakdown, Layout: cfg.Layout,
		Options: tracepoint.Options{Now: MonotonicNS, Lag: uint64(Lag)}})
	if err != nil {
		p.traceErr = err
		return p
	}
	for i, tid := range cfg.TIDs {
		if err := tp.Attach(i, tid); err != nil {
			tp.Close()
			p.traceErr = err
			return p
		}
	}
	p.trace = tp
	return p
}

// vcpuOf maps a vCPU thread to its vCPU.
func (p *Profile) vcpuOf(tid int) (int, bool) {
	i := slices.Index(p.cfg.TIDs, tid)
	return i, i >= 0
}

// BPF is the BPF counter in use (nil: none), for the metrics collector.
func (p *Profile) BPF() *bpfagg.Counter {
	if p == nil {
		return nil
	}
	return p.bpf
}

// VCPUOf maps a vCPU thread id to its vCPU index (for BPF snapshots).
func (p *Profile) VCPUOf(tid int) (int, bool) { return p.vcpuOf(tid) }

// LiveTrace is a live tracepoint aggregate: Snapshot reads it now.
type LiveTrace interface {
	Snapshot() []exits.VCPUStats
}

// Trace is the live tracepoint aggregate (nil without tracepoints), for
// the metrics collector: the perf rings' aggregator, or the BPF maps read
// at each call.
func (p *Profile) Trace() LiveTrace {
	switch {
	case p == nil || p.light != nil:
		return nil
	case p.bpf != nil:
		return bpfagg.Live{Counter: p.bpf, VCPUOf: p.vcpuOf, Logger: p.log}
	case p.trace != nil:
		return p.trace.Aggregator()
	}
	return nil
}

// Start takes the "before" stats and starts draining tracepoints. Only the
// first call counts.
func (p *Profile) Start() {
	if p == nil || !p.started.IsZero() {
		return
	}
	p.started = time.Now()
	if p.statsErr == nil && p.vmStats != nil {
		p.before = p.snapshotStats()
		if p.before == nil {
			p.statsErr = errors.New("reading the KVM stats fds failed")
		}
	}
	if p.light != nil {
		p.startLight()
	}
	if p.trace != nil {
		ctx, cancel := context.WithCancel(context.Background())
		p.traceStop, p.traceDone = cancel, make(chan struct{})
		go func() {
			defer close(p.traceDone)
			if err := p.trace.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				p.log.Warn("tracepoint profiler stopped", "err", err)
			}
		}()
	}
}

func (p *Profile) snapshotStats() []*kvmstat.StatsSnapshot {
	out := make([]*kvmstat.StatsSnapshot, 0, 1+len(p.cpuStats))
	for _, f := range append([]*kvmstat.File{p.vmStats}, p.cpuStats...) {
		s, err := f.Snapshot()
		if err != nil {
			p.log.Warn("read KVM stats", "err", err)
			return nil
		}
		out = append(out, s)
	}
	return out
}

// LiveStats returns fresh stats of the VM and each vCPU (the metrics
// callback); nothing without the stats source.
func (p *Profile) LiveStats() ([]kvmstat.Labeled, error) {
	if p == nil || p.vmStats == nil || p.statsErr != nil {
		return nil, nil
	}
	snaps := p.snapshotStats()
	if snaps == nil {
		return nil, errors.New("reading the KVM stats fds failed")
	}
	out := []kvmstat.Labeled{{VCPU: exits.VMVCPU, Snapshot: snaps[0]}}
	for i, s := range snaps[1:] {
		out = append(out, kvmstat.Labeled{VCPU: strconv.Itoa(i), Snapshot: s})
	}
	return out, nil
}

// Finish stops the tracepoint reader and builds the report from the
// sources and the userspace recorders' snapshots. Call it after every vCPU
// has stopped.
func (p *Profile) Finish(snaps []userspace.RecorderSnapshot) *exits.Report {
	rep := &exits.Report{}
	if !p.started.IsZero() {
		rep.DurationNS = uint64(time.Since(p.started))
	}
	userspace.AddTo(rep, snaps)
	p.addStats(rep)
	if p.light != nil {
		p.finishLight(rep)
		return rep
	}
	if p.bpf != nil {
		p.addBPF(rep, snaps)
		return rep
	}
	if p.trace == nil {
		err := p.traceErr
		if p.bpfErr != nil && p.cfg.Via != source.ViaBPF && err != nil {
			err = fmt.Errorf("%w; BPF: %v", err, p.bpfErr)
		}
		rep.SetSource(exits.SourceTracepoint, "", err)
		return rep
	}
	if p.traceStop != nil {
		p.traceStop()
		<-p.traceDone
	}
	// Run drains a last time when stopped, but not when it failed early;
	// an extra drain of empty rings costs nothing.
	p.trace.Drain()
	p.trace.Flush()
	entries, exitN, _ := p.trace.Counts()
	if entries == 0 && exitN == 0 && anyExits(snaps) {
		// The kernel fired no kvm_exit for this VM (some KVM backends
		// never do): say so rather than print nothing.
		rep.SetSource(exits.SourceTracepoint, "", errors.New("the kernel emitted no kvm:kvm_exit events for this VM"))
	} else {
		d := p.trace.Aggregator().Details()
		rep.AddTrace(p.trace.Namer(), p.trace.Aggregator().Snapshot(), d)
		if det := p.trace.Details(); len(det) > 0 {
			rep.SetSource(exits.SourceTracepoint, "kvm:kvm_entry and kvm:kvm_exit samples of every vCPU thread (perf_event_open); breakdown from "+strings.Join(det, ", ")+p.whyNotBPF(), nil)
		} else {
			rep.SetSource(exits.SourceTracepoint, "kvm:kvm_entry and kvm:kvm_exit samples of every vCPU thread (perf_event_open)"+p.whyNotBPF(), nil)
		}
		p.userspace = d.Userspace
		p.firstNS = d.FirstNS
		if !p.cfg.NoBreakdown && p.trace.Namer().Arch() == "arm64" {
			rep.GuestCode = p.guestCode(d)
		}
	}
	return rep
}

// whyNotBPF says why the perf rings are read, for the Sources list.
func (p *Profile) whyNotBPF() string {
	if p.cfg.Via == source.ViaPerf {
		return "; BPF not used: --profile-via perf"
	}
	if p.bpfErr != nil {
		return "; BPF not used: " + p.bpfErr.Error()
	}
	return ""
}

// addBPF adds the BPF counters' rows and percentiles to rep.
func (p *Profile) addBPF(rep *exits.Report, snaps []userspace.RecorderSnapshot) {
	snap, err := p.bpf.Snapshot(p.vcpuOf)
	if err != nil {
		rep.SetSource(exits.SourceTracepoint, "", err)
		return
	}
	if exits.Total(snap.VCPUs).Exits() == 0 && anyExits(snaps) {
		rep.SetSource(exits.SourceTracepoint, "", errors.New("the kernel emitted no kvm:kvm_exit events for this VM"))
		return
	}
	rep.AddTrace(p.bpf.Namer(), snap.VCPUs, snap.Details)
	if snap.Details != nil {
		p.userspace, p.firstNS = snap.Details.Userspace, snap.Details.FirstNS
	}
	how := p.bpf.Describe()
	if snap.HistDropped > 0 {
		how += fmt.Sprintf("; %d samples missing from the histograms (map full)", snap.HistDropped)
	}
	if !p.cfg.NoBreakdown {
		how += "; " + bpfMissing
	}
	rep.SetSource(exits.SourceTracepoint, how, nil)
}

func (p *Profile) addStats(rep *exits.Report) {
	if p.statsErr != nil || p.before == nil {
		err := p.statsErr
		if err == nil {
			err = errors.New("not read")
		}
		rep.SetSource(exits.SourceKVMStats, "", err)
		return
	}
	after := p.snapshotStats()
	if after == nil {
		rep.SetSource(exits.SourceKVMStats, "", errors.New("reading the KVM stats fds at the end failed"))
		return
	}
	files := make([]source.Stats, len(after))
	for i := range after {
		files[i] = source.Stats{VCPU: exits.VMVCPU, Before: p.before[i], After: after[i]}
		if i > 0 {
			files[i].VCPU = strconv.Itoa(i - 1)
		}
	}
	_ = source.AddStats(rep, files) // a failure marks the source
}

func anyExits(snaps []userspace.RecorderSnapshot) bool {
	for _, s := range snaps {
		for _, k := range s.Keys {
			if k.Count > 0 {
				return true
			}
		}
	}
	return false
}

// Close releases the stats files and the tracepoint session.
func (p *Profile) Close() {
	if p == nil {
		return
	}
	if p.light != nil && p.traceStop != nil {
		// A run that ends without Finish (a failed start) still has its
		// windows going: stop them before the programs are closed.
		p.traceStop()
		<-p.traceDone
	}
	if p.trace != nil {
		p.trace.Close()
	}
	if p.bpf != nil {
		p.bpf.Close()
	}
	for _, f := range append([]*kvmstat.File{p.vmStats}, p.cpuStats...) {
		if f != nil {
			f.Close()
		}
	}
}

// guestCode names the functions the exits came from.
func (p *Profile) guestCode(d *exits.TraceDetails) *exits.GuestCode {
	g := &exits.GuestCode{}
	tab := p.cfg.Symbols
	var off uint64
	if tab != nil {
		g.Symbols = p.cfg.SymbolsFile
		var vbar uint64
		if p.cfg.VBAR != nil {
			vbar = p.cfg.VBAR()
		}
		o, err := tab.KASLROffset(vbar)
		if err != nil {
			g.Note = "KASLR offset unknown, addresses taken as they are in the file: " + err.Error()
		} else {
			off = o
			g.KASLROffset = fmt.Sprintf("%#x", off)
			g.KASLRFrom = fmt.Sprintf("VBAR_EL1 %#x - vectors", vbar)
			if int64(off) < 0 {
				g.KASLROffset = fmt.Sprintf("-%#x", -off)
			}
		}
	}
	g.Reasons = symbols.GuestCode(d.PCs, d.PCsOther, tab, off, topFunctions)
	return g
}
