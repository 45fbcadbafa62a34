package metrics

import (
	"bufio"
	"cmp"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// mvm writes the Prometheus text exposition format (version 0.0.4,
// https://prometheus.io/docs/instrumenting/exposition_formats/) itself
// rather than linking client_golang: that library's registry, protobuf
// descriptors and default collectors are set up at package init, and are
// resident whether or not metrics are served (docs/footprint.md). The
// format is small: per family a HELP and a TYPE line, then one line per
// sample; histograms add _bucket{le=...}, _sum and _count samples.

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

// WriteText writes families in the text exposition format. Families
// without series are left out, as client libraries do.
func WriteText(w io.Writer, fams []Family) error {
	bw := bufio.NewWriter(w)
	var line []byte
	for _, f := range fams {
		if len(f.Series) == 0 {
			continue
		}
		line = append(line[:0], "# HELP "...)
		line = append(line, f.Name...)
		line = append(line, ' ')
		line = appendEscaped(line, f.Help, false)
		line = append(line, "\n# TYPE "...)
		line = append(line, f.Name...)
		line = append(line, ' ')
		line = append(line, f.Kind.String()...)
		line = append(line, '\n')
		for _, s := range f.Series {
			if f.Kind != Histogram {
				line = appendSample(line, f.Name, s.Labels, nil, s.Value)
				continue
			}
			for _, b := range s.Buckets {
				line = appendSample(line, f.Name+"_bucket", s.Labels, &Label{"le", formatFloat(b.UpperBound)}, float64(b.Count))
			}
			line = appendSample(line, f.Name+"_bucket", s.Labels, &Label{"le", "+Inf"}, float64(s.Count))
			line = appendSample(line, f.Name+"_sum", s.Labels, nil, s.Sum)
			line = appendSample(line, f.Name+"_count", s.Labels, nil, float64(s.Count))
		}
		if _, err := bw.Write(line); err != nil {
			return err
		}
	}
	return bw.Flush()
}

func appendSample(b []byte, name string, labels []Label, extra *Label, v float64) []byte {
	b = append(b, name...)
	if len(labels) > 0 || extra != nil {
		b = append(b, '{')
		for i, l := range labels {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendLabel(b, l)
		}
		if extra != nil {
			if len(labels) > 0 {
				b = append(b, ',')
			}
			b = appendLabel(b, *extra)
		}
		b = append(b, '}')
	}
	b = append(b, ' ')
	b = append(b, formatFloat(v)...)
	return append(b, '\n')
}

func appendLabel(b []byte, l Label) []byte {
	b = append(b, l.Name...)
	b = append(b, '=', '"')
	b = appendEscaped(b, l.Value, true)
	return append(b, '"')
}

// appendEscaped escapes as the format says: backslash and newline in HELP
// text, and the double quote too in label values. Invalid UTF-8 (a name
// that came from a guest, say) becomes U+FFFD so that parsers accept it.
func appendEscaped(b []byte, s string, quote bool) []byte {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, '\\', '\\')
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '"' && quote:
			b = append(b, '\\', '"')
		default:
			b = append(b, c)
		}
	}
	return b
}

// formatFloat prints a sample value the way Go clients do: shortest
// round-trip form, and +Inf, -Inf, NaN by name.
func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// contentType is the text format's media type, version 0.0.4.
const contentType = "text/plain; version=0.0.4; charset=utf-8"

// Handler serves one scrape of the sources per GET or HEAD request in the
// text format.
func Handler(srcs ...Source) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "only GET and HEAD", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", contentType)
		if r.Method == http.MethodHead {
			return
		}
		// A failed write is the scraper going away; nothing to tell it.
		_ = WriteText(w, Gather(srcs...))
	})
}
