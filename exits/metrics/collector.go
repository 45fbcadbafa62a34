// Package metrics exports mvm's exit numbers as Prometheus metrics: a
// collector that reads the userspace recorders, the tracepoint aggregate
// and fresh KVM stats at scrape time.
package metrics

import (
	"math"
	"slices"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mvm-dev/mvm/exits"
	"github.com/mvm-dev/mvm/exits/kvmstat"
	"github.com/mvm-dev/mvm/exits/tracepoint"
	"github.com/mvm-dev/mvm/exits/userspace"
)

// CollectorConfig says where a Collector reads its numbers. Every field is
// optional; nothing is read before a scrape.
type CollectorConfig struct {
	// Recorders are the vCPUs' userspace exit recorders.
	Recorders []*userspace.Recorder
	// Trace is the tracepoint aggregate, when tracepoints are in use.
	Trace *tracepoint.Aggregator
	// KVMStats returns fresh KVM stats snapshots; it is called once per
	// scrape. Its metrics come from the StatsCollector (see
	// NewStatsCollector), whose metric names depend on the kernel's
	// descriptors.
	KVMStats func() ([]kvmstat.Labeled, error)
}

// Collector is a prometheus.Collector over exit numbers. It reads the
// recorders, the tracepoint aggregate and the stats callback at scrape
// time, so it needs no goroutine of its own:
//
//	mvm_exits_total{vcpu,source,reason}       counter
//	mvm_exit_handle_seconds{vcpu,reason}      histogram (userspace exits)
//	mvm_psci_calls_total{function}            counter (hypercall sub-keys)
//	mvm_exit_breakdown_total{reason,key}      counter (tracepoints, all vCPUs; the
//	                                          top BreakdownTop keys per reason, the
//	                                          rest as key="other")
//	mvm_vcpu_state{vcpu,state}                gauge, 1 for the current state
//
// The KVM stats are exported by StatsCollector, one family per stat.
type Collector struct {
	mu  sync.Mutex
	cfg CollectorConfig

	exits, handle, psci, breakdown, state *prometheus.Desc
}

// NewCollector returns a collector reading from cfg.
func NewCollector(cfg CollectorConfig) *Collector {
	return &Collector{
		cfg: cfg,
		exits: prometheus.NewDesc("mvm_exits_total",
			"VM exits by vCPU, source (userspace: KVM_RUN returns; tracepoint: kvm:kvm_exit) and reason.",
			[]string{"vcpu", "source", "reason"}, nil),
		handle: prometheus.NewDesc("mvm_exit_handle_seconds",
			"Time the VMM spent handling userspace exits, from KVM_RUN's return to the next KVM_RUN (log2 buckets).",
			[]string{"vcpu", "reason"}, nil),
		psci: prometheus.NewDesc("mvm_psci_calls_total",
			"PSCI/SMCCC calls forwarded to the VMM, by function, over all vCPUs.",
			[]string{"function"}, nil),
		breakdown: prometheus.NewDesc("mvm_exit_breakdown_total",
			"VM exits of all vCPUs below the exception class (kvm tracepoints): SYS64 by system register, DABT_LOW/IABT_LOW by device, HVC64/SMC64 by function, WFx by WFI/WFE; the top keys per reason, the rest as key=\"other\".",
			[]string{"reason", "key"}, nil),
		state: prometheus.NewDesc("mvm_vcpu_state",
			"1 for the state the vCPU is in, 0 for the others.",
			[]string{"vcpu", "state"}, nil),
	}
}

// AddRecorder adds a vCPU's recorder (for vCPUs created after the collector).
func (c *Collector) AddRecorder(r *userspace.Recorder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cfg.Recorders = append(c.cfg.Recorders, r)
}

