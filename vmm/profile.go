//go:build linux

package vmm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/mvm-dev/mvm/exits"
	"github.com/mvm-dev/mvm/internal/kvm"
	"github.com/mvm-dev/mvm/internal/kvmstat"
	"github.com/mvm-dev/mvm/internal/tracepoint"
	"github.com/mvm-dev/mvm/psci"
)

// profile is the VM's exit accounting. Userspace exits are always counted
// (it is cheap and feeds the metrics); with Config.Profile the KVM stats fd
// and the kvm_entry/kvm_exit tracepoints are read too, and the run ends
// with an exits.Report.
type profile struct {
	log    *slog.Logger
	schema *exits.Schema
	rec    []*exits.Recorder

	// Keys, registered before the recorders exist so Record never
	// allocates or looks up strings on the hot path.
	devKey   []exits.Key // MMIO by device index on the bus
	unmapped exits.Key
	psciKey  map[uint32]exits.Key // hypercalls by function ID
	otherHVC exits.Key
	sysKey   map[uint32]exits.Key // system events by type

	enabled   bool
	statsErr  error
	vmStats   *kvmstat.File
	cpuStats  []*kvmstat.File
	before    []*exits.StatsSnapshot // [0] VM, [1+i] vCPU i
	trace     *tracepoint.Profiler
	traceErr  error
	traceStop context.CancelFunc
	traceDone chan struct{}
	started   time.Time
}

// newProfile registers the exit keys and makes one recorder per vCPU;
// deviceNames are the bus's devices in Devices() order.
func newProfile(log *slog.Logger, ncpu int, deviceNames []string) (*profile, error) {
	p := &profile{
		log: log, schema: exits.NewSchema(),
		psciKey: map[uint32]exits.Key{},
		sysKey:  map[uint32]exits.Key{},
	}
	var regErr error
	reg := func(k exits.Kind, sub string) exits.Key {
		key, err := p.schema.Register(k, sub)
		if err != nil && regErr == nil {
			regErr = fmt.Errorf("register exit key %v/%s: %w", k, sub, err)
		}
		return key
	}
	for _, n := range deviceNames {
		p.devKey = append(p.devKey, reg(exits.KindMMIO, n))
	}
	p.unmapped = reg(exits.KindMMIO, "unmapped")
	for _, r := range psci.FilterRanges() {
		for fid := r.Base; fid < r.Base+r.Count; fid++ {
			p.psciKey[fid] = reg(exits.KindHypercall, psci.Name(fid))
		}
	}
	p.otherHVC = reg(exits.KindHypercall, "other")
	for _, t := range []uint32{kvm.SystemEventShutdown, kvm.SystemEventReset, kvm.SystemEventCrash, kvm.SystemEventWakeup, kvm.SystemEventSuspend} {
		p.sysKey[t] = reg(exits.KindSystemEvent, exits.SystemEventName(t))
	}
	if regErr != nil {
		return nil, regErr
	}
	for i := 0; i < ncpu; i++ {
		p.rec = append(p.rec, p.schema.NewRecorder(i))
	}
	return p, nil
}

// record accounts one exit of vCPU id.
// sub is the key the handler set, or -1 for exits without a sub-reason
// (EINTR, failed entry, internal error, ...), which count under their
// kind's bare key.
func (p *profile) record(id int, reason uint32, sub int, d time.Duration) {
	key := exits.Key(sub)
	if sub < 0 {
		key = exits.KindKey(exits.KindOf(reason))
	}
	p.rec[id].Record(key, d)
}

func (p *profile) mmioKey(dev int) int {
	if dev >= 0 && dev < len(p.devKey) {
		return int(p.devKey[dev])
	}
	return int(p.unmapped)
}

func (p *profile) hypercallKey(fid uint32) int {
	if k, ok := p.psciKey[fid]; ok {
		return int(k)
	}
	return int(p.otherHVC)
}

func (p *profile) systemEventKey(typ uint32) int {
	if k, ok := p.sysKey[typ]; ok {
		return int(k)
	}
	return -1
}

// enable opens the KVM stats fds and the tracepoint profiler (those of
// them in sources; all when empty); what cannot be opened is recorded with
// its reason, never fatal.
func (p *profile) enable(vmFd uintptr, vcpuFds []uintptr, tids []int, sources []string) {
	p.enabled = true
	want := func(name string) bool { return len(sources) == 0 || slices.Contains(sources, name) }
	errNotAsked := errors.New("not requested (--profile-sources)")
	if !want(exits.SourceKVMStats) {
		p.statsErr = errNotAsked
	} else if f, err := kvmstat.Open(vmFd); err != nil {
		p.statsErr = fmt.Errorf("KVM_GET_STATS_FD: %w (needs Linux 5.14+)", err)
	} else {
		p.vmStats = f
		for i, fd := range vcpuFds {
			cf, err := kvmstat.Open(fd)
			if err != nil {
				p.statsErr = fmt.Errorf("KVM_GET_STATS_FD on vCPU %d: %w", i, err)
				break
			}
			p.cpuStats = append(p.cpuStats, cf)
		}
	}
	if !want(exits.SourceTracepoint) {
		p.traceErr = errNotAsked
		return
	}
	tp, err := tracepoint.New(tracepoint.Config{Logger: p.log})
	if err != nil {
		p.traceErr = err
		return
	}
	for i, tid := range tids {
		if err := tp.Attach(i, tid); err != nil {
			tp.Close()
			p.traceErr = err
			return
		}
	}
	p.trace = tp
}

