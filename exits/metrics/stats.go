package metrics

import (
	"cmp"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mvm-dev/mvm/exits"
	"github.com/mvm-dev/mvm/exits/kvmstat"
)

// StatsCollector exports KVM's binary statistics (KVM_GET_STATS_FD) as
// metric families of their own kind and unit, named from the kernel's
// descriptors (so it is an unchecked collector: Describe sends nothing):
//
//	cumulative stats  counters  mvm_kvm_<name>_total, seconds as
//	                            mvm_kvm_<name>_seconds_total (halt_wait_ns ->
//	                            mvm_kvm_halt_wait_seconds_total)
//	instant and peak  gauges    mvm_kvm_<name>, with _seconds or _bytes for
//	                            those units
//
// each with a vcpu label ("0", "1", ... or "vm" for the VM's own stats).
// Values are in the unit (raw x base^exponent). Histogram stats are left
// out: KVM gives no sum for them.
type StatsCollector struct {
	get func() ([]kvmstat.Labeled, error)
}

// NewStatsCollector returns a collector calling get once per scrape.
func NewStatsCollector(get func() ([]kvmstat.Labeled, error)) *StatsCollector {
	return &StatsCollector{get: get}
}

// Describe implements prometheus.Collector; it sends nothing, because the
// families depend on the kernel's descriptors.
func (c *StatsCollector) Describe(chan<- *prometheus.Desc) {}

var errDesc = prometheus.NewDesc("mvm_kvm_stats_error", "Reading the KVM stats files failed.", nil, nil)

// Collect implements prometheus.Collector.
func (c *StatsCollector) Collect(ch chan<- prometheus.Metric) {
	sets, err := c.get()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(errDesc, err)
		return
	}
	slices.SortStableFunc(sets, func(a, b kvmstat.Labeled) int { return cmp.Compare(exits.VCPUOrder(a.VCPU), exits.VCPUOrder(b.VCPU)) })
	descs := map[string]*prometheus.Desc{}
	kinds := map[string]prometheus.ValueType{}
	seen := map[[2]string]bool{}
	for _, set := range sets {
		if set.Snapshot == nil || set.Snapshot.Layout == nil {
			continue
		}
		for i, d := range set.Snapshot.Layout.Descs {
			vs := set.Snapshot.Values(i)
			if d.IsHistogram() || len(vs) == 0 {
				continue
			}
			name, kind := StatMetricName(d)
			// A duplicate (vcpu, name) pair would fail the whole scrape;
			// KVM never repeats a name, a corrupt file might. So would
			// one name used as two kinds.
			if k, ok := kinds[name]; (ok && k != kind) || seen[[2]string{set.VCPU, name}] {
				continue
			}
			seen[[2]string{set.VCPU, name}] = true
			kinds[name] = kind
			desc := descs[name]
			if desc == nil {
				desc = prometheus.NewDesc(name, "KVM binary statistic "+d.Name+" ("+d.Type().String()+", "+d.Unit().String()+"), KVM_GET_STATS_FD; vcpu=\"vm\" for the VM's own.", []string{"vcpu"}, nil)
				descs[name] = desc
			}
			m, err := prometheus.NewConstMetric(desc, kind, float64(vs[0])*d.Scale(), set.VCPU)
			if err != nil {
				m = prometheus.NewInvalidMetric(desc, err)
			}
			ch <- m
		}
	}
}

// StatMetricName is the metric name and kind of a KVM stat (see
// StatsCollector).
func StatMetricName(d kvmstat.StatDesc) (string, prometheus.ValueType) {
	base := sanitize(d.Name)
	unit := ""
	switch d.Unit() {
	case kvmstat.UnitSeconds:
		for _, suf := range []string{"_ns", "_us", "_ms", "_seconds"} {
			base = strings.TrimSuffix(base, suf)
		}
		unit = "_seconds"
	case kvmstat.UnitBytes:
		base = strings.TrimSuffix(base, "_bytes")
		unit = "_bytes"
	case kvmstat.UnitCycles:
		base = strings.TrimSuffix(base, "_cycles")
		unit = "_cycles"
	}
	name := "mvm_kvm_" + base + unit
	if d.Type() == kvmstat.StatCumulative {
		return name + "_total", prometheus.CounterValue
	}
	return name, prometheus.GaugeValue
}

// sanitize maps a stat name onto the metric name alphabet [a-zA-Z0-9_].
func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}
