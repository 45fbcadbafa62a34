package metrics

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
)

// mvm serves its metrics through Prometheus' client library: a
// prometheus.Collector over the sources' families (promCollector), a
// registry of its own holding only that collector (not the default
// registry, whose Go and process collectors would add families mvm never
// exported), and promhttp's handler, which negotiates the format from the
// scraper's Accept header (text 0.0.4, OpenMetrics 1.0, protobuf) and
// compresses with gzip when asked. The library's package init is resident
// in every mvm process; those are file-backed pages of the executable,
// shared by every mvm on a host, not a per-VM cost (docs/footprint.md).

// promCollector is a prometheus.Collector over mvm's sources. It
// describes nothing up front, which makes it an "unchecked" collector
// (prometheus.Collector's doc): the KVM stats families are named from the
// kernel's stats descriptors, known only at a scrape.
type promCollector struct{ srcs []Source }

// Describe implements prometheus.Collector: no descriptors (unchecked).
func (promCollector) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector: one Gather of the sources
// (merged, sorted, repeated series dropped), each series a const metric.
func (c promCollector) Collect(ch chan<- prometheus.Metric) {
	for _, f := range Gather(c.srcs...) {
		help := validUTF8(f.Help)
		// One descriptor per set of label names; within a family every
		// series has the same set, except in hand-made families.
		descs := map[string]*prometheus.Desc{}
		for _, s := range f.Series {
			names := make([]string, len(s.Labels))
			values := make([]string, len(s.Labels))
			for i, l := range s.Labels {
				names[i], values[i] = l.Name, validUTF8(l.Value)
			}
			key := strings.Join(names, "\x00")
			d, ok := descs[key]
			if !ok {
				d = prometheus.NewDesc(f.Name, help, names, nil)
				descs[key] = d
			}
			ch <- constMetric(d, f.Kind, s, values)
		}
	}
}

// constMetric is one series as a client_golang const metric; a series the
// library refuses (a repeated label name, say) becomes an invalid metric,
// which the handler logs and leaves out (promhttp.ContinueOnError).
func constMetric(d *prometheus.Desc, k Kind, s Series, values []string) prometheus.Metric {
	var m prometheus.Metric
	var err error
	switch k {
	case Counter:
		m, err = prometheus.NewConstMetric(d, prometheus.CounterValue, s.Value, values...)
	case Gauge:
		m, err = prometheus.NewConstMetric(d, prometheus.GaugeValue, s.Value, values...)
	case Histogram:
		buckets := make(map[float64]uint64, len(s.Buckets))
		for _, b := range s.Buckets {
			buckets[b.UpperBound] = b.Count
		}
		m, err = prometheus.NewConstHistogram(d, s.Count, s.Sum, buckets, values...)
	default:
		err = fmt.Errorf("metric kind %d", int(k))
	}
	if err != nil {
		return prometheus.NewInvalidMetric(d, err)
	}
	return m
}

// validUTF8 replaces invalid UTF-8 (a device or stat name that came from a
// guest or a kernel, say) with U+FFFD: the registry refuses label values
// that are not UTF-8, and the protobuf format needs valid strings.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// registry is a registry holding only the sources' collector.
func registry(srcs []Source) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	// A fresh registry accepts any unchecked collector; Register cannot
	// fail here.
	_ = reg.Register(promCollector{srcs})
	return reg
}

// WriteText writes one scrape of the sources in the text exposition
// format (0.0.4), as Handler serves it to a scraper asking for text.
func WriteText(w io.Writer, srcs ...Source) error {
	fams, err := registry(srcs).Gather()
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range fams {
		if eerr := enc.Encode(f); eerr != nil {
			return fmt.Errorf("metrics: writing %s: %w", f.GetName(), eerr)
		}
	}
	if err != nil {
		return fmt.Errorf("metrics: gathering: %w", err)
	}
	return nil
}

// slogPrinter gives promhttp (whose ErrorLog wants Println) a slog logger.
type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Println(v ...any) {
	p.log.Warn("metrics scrape", "err", strings.TrimSpace(fmt.Sprintln(v...)))
}

// Handler serves one scrape of the sources per GET or HEAD request,
// through promhttp: the format the scraper's Accept header asks for (text
// 0.0.4 by default, OpenMetrics 1.0, protobuf), gzip when its
// Accept-Encoding allows. A series the library refuses is logged on log
// (nil: not logged) and left out; the rest is served.
func Handler(log *slog.Logger, srcs ...Source) http.Handler {
	opts := promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, EnableOpenMetrics: true}
	if log != nil {
		opts.ErrorLog = slogPrinter{log}
	}
	h := promhttp.HandlerFor(registry(srcs), opts)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "only GET and HEAD", http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	})
}
