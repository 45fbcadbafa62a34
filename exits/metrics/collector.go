// Package metrics exports mvm's exit numbers as Prometheus metrics: a
// collector that reads the userspace recorders, the tracepoint aggregate
// and fresh KVM stats at scrape time, and the /metrics handler, which
// serves them through Prometheus' client library (expose.go).
package metrics

import (
	"math"
	"slices"
	"strconv"
	"sync"

	"github.com/mvm-dev/mvm/exits"
	"github.com/mvm-dev/mvm/exits/kvmstat"
	"github.com/mvm-dev/mvm/exits/userspace"
)

// CollectorConfig says where a Collector reads its numbers. Every field is
// optional; nothing is read before a scrape.
type CollectorConfig struct {
	// Recorders are the vCPUs' userspace exit recorders.
	Recorders []*userspace.Recorder
	// Trace is the tracepoint aggregate, when tracepoints are in use.
	Trace TraceSource
	// KVMStats returns fresh KVM stats snapshots; it is called once per
	// scrape. Its families are a StatsCollector's (see NewStatsCollector),
	// whose metric names depend on the kernel's descriptors.
	KVMStats func() ([]kvmstat.Labeled, error)
}

// Collector is a Source over exit numbers. It reads the recorders, the
// tracepoint aggregate and the stats callback at scrape time, so it needs
// no goroutine of its own:
//
//	mvm_exits_total{vcpu,source,reason}       counter
//	mvm_exit_handle_seconds{vcpu,reason}      histogram (userspace exits)
//	mvm_psci_calls_total{function}            counter (hypercall sub-keys)
//	mvm_exit_breakdown_total{reason,key}      counter (tracepoints, all vCPUs; the
//	                                          top BreakdownTop keys per reason, the
//	                                          rest as key="other")
//	mvm_vcpu_state{vcpu,state}                gauge, 1 for the current state
//
// and, when CollectorConfig.KVMStats is set, the KVM stats as a
// StatsCollector exports them, one family per stat.
type Collector struct {
	mu  sync.Mutex
	cfg CollectorConfig
}

// The Collector's families' help texts.
const (
	exitsHelp     = "VM exits by vCPU, source (userspace: KVM_RUN returns; tracepoint: kvm:kvm_exit) and reason."
	handleHelp    = "Time the VMM spent handling userspace exits, from KVM_RUN's return to the next KVM_RUN (log2 buckets)."
	psciHelp      = "PSCI/SMCCC calls forwarded to the VMM, by function, over all vCPUs."
	breakdownHelp = "VM exits of all vCPUs below the exception class (kvm tracepoints): SYS64 by system register, DABT_LOW/IABT_LOW by device, HVC64/SMC64 by function, WFx by WFI/WFE; the top keys per reason, the rest as key=\"other\"."
	stateHelp     = "1 for the state the vCPU is in, 0 for the others."
)

// NewCollector returns a collector reading from cfg.
func NewCollector(cfg CollectorConfig) *Collector {
	return &Collector{cfg: cfg}
}

// AddRecorder adds a vCPU's recorder (for vCPUs created after the collector).
func (c *Collector) AddRecorder(r *userspace.Recorder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cfg.Recorders = append(c.cfg.Recorders, r)
}

// TraceSource is a live tracepoint aggregate: the perf rings'
// *tracepoint.Aggregator, or the BPF counters' maps read at each scrape.
type TraceSource interface {
	Snapshot() []exits.VCPUStats
}

// SetTrace sets the tracepoint aggregate (nil to stop exporting it).
func (c *Collector) SetTrace(a TraceSource) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cfg.Trace = a
}