// SetTrace sets the tracepoint aggregate (nil to stop exporting it).
func (c *Collector) SetTrace(a *tracepoint.Aggregator) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cfg.Trace = a
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.exits, c.handle, c.psci, c.breakdown, c.state} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	cfg := c.cfg
	cfg.Recorders = slices.Clone(cfg.Recorders)
	c.mu.Unlock()

	psci := make(map[string]uint64)
	for _, r := range cfg.Recorders {
		snap := r.Snapshot()
		vcpu := strconv.Itoa(snap.VCPU)
		for _, st := range userspace.VCPUStates() {
			v := 0.0
			if st == snap.State {
				v = 1
			}
			c.send(ch, c.state, prometheus.GaugeValue, v, vcpu, st.String())
		}
		for _, k := range snap.Keys {
			c.send(ch, c.exits, prometheus.CounterValue, float64(k.Count), vcpu, exits.SourceUserspace, k.Name)
			c.sendHistogram(ch, k, vcpu)
			if k.Kind == userspace.KindHypercall {
				fn := k.Sub
				if fn == "" {
					fn = "unknown"
				}
				psci[fn] += k.Count
			}
		}
	}
	fns := make([]string, 0, len(psci))
	for fn := range psci {
		fns = append(fns, fn)
	}
	slices.Sort(fns)
	for _, fn := range fns {
		c.send(ch, c.psci, prometheus.CounterValue, float64(psci[fn]), fn)
	}

	if cfg.Trace != nil {
		snap := cfg.Trace.Snapshot()
		for _, v := range snap {
			vcpu := strconv.Itoa(v.VCPU)
			for _, s := range v.Reasons {
				c.send(ch, c.exits, prometheus.CounterValue, float64(s.Count), vcpu, exits.SourceTracepoint, s.Reason)
			}
		}
		for _, s := range tracepoint.Total(snap).Reasons {
			c.sendBreakdown(ch, s)
		}
	}
}

// BreakdownTop is how many breakdown keys per reason get a series of their
// own; the rest add up in key="other", so a guest touching ever new
// registers or devices cannot grow the label set.
const BreakdownTop = 10

// sendBreakdown exports a reason's breakdown rows (largest first) as top
// keys plus "other". Keys are not stable across scrapes near the cut, but
// every series only grows while it exists.
func (c *Collector) sendBreakdown(ch chan<- prometheus.Metric, s tracepoint.ReasonStats) {
	var other uint64
	var hasOther bool
	for i, b := range s.Breakdown {
		if i < BreakdownTop && b.Key != "other" {
			c.send(ch, c.breakdown, prometheus.CounterValue, float64(b.Count), s.Reason, b.Key)
			continue
		}
		other += b.Count
		hasOther = true
	}
	if hasOther {
		c.send(ch, c.breakdown, prometheus.CounterValue, float64(other), s.Reason, "other")
	}
}

func (c *Collector) send(ch chan<- prometheus.Metric, d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
	m, err := prometheus.NewConstMetric(d, t, v, labels...)
	if err != nil {
		m = prometheus.NewInvalidMetric(d, err)
	}
	ch <- m
}

// sendHistogram exports a key's log2 buckets: bucket i holds durations
// below 2^i ns, so its inclusive upper bound le is 2^i ns; the last, open
// bucket is the implicit +Inf.
func (c *Collector) sendHistogram(ch chan<- prometheus.Metric, k userspace.KeyStats, vcpu string) {
	buckets := make(map[float64]uint64, userspace.NumBuckets-1)
	var cum uint64
	for i := 0; i < userspace.NumBuckets-1; i++ {
		cum += k.Buckets[i]
		buckets[math.Ldexp(1, i)/1e9] = cum
	}
	// The count is the buckets' total rather than k.Count so that a scrape
	// racing with Record still exports a consistent histogram.
	cum += k.Buckets[userspace.NumBuckets-1]
	m, err := prometheus.NewConstHistogram(c.handle, cum, float64(k.SumNS)/1e9, buckets, vcpu, k.Name)
	if err != nil {
		m = prometheus.NewInvalidMetric(c.handle, err)
	}
	ch <- m
}
