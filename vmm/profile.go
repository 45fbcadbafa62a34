//go:build linux

package vmm

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/mvm-dev/mvm/devices"
	"github.com/mvm-dev/mvm/exits"
	"github.com/mvm-dev/mvm/exits/kvmstat"
	"github.com/mvm-dev/mvm/exits/profile"
	"github.com/mvm-dev/mvm/exits/userspace"
	"github.com/mvm-dev/mvm/internal/kvm"
	"github.com/mvm-dev/mvm/psci"
)

// vmProfile is the VM's exit accounting. Userspace exits are always
// counted (it is cheap and feeds the metrics) under keys that name mvm's
// devices, PSCI functions and system events; with Config.Profile the other
// sources (package exits/profile) run too and the run ends with an
// exits.Report.
type vmProfile struct {
	log    *slog.Logger
	schema *userspace.Schema
	rec    []*userspace.Recorder

	// Keys, registered before the recorders exist so Record never
	// allocates or looks up strings on the hot path.
	devKey   []userspace.Key // MMIO by device index on the bus
	unmapped userspace.Key
	psciKey  map[uint32]userspace.Key // hypercalls by function ID
	otherHVC userspace.Key
	sysKey   map[uint32]userspace.Key // system events by type

	// sources is nil unless profiling was asked for.
	sources *profile.Profile
}

// newProfile registers the exit keys and makes one recorder per vCPU;
// deviceNames are the bus's devices in Devices() order.
func newProfile(log *slog.Logger, ncpu int, deviceNames []string) (*vmProfile, error) {
	p := &vmProfile{
		log: log, schema: userspace.NewSchema(),
		psciKey: map[uint32]userspace.Key{},
		sysKey:  map[uint32]userspace.Key{},
	}
	var regErr error
	reg := func(k userspace.Kind, sub string) userspace.Key {
		key, err := p.schema.Register(k, sub)
		if err != nil && regErr == nil {
			regErr = fmt.Errorf("register exit key %v/%s: %w", k, sub, err)
		}
		return key
	}
	for _, n := range deviceNames {
		p.devKey = append(p.devKey, reg(userspace.KindMMIO, n))
	}
	p.unmapped = reg(userspace.KindMMIO, "unmapped")
	for _, r := range psci.FilterRanges() {
		for fid := r.Base; fid < r.Base+r.Count; fid++ {
			p.psciKey[fid] = reg(userspace.KindHypercall, psci.Name(fid))
		}
	}
	p.otherHVC = reg(userspace.KindHypercall, "other")
	for _, t := range []uint32{kvm.SystemEventShutdown, kvm.SystemEventReset, kvm.SystemEventCrash, kvm.SystemEventWakeup, kvm.SystemEventSuspend} {
		p.sysKey[t] = reg(userspace.KindSystemEvent, userspace.SystemEventName(t))
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
func (p *vmProfile) record(id int, reason uint32, sub int, d time.Duration) {
	key := userspace.Key(sub)
	if sub < 0 {
		key = userspace.KindKey(userspace.KindOf(reason))
	}
	p.rec[id].Record(key, d)
}

func (p *vmProfile) mmioKey(dev int) int {
	if dev >= 0 && dev < len(p.devKey) {
		return int(p.devKey[dev])
	}
	return int(p.unmapped)
}

func (p *vmProfile) hypercallKey(fid uint32) int {
	if k, ok := p.psciKey[fid]; ok {
		return int(k)
	}
	return int(p.otherHVC)
}

func (p *vmProfile) systemEventKey(typ uint32) int {
	if k, ok := p.sysKey[typ]; ok {
		return int(k)
	}
	return -1
}

// enable opens the profile's other sources (those in sources; all when
// empty); what cannot be opened is reported with its reason, never fatal.
func (p *vmProfile) enable(cfg profile.Config) {
	cfg.Logger = p.log
	p.sources = profile.Open(cfg)
}

// profileLayout names the guest-physical ranges for the DABT_LOW/IABT_LOW
// breakdown: the in-kernel vGIC's distributor and redistributors, mvm's
// own devices, RAM (stage-2 faults); anything else is "unmapped".
func profileLayout(ncpu int, bus []devices.Range, ram []Region) exits.Layout {
	l := exits.Layout{VCPUs: ncpu, Regions: []exits.Region{
		{Name: "gicd", Base: GICDistBase, Size: GICDistSize},
		{Name: "gicr", Base: GICRedistBase, Size: uint64(ncpu) * GICRedistSize},
	}}
	for _, r := range bus {
		l.Regions = append(l.Regions, exits.Region{Name: r.Name, Base: r.Base, Size: r.Size})
	}
	for _, r := range ram {
		l.Regions = append(l.Regions, exits.Region{Name: "ram", Base: r.Base, Size: r.Size})
		l.RAM = append(l.RAM, exits.Region{Name: "ram", Base: r.Base, Size: r.Size})
	}
	return l
}

// markUserspace passes the guest's userspace marker to the tracepoint
// phases.
func (p *vmProfile) markUserspace() { p.sources.MarkUserspace() }

// noteSMC names the function of a forwarded SMC for the tracepoint
// breakdown of SMC64, which KVM's own events cannot give.
func (p *vmProfile) noteSMC(fid uint32) { p.sources.NoteSMC(fid) }

// firstUserExit is when the first exit from a guest user address happened
// (tracepoints only), for kernel_to_user without a marker.
func (p *vmProfile) firstUserExit() (uint64, bool) { return p.sources.FirstUserExit() }

// start takes the "before" numbers of the other sources.
func (p *vmProfile) start() { p.sources.Start() }

// trace is the live tracepoint aggregate, nil without tracepoints.
func (p *vmProfile) trace() profile.LiveTrace { return p.sources.Trace() }

// liveStats is the metrics callback: fresh stats of the VM and each vCPU.
func (p *vmProfile) liveStats() ([]kvmstat.Labeled, error) { return p.sources.LiveStats() }

// finish stops the sources and builds the report (nil when profiling is
// off). Call it after every vCPU loop has stopped.
func (p *vmProfile) finish() *exits.Report {
	for _, r := range p.rec {
		r.SetState(userspace.StateStopped)
	}
	if p.sources == nil {
		return nil
	}
	snaps := make([]userspace.RecorderSnapshot, len(p.rec))
	for i, r := range p.rec {
		snaps[i] = r.Snapshot()
	}
	return p.sources.Finish(snaps)
}

// close releases the sources' file descriptors.
func (p *vmProfile) close() {
	if p != nil {
		p.sources.Close()
	}
}