// Families implements Source.
func (c *Collector) Families() []Family {
	c.mu.Lock()
	cfg := c.cfg
	cfg.Recorders = slices.Clone(cfg.Recorders)
	c.mu.Unlock()

	ex := Family{Name: "mvm_exits_total", Help: exitsHelp, Kind: Counter}
	handle := Family{Name: "mvm_exit_handle_seconds", Help: handleHelp, Kind: Histogram}
	psciFam := Family{Name: "mvm_psci_calls_total", Help: psciHelp, Kind: Counter}
	breakdown := Family{Name: "mvm_exit_breakdown_total", Help: breakdownHelp, Kind: Counter}
	state := Family{Name: "mvm_vcpu_state", Help: stateHelp, Kind: Gauge}

	psci := make(map[string]uint64)
	for _, r := range cfg.Recorders {
		snap := r.Snapshot()
		vcpu := strconv.Itoa(snap.VCPU)
		for _, st := range userspace.VCPUStates() {
			v := 0.0
			if st == snap.State {
				v = 1
			}
			state.Series = append(state.Series, Series{Labels: []Label{{"vcpu", vcpu}, {"state", st.String()}}, Value: v})
		}
		for _, k := range snap.Keys {
			ex.Series = append(ex.Series, Series{Labels: []Label{{"vcpu", vcpu}, {"source", exits.SourceUserspace}, {"reason", k.Name}}, Value: float64(k.Count)})
			handle.Series = append(handle.Series, histogramOf(k, vcpu))
			if k.Kind == userspace.KindHypercall {
				fn := k.Sub
				if fn == "" {
					fn = "unknown"
				}
				psci[fn] += k.Count
			}
		}
	}
	for fn, n := range psci {
		psciFam.Series = append(psciFam.Series, Series{Labels: []Label{{"function", fn}}, Value: float64(n)})
	}

	if cfg.Trace != nil {
		snap := cfg.Trace.Snapshot()
		for _, v := range snap {
			vcpu := strconv.Itoa(v.VCPU)
			for _, s := range v.Reasons {
				ex.Series = append(ex.Series, Series{Labels: []Label{{"vcpu", vcpu}, {"source", exits.SourceTracepoint}, {"reason", s.Reason}}, Value: float64(s.Count)})
			}
		}
		for _, s := range exits.Total(snap).Reasons {
			breakdown.Series = appendBreakdown(breakdown.Series, s)
		}
	}
	fams := []Family{ex, handle, psciFam, breakdown, state}
	if cfg.KVMStats != nil {
		fams = append(fams, NewStatsCollector(cfg.KVMStats).Families()...)
	}
	return fams
}

// BreakdownTop is how many breakdown keys per reason get a series of their
// own; the rest add up in key="other", so a guest touching ever new
// registers or devices cannot grow the label set.
const BreakdownTop = 10

// appendBreakdown adds a reason's breakdown rows (largest first) as top
// keys plus "other". Keys are not stable across scrapes near the cut, but
// every series only grows while it exists.
func appendBreakdown(out []Series, s exits.ReasonStats) []Series {
	var other uint64
	var hasOther bool
	for i, b := range s.Breakdown {
		if i < BreakdownTop && b.Key != "other" {
			out = append(out, Series{Labels: []Label{{"reason", s.Reason}, {"key", b.Key}}, Value: float64(b.Count)})
			continue
		}
		other += b.Count
		hasOther = true
	}
	if hasOther {
		out = append(out, Series{Labels: []Label{{"reason", s.Reason}, {"key", "other"}}, Value: float64(other)})
	}
	return out
}

// histogramOf is a key's log2 buckets as a histogram series: bucket i
// holds durations below 2^i ns, so its inclusive upper bound le is 2^i
// ns; the last, open bucket is the implicit +Inf.
func histogramOf(k userspace.KeyStats, vcpu string) Series {
	s := Series{Labels: []Label{{"vcpu", vcpu}, {"reason", k.Name}}, Sum: float64(k.SumNS) / 1e9}
	s.Buckets = make([]Bucket, userspace.NumBuckets-1)
	var cum uint64
	for i := range s.Buckets {
		cum += k.Buckets[i]
		s.Buckets[i] = Bucket{UpperBound: math.Ldexp(1, i) / 1e9, Count: cum}
	}
	// The count is the buckets' total rather than k.Count so that a scrape
	// racing with Record still exports a consistent histogram.
	s.Count = cum + k.Buckets[userspace.NumBuckets-1]
	return s
}
