package source

import (
	"errors"
	"slices"

	"github.com/mvm-dev/mvm/exits"
	"github.com/mvm-dev/mvm/exits/kvmstat"
)

// Tracepoint paths (Plan.Via).
const (
	// ViaAuto: BPF counters where the kernel allows them, else perf rings.
	ViaAuto = "auto"
	ViaBPF  = "bpf"
	ViaPerf = "perf"
	// ViaBoth: perf rows and BPF rows side by side (mvm profile only, to
	// compare them).
	ViaBoth = "both"
)

// Wants reports whether source name is among sources (empty: all are).
func Wants(sources []string, name string) bool {
	return len(sources) == 0 || slices.Contains(sources, name)
}

// Plan is what a profile asks of the kvm_exit tracepoints.
type Plan struct {
	// Via is the tracepoint path (ViaAuto, ViaBPF, ViaPerf, ViaBoth).
	Via string
	// NotAsked, when set, says the tracepoint source was left out (and
	// by which flag): nothing is read.
	NotAsked error
	// NeedPCs: guest code wants every exit's PC, which only the perf
	// rings keep; with ViaAuto it takes them over BPF.
	NeedPCs bool
}

// via is the tracepoint path, "" read as ViaAuto.
func (p Plan) via() string {
	if p.Via == "" {
		return ViaAuto
	}
	return p.Via
}

// TryBPF reports whether to open the BPF counters; when not, and BPF
// would otherwise have been the choice, why (for the Sources list).
func (p Plan) TryBPF() (bool, error) {
	switch {
	case p.NotAsked != nil || p.via() == ViaPerf:
		return false, nil
	case p.via() != ViaBPF && p.NeedPCs:
		return false, errors.New("--guest-symbols needs the exit PCs of the perf rings")
	}
	return true, nil
}

// MayReadPerf reports whether the perf rings can be part of the choice,
// for a caller that must open them before it knows how BPF fares
// (mvm profile -- CMD opens inherited events before the command runs).
func (p Plan) MayReadPerf() bool { return p.NotAsked == nil && p.via() != ViaBPF }

// Choice is which readers fill the profile.
type Choice struct {
	// BPF and Perf: read the BPF counters, the perf rings.
	BPF, Perf bool
	// Err is why the tracepoint source is not used (neither reader).
	Err error
	// BPFErr is why the BPF counters are not used (nil: they are, or
	// were not wanted).
	BPFErr error
}

// Decide is the choice once BPF was tried (bpfErr: why its counters
// could not be opened; nil when they were) or not (TryBPF false; bpfErr
// is then TryBPF's reason, if any).
func (p Plan) Decide(bpfErr error) Choice {
	if p.NotAsked != nil {
		return Choice{Err: p.NotAsked}
	}
	try, _ := p.TryBPF()
	switch {
	case p.via() == ViaPerf:
		return Choice{Perf: true}
	case !try:
		return Choice{Perf: true, BPFErr: bpfErr}
	case bpfErr != nil && p.via() == ViaBPF:
		return Choice{Err: bpfErr, BPFErr: bpfErr}
	case bpfErr != nil:
		return Choice{Perf: true, BPFErr: bpfErr}
	case p.via() == ViaBoth:
		return Choice{BPF: true, Perf: true}
	}
	return Choice{BPF: true}
}

// Stats is one KVM stats file's baseline and latest snapshot, labeled by
// vCPU ("0", "1", ...; exits.VMVCPU for the VM's own).
type Stats struct {
	VCPU          string
	Before, After *kvmstat.StatsSnapshot
}

// AddStats adds the deltas of the stats files, in the order given, and
// the total over the vCPUs' to rep as the KVM stats source's rows, or
// marks the source failed with the first delta that cannot be taken.
func AddStats(rep *exits.Report, files []Stats) error {
	var rows, cpuRows []exits.StatRow
	for _, f := range files {
		d, err := kvmstat.Delta(f.Before, f.After)
		if err != nil {
			rep.SetSource(exits.SourceKVMStats, "", err)
			return err
		}
		if f.VCPU != exits.VMVCPU {
			cpuRows = append(cpuRows, kvmstat.Rows(f.VCPU, d)...)
		}
		rows = append(rows, kvmstat.Rows(f.VCPU, d)...)
	}
	kvmstat.AddTo(rep, append(rows, kvmstat.TotalRows(cpuRows)...))
	return nil
}
