package metrics

import (
	"cmp"
	"slices"
	"strings"
)

// The families below are mvm's own model of a scrape: plain values that
// the sources (Collector, StatsCollector, the vmm's timeline and guest
// problem counters) build at scrape time. expose.go hands them to
// Prometheus' client library, which writes the exposition formats.

// Kind is a metric family's type.
type Kind int

// The metric types mvm exports.
const (
	Counter Kind = iota
	Gauge
	Histogram
)

func (k Kind) String() string {
	switch k {
	case Counter:
		return "counter"
	case Gauge:
		return "gauge"
	case Histogram:
		return "histogram"
	}
	return "untyped"
}

// Label is one label pair of a series.
type Label struct{ Name, Value string }

// Bucket is one histogram bucket: the number of observations at or below
// UpperBound (cumulative, as in the exposition format).
type Bucket struct {
	UpperBound float64
	Count      uint64
}

// Series is one labelled time series of a family. Value is the sample of
// a counter or gauge; a histogram's series carries Buckets (ascending,
// without the +Inf bucket, which is Count), Count and Sum instead.
type Series struct {
	Labels  []Label
	Value   float64
	Buckets []Bucket
	Count   uint64
	Sum     float64
}

// Family is a named metric family: what one scrape says about one metric.
type Family struct {
	Name, Help string
	Kind       Kind
	Series     []Series
}

// Source is anything that contributes families to a scrape. Families is
// called once per scrape, from the HTTP server's goroutine, and must
// read its numbers then (no goroutine of its own, no caching): that is
// the whole data-source contract. Collector, StatsCollector and the
// vmm's timeline are Sources; a new source of numbers (BPF maps, say)
// only needs a Families method returning plain values.
type Source interface {
	Families() []Family
}

// SourceFunc adapts a function to a Source.
type SourceFunc func() []Family

// Families calls f.
func (f SourceFunc) Families() []Family { return f() }

// Gather collects the families of all sources for one scrape: families
// with one name are merged (the first one's help and kind win; a later
// family of another kind is dropped, as is a series whose labels repeat
// an earlier one's), series without a sample are kept, families are
// sorted by name and series by their labels (names sorted), so two
// scrapes of the same numbers print the same text.
func Gather(srcs ...Source) []Family {
	byName := map[string]int{}
	var out []Family
	for _, s := range srcs {
		for _, f := range s.Families() {
			i, ok := byName[f.Name]
			if !ok {
				byName[f.Name] = len(out)
				out = append(out, Family{Name: f.Name, Help: f.Help, Kind: f.Kind})
				i = len(out) - 1
			}
			if out[i].Kind != f.Kind {
				continue
			}
			out[i].Series = append(out[i].Series, f.Series...)
		}
	}
	for i := range out {
		f := &out[i]
		for j := range f.Series {
			ls := slices.Clone(f.Series[j].Labels)
			slices.SortStableFunc(ls, func(a, b Label) int { return strings.Compare(a.Name, b.Name) })
			f.Series[j].Labels = ls
		}
		slices.SortStableFunc(f.Series, func(a, b Series) int { return compareLabels(a.Labels, b.Labels) })
		f.Series = slices.CompactFunc(f.Series, func(a, b Series) bool { return compareLabels(a.Labels, b.Labels) == 0 })
	}
	slices.SortFunc(out, func(a, b Family) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func compareLabels(a, b []Label) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if c := cmp.Or(strings.Compare(a[i].Name, b[i].Name), strings.Compare(a[i].Value, b[i].Value)); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(a), len(b))
}