// start takes the "before" stats and starts draining tracepoints.
func (p *profile) start() {
	if !p.enabled || !p.started.IsZero() {
		return
	}
	p.started = time.Now()
	if p.statsErr == nil && p.vmStats != nil {
		p.before = p.snapshotStats()
		if p.before == nil {
			p.statsErr = errors.New("reading the KVM stats fds failed")
		}
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

func (p *profile) snapshotStats() []*exits.StatsSnapshot {
	out := make([]*exits.StatsSnapshot, 0, 1+len(p.cpuStats))
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

// liveStats is the metrics callback: fresh stats of the VM and each vCPU.
func (p *profile) liveStats() ([]exits.LabeledStats, error) {
	if p.vmStats == nil || p.statsErr != nil {
		return nil, nil
	}
	snaps := p.snapshotStats()
	if snaps == nil {
		return nil, errors.New("reading the KVM stats fds failed")
	}
	out := []exits.LabeledStats{{VCPU: exits.VMVCPU, Snapshot: snaps[0]}}
	for i, s := range snaps[1:] {
		out = append(out, exits.LabeledStats{VCPU: strconv.Itoa(i), Snapshot: s})
	}
	return out, nil
}

// finish stops the tracepoint reader and builds the report (nil when
// profiling is off). Call it after every vCPU loop has stopped.
func (p *profile) finish() *exits.Report {
	for _, r := range p.rec {
		r.SetState(exits.StateStopped)
	}
	if !p.enabled {
		return nil
	}
	rep := &exits.Report{}
	if !p.started.IsZero() {
		rep.DurationNS = uint64(time.Since(p.started))
	}
	snaps := make([]exits.RecorderSnapshot, len(p.rec))
	for i, r := range p.rec {
		snaps[i] = r.Snapshot()
	}
	rep.AddUserspace(snaps)

	if p.statsErr == nil && p.before != nil {
		after := p.snapshotStats()
		if after == nil {
			rep.SetSource(exits.SourceKVMStats, "", errors.New("reading the KVM stats fds at the end failed"))
		} else {
			var rows []exits.StatRow
			var cpuRows []exits.StatRow
			for i := range after {
				d, err := exits.Delta(p.before[i], after[i])
				if err != nil {
					rep.SetSource(exits.SourceKVMStats, "", err)
					rows = nil
					break
				}
				label := exits.VMVCPU
				if i > 0 {
					label = strconv.Itoa(i - 1)
					cpuRows = append(cpuRows, exits.StatRows(label, d)...)
				}
				rows = append(rows, exits.StatRows(label, d)...)
			}
			if rows != nil {
				rep.AddKVMStats(append(rows, exits.TotalStatRows(cpuRows)...))
			}
		}
	} else {
		err := p.statsErr
		if err == nil {
			err = errors.New("not read")
		}
		rep.SetSource(exits.SourceKVMStats, "", err)
	}

	if p.trace != nil {
		if p.traceStop != nil {
			p.traceStop()
			<-p.traceDone
		}
		// Run drains a last time when stopped, but not when it failed
		// early; an extra drain of empty rings costs nothing.
		p.trace.Drain()
		entries, exitN, _ := p.trace.Counts()
		snap := p.trace.Aggregator().Snapshot()
		if entries == 0 && exitN == 0 && p.anyExits() {
			// The kernel fired no kvm_exit for this VM (some KVM
			// backends never do): say so rather than print nothing.
			rep.SetSource(exits.SourceTracepoint, "", errors.New("the kernel emitted no kvm:kvm_exit events for this VM"))
		} else {
			rep.AddTracepoint(p.trace.Namer(), snap)
		}
	} else {
		rep.SetSource(exits.SourceTracepoint, "", p.traceErr)
	}
	return rep
}

func (p *profile) anyExits() bool {
	for _, r := range p.rec {
		for _, k := range r.Snapshot().Keys {
			if k.Count > 0 {
				return true
			}
		}
	}
	return false
}

// close releases the stats fds and the tracepoint session.
func (p *profile) close() {
	if p == nil {
		return
	}
	if p.trace != nil {
		p.trace.Close()
	}
	for _, f := range append([]*kvmstat.File{p.vmStats}, p.cpuStats...) {
		if f != nil {
			f.Close()
		}
	}
}
