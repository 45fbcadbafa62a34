package metrics

import (
	"cmp"
	"slices"
	"strings"

	"github.com/mvm-dev/mvm/exits"
	"github.com/mvm-dev/mvm/exits/kvmstat"
)

// StatsCollector exports KVM's binary statistics (KVM_GET_STATS_FD) as
// metric families of their own kind and unit, named from the kernel's
// descriptors:
//
//	cumulative stats  counters  mvm_kvm_<name>_total, seconds as
//	                            mvm_kvm_<name>_seconds_total (halt_wait_ns ->
//	                            mvm_kvm_halt_wait_seconds_total)
//	instant and peak  gauges    mvm_kvm_<name>, with _seconds or _bytes for
//	                            those units
//
// each with a vcpu label ("0", "1", ... or "vm" for the VM's own stats).
// Values are in the unit (raw x base^exponent). Histogram stats are left
// out: KVM gives no sum for them. A scrape whose stats read fails has
// mvm_kvm_stats_error 1 in their place.
type StatsCollector struct {
	get func() ([]kvmstat.Labeled, error)
}

// NewStatsCollector returns a collector calling get once per scrape.
func NewStatsCollector(get func() ([]kvmstat.Labeled, error)) *StatsCollector {
	return &StatsCollector{get: get}
}

// errFamily is what a scrape says when the stats cannot be read: the other
// families are still served.
func errFamily() Family {
	return Family{Name: "mvm_kvm_stats_error", Help: "1 when reading the KVM stats files failed at this scrape.", Kind: Gauge,
		Series: []Series{{Value: 1}}}
}

// Families implements Source.
func (c *StatsCollector) Families() []Family {
	sets, err := c.get()
	if err != nil {
		return []Family{errFamily()}
	}
	slices.SortStableFunc(sets, func(a, b kvmstat.Labeled) int { return cmp.Compare(exits.VCPUOrder(a.VCPU), exits.VCPUOrder(b.VCPU)) })
	var out []Family
	index := map[string]int{}
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
			// A duplicate (vcpu, name) pair would be two samples of one
			// series; KVM never repeats a name, a corrupt file might. So
			// would one name used as two kinds.
			j, ok := index[name]
			if (ok && out[j].Kind != kind) || seen[[2]string{set.VCPU, name}] {
				continue
			}
			seen[[2]string{set.VCPU, name}] = true
			if !ok {
				j = len(out)
				index[name] = j
				out = append(out, Family{Name: name, Kind: kind,
					Help: "KVM binary statistic " + d.Name + " (" + d.Type().String() + ", " + d.Unit().String() + "), KVM_GET_STATS_FD; vcpu=\"vm\" for the VM's own."})
			}
			out[j].Series = append(out[j].Series, Series{Labels: []Label{{"vcpu", set.VCPU}}, Value: float64(vs[0]) * d.Scale()})
		}
	}
	return out
}

// StatMetricName is the metric name and kind of a KVM stat (see
// StatsCollector).
func StatMetricName(d kvmstat.StatDesc) (string, Kind) {
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
		return name + "_total", Counter
	}
	return name, Gauge
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
