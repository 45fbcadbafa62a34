package metrics

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/mvm-dev/mvm/exits"
	"github.com/mvm-dev/mvm/exits/exitstest"
	"github.com/mvm-dev/mvm/exits/kvmstat"
	"github.com/mvm-dev/mvm/exits/tracepoint"
	"github.com/mvm-dev/mvm/exits/userspace"
)

// TestWriteText: the exposition format's rules (escaping, histogram
// series, special values, families sorted and merged), checked against
// text written from the format's description.
func TestWriteText(t *testing.T) {
	a := SourceFunc(func() []Family {
		return []Family{
			{Name: "b_seconds", Help: "a histogram", Kind: Histogram, Series: []Series{{
				Labels:  []Label{{"vcpu", "0"}},
				Buckets: []Bucket{{0.5, 1}, {1, 3}}, Count: 4, Sum: 2.25,
			}}},
			{Name: "a_total", Help: "back\\slash and\nnewline", Kind: Counter, Series: []Series{
				{Labels: []Label{{"z", "1"}, {"k", "quote\" \\ \n"}}, Value: 2},
				{Labels: []Label{{"k", "a"}, {"z", "1"}}, Value: math.Inf(1)},
			}},
			{Name: "empty", Help: "no series", Kind: Gauge},
		}
	})
	b := SourceFunc(func() []Family {
		return []Family{
			// The same family again: merged; its repeated series dropped.
			{Name: "a_total", Help: "other help", Kind: Counter, Series: []Series{
				{Labels: []Label{{"k", "a"}, {"z", "1"}}, Value: 7},
				{Labels: []Label{{"k", "b"}, {"z", "1"}}, Value: 1e-7},
			}},
			// The same name as another kind: dropped.
			{Name: "b_seconds", Kind: Gauge, Series: []Series{{Value: 1}}},
			{Name: "c", Help: "", Kind: Gauge, Series: []Series{{Value: math.NaN()}, {Labels: []Label{{"bad", "\xff"}}, Value: -1}}},
		}
	})
	want := `# HELP a_total back\\slash and\nnewline
# TYPE a_total counter
a_total{k="a",z="1"} +Inf
a_total{k="b",z="1"} 1e-07
a_total{k="quote\" \\ \n",z="1"} 2
# HELP b_seconds a histogram
# TYPE b_seconds histogram
b_seconds_bucket{vcpu="0",le="0.5"} 1
b_seconds_bucket{vcpu="0",le="1"} 3
b_seconds_bucket{vcpu="0",le="+Inf"} 4
b_seconds_sum{vcpu="0"} 2.25
b_seconds_count{vcpu="0"} 4
# HELP c 
# TYPE c gauge
c NaN
c{bad="` + "\uFFFD" + `"} -1
`
	var out strings.Builder
	if err := WriteText(&out, a, b); err != nil {
		t.Fatal(err)
	}
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	if _, err := p.TextToMetricFamilies(strings.NewReader(out.String())); err != nil {
		t.Errorf("Prometheus' parser refuses it: %v", err)
	}
}

// edgeSources are families that exercise the format's corners: escaping,
// special values, invalid UTF-8, merged families, repeated series, one
// name as two kinds, a family whose series have different label names.
func edgeSources() []Source {
	a := SourceFunc(func() []Family {
		return []Family{
			{Name: "b_seconds", Help: "a histogram", Kind: Histogram, Series: []Series{{
				Labels:  []Label{{"vcpu", "0"}},
				Buckets: []Bucket{{0.5, 1}, {1, 3}}, Count: 4, Sum: 2.25,
			}}},
			{Name: "a_total", Help: "back\\slash and\nnewline \xff", Kind: Counter, Series: []Series{
				{Labels: []Label{{"z", "1"}, {"k", "quote\" \\ \n"}}, Value: 2},
				{Labels: []Label{{"k", "a"}, {"z", "1"}}, Value: math.Inf(1)},
			}},
			{Name: "empty", Help: "no series", Kind: Gauge},
		}
	})
	b := SourceFunc(func() []Family {
		return []Family{
			{Name: "a_total", Help: "other help", Kind: Counter, Series: []Series{
				{Labels: []Label{{"k", "a"}, {"z", "1"}}, Value: 7},
				{Labels: []Label{{"k", "b"}, {"z", "1"}}, Value: 1e-7},
			}},
			{Name: "b_seconds", Kind: Gauge, Series: []Series{{Value: 1}}},
			{Name: "c", Help: "mixed", Kind: Gauge, Series: []Series{{Value: math.NaN()}, {Labels: []Label{{"bad", "\xff"}}, Value: -1}, {Labels: []Label{{"n", "x"}}, Value: math.Inf(-1)}}},
		}
	})
	return []Source{a, b}
}

// collectorSources is a Collector over real recorders, a tracepoint
// aggregate and KVM stats (as TestCollector sets them up), with the
// breakdown past BreakdownTop keys.
func collectorSources(t testing.TB) []Source {
	s := userspace.NewSchema()
	uart, _ := s.Register(userspace.KindMMIO, "uart")
	cpuOn, _ := s.Register(userspace.KindHypercall, "CPU_ON")
	r0, r1 := s.NewRecorder(0), s.NewRecorder(1)
	for i := range 50 {
		r0.Record(uart, time.Duration(i*i)*time.Nanosecond)
	}
	r0.Record(cpuOn, time.Microsecond)
	r1.Record(cpuOn, 3*time.Millisecond)
	r1.Record(userspace.KindKey(userspace.KindHypercall), time.Microsecond)
	r0.SetState(userspace.StateRunning)
	r1.SetState(userspace.StateOff)
	agg := tracepoint.NewAggregator(exits.Arm64Namer{})
	agg.SetVCPU(10, 0)
	var evs []tracepoint.Event
	ts := uint64(1)
	for i := range 30 {
		// DABT_LOW (EC 0x24) at 30 different addresses: more breakdown
		// keys than BreakdownTop.
		evs = append(evs, exitstest.Entry(10, 0, ts), exitstest.Exit(10, 0, ts+3, 2, 0x24))
		_ = i
		ts += 5
	}
	evs = append(evs, exitstest.Entry(10, 0, ts), exitstest.Exit(10, 0, ts+2, 2, 0x01))
	agg.Add(evs)
	stats := func() ([]kvmstat.Labeled, error) {
		snap, err := vcpuStats(42, 7, 1500, []uint64{1, 2})
		return []kvmstat.Labeled{{VCPU: "0", Snapshot: snap}, {VCPU: "vm", Snapshot: snap}}, err
	}
	if _, err := stats(); err != nil {
		t.Fatal(err)
	}
	failing := NewStatsCollector(func() ([]kvmstat.Labeled, error) { return nil, errors.New("read failed") })
	return []Source{NewCollector(CollectorConfig{Recorders: []*userspace.Recorder{r0, r1}, Trace: agg, KVMStats: stats}), failing}
}

// canonical prints parsed families in one order, every field that a
// scrape carries: name, help (without the leading blanks the text parser
// skips), type, and per series its labels and value, or its buckets
// (without +Inf, which is the count), count and sum. NaN prints as NaN.
func canonical(mfs map[string]*dto.MetricFamily) string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(mfs)) {
		mf := mfs[name]
		fmt.Fprintf(&b, "%s %s %q\n", mf.GetName(), mf.GetType(), strings.TrimLeft(mf.GetHelp(), " \t"))
		var lines []string
		for _, m := range mf.GetMetric() {
			var l strings.Builder
			for _, lp := range m.GetLabel() {
				fmt.Fprintf(&l, "%s=%q ", lp.GetName(), lp.GetValue())
			}
			switch {
			case m.Counter != nil:
				fmt.Fprintf(&l, "counter %v", m.GetCounter().GetValue())
			case m.Gauge != nil:
				fmt.Fprintf(&l, "gauge %v", m.GetGauge().GetValue())
			case m.Histogram != nil:
				h := m.GetHistogram()
				fmt.Fprintf(&l, "histogram count %d sum %v", h.GetSampleCount(), h.GetSampleSum())
				for _, bk := range h.GetBucket() {
					if !math.IsInf(bk.GetUpperBound(), 1) {
						fmt.Fprintf(&l, " le %v:%d", bk.GetUpperBound(), bk.GetCumulativeCount())
					}
				}
			default:
				fmt.Fprintf(&l, "other %v", m)
			}
			lines = append(lines, l.String())
		}
		slices.Sort(lines)
		for _, l := range lines {
			b.WriteString("  " + l + "\n")
		}
	}
	return b.String()
}

// handWritten is the reference writer's scrape of srcs, parsed.
func handWritten(t testing.TB, srcs ...Source) map[string]*dto.MetricFamily {
	t.Helper()
	var b strings.Builder
	if err := refWriteText(&b, Gather(srcs...)); err != nil {
		t.Fatal(err)
	}
	mfs, err := parseText(strings.NewReader(b.String()))
	if err != nil {
		t.Fatalf("hand-written exposition does not parse: %v\n%s", err, b.String())
	}
	return mfs
}

// get scrapes url with the given Accept and Accept-Encoding headers.
func get(t *testing.T, url, accept, encoding string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if encoding != "" {
		// Set by hand, so the client leaves the body compressed.
		req.Header.Set("Accept-Encoding", encoding)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// TestSameAsHandWritten: for the same numbers, what the handler serves
// (text, gzip'd text, protobuf) parses to the same families, help, types,
// labels and values as the hand-written writer it replaced; OpenMetrics,
// which expfmt cannot parse, has every family and its terminator.
func TestSameAsHandWritten(t *testing.T) {
	for _, tc := range []struct {
		name string
		srcs []Source
	}{{"collector", collectorSources(t)}, {"edges", edgeSources()}} {
		t.Run(tc.name, func(t *testing.T) {
			want := canonical(handWritten(t, tc.srcs...))
			if !strings.Contains(want, "histogram") || !strings.Contains(want, "counter") || !strings.Contains(want, "gauge") {
				t.Fatalf("the fixture lacks a kind:\n%s", want)
			}
			srv := httptest.NewServer(Handler(nil, tc.srcs...))
			defer srv.Close()

			resp, body := get(t, srv.URL, "", "")
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
				t.Errorf("default Content-Type %q", ct)
			}
			mfs, err := parseText(strings.NewReader(string(body)))
			if err != nil {
				t.Fatalf("text: %v\n%s", err, body)
			}
			if got := canonical(mfs); got != want {
				t.Errorf("text differs:\ngot\n%s\nwant\n%s", got, want)
			}

			resp, body = get(t, srv.URL, "", "gzip")
			if resp.Header.Get("Content-Encoding") != "gzip" {
				t.Errorf("Accept-Encoding gzip: Content-Encoding %q", resp.Header.Get("Content-Encoding"))
			} else {
				zr, err := gzip.NewReader(strings.NewReader(string(body)))
				if err != nil {
					t.Fatal(err)
				}
				mfs, err := parseText(zr)
				if err != nil {
					t.Fatalf("gzip text: %v", err)
				}
				if got := canonical(mfs); got != want {
					t.Errorf("gzip'd text differs:\ngot\n%s\nwant\n%s", got, want)
				}
			}

			resp, body = get(t, srv.URL, string(expfmt.NewFormat(expfmt.TypeProtoDelim)), "")
			if f := expfmt.ResponseFormat(resp.Header); f.FormatType() != expfmt.TypeProtoDelim {
				t.Fatalf("asked for protobuf, got %q", resp.Header.Get("Content-Type"))
			}
			dec := expfmt.NewDecoder(strings.NewReader(string(body)), expfmt.ResponseFormat(resp.Header))
			mfs = map[string]*dto.MetricFamily{}
			for {
				var mf dto.MetricFamily
				if err := dec.Decode(&mf); err == io.EOF {
					break
				} else if err != nil {
					t.Fatalf("protobuf: %v", err)
				}
				mfs[mf.GetName()] = &mf
			}
			if got := canonical(mfs); got != want {
				t.Errorf("protobuf differs:\ngot\n%s\nwant\n%s", got, want)
			}

			resp, body = get(t, srv.URL, "application/openmetrics-text; version=1.0.0", "")
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/openmetrics-text; version=1.0.0") {
				t.Fatalf("asked for OpenMetrics, got %q", resp.Header.Get("Content-Type"))
			}
			if !strings.HasSuffix(string(body), "# EOF\n") {
				t.Errorf("OpenMetrics without its # EOF terminator:\n%s", body)
			}
			for name, mf := range handWritten(t, tc.srcs...) {
				// OpenMetrics names a counter family without its _total.
				if mf.GetType() == dto.MetricType_COUNTER {
					name = strings.TrimSuffix(name, "_total")
				}
				if !strings.Contains(string(body), "# TYPE "+name+" "+strings.ToLower(mf.GetType().String())+"\n") {
					t.Errorf("OpenMetrics lacks family %s", name)
				}
			}
		})
	}
}

func TestHandler(t *testing.T) {
	src := SourceFunc(func() []Family {
		return []Family{{Name: "up", Help: "h", Kind: Gauge, Series: []Series{{Value: 1}}}}
	})
	srv := httptest.NewServer(Handler(nil, src))
	defer srv.Close()
	resp, body := get(t, srv.URL, "", "")
	if resp.StatusCode != 200 || string(body) != "# HELP up h\n# TYPE up gauge\nup 1\n" {
		t.Errorf("GET: %s %q", resp.Status, body)
	}
	resp, err := http.Post(srv.URL, "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %s", resp.Status)
	}
}

// TestHandlerLogsRefusedSeries: a series the library refuses (a label
// name twice) is logged and left out; the rest of the scrape is served.
func TestHandlerLogsRefusedSeries(t *testing.T) {
	src := SourceFunc(func() []Family {
		return []Family{
			{Name: "bad", Help: "h", Kind: Gauge, Series: []Series{{Labels: []Label{{"l", "1"}, {"l", "2"}}, Value: 1}}},
			{Name: "good", Help: "h", Kind: Gauge, Series: []Series{{Value: 2}}},
		}
	})
	var logged strings.Builder
	srv := httptest.NewServer(Handler(slog.New(slog.NewTextHandler(&logged, nil)), src))
	defer srv.Close()
	resp, body := get(t, srv.URL, "", "")
	if resp.StatusCode != 200 || !strings.Contains(string(body), "good 2\n") || strings.Contains(string(body), "bad") {
		t.Errorf("GET: %s %q", resp.Status, body)
	}
	if !strings.Contains(logged.String(), "bad") {
		t.Errorf("nothing logged about the refused series: %q", logged.String())
	}
}

// FuzzSameAsHandWritten: whatever the help text, label value and sample
// value (names in them can come from a guest's device names or a
// kernel's stats descriptors), the library's text parses to what the
// hand-written writer's does, and label values and help come back
// unchanged when they are valid UTF-8.
func FuzzSameAsHandWritten(f *testing.F) {
	f.Add("help \\ text\n", "va\"lue\\\n", 1.5)
	f.Add("", "\xff\xfe", math.Inf(-1))
	f.Add(" \tlead", "", math.NaN())
	f.Fuzz(func(t *testing.T, help, value string, v float64) {
		src := SourceFunc(func() []Family {
			return []Family{{Name: "m_total", Help: help, Kind: Counter, Series: []Series{{Labels: []Label{{"l", value}}, Value: v}}}}
		})
		var out strings.Builder
		if err := WriteText(&out, src); err != nil {
			t.Fatal(err)
		}
		mfs, err := parseText(strings.NewReader(out.String()))
		if err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
		if got, want := canonical(mfs), canonical(handWritten(t, src)); got != want {
			t.Errorf("got\n%s\nwant\n%s", got, want)
		}
		mf := mfs["m_total"]
		if mf == nil || len(mf.GetMetric()) != 1 {
			t.Fatalf("parsed %v", mfs)
		}
		m := mf.GetMetric()[0]
		got := m.GetCounter().GetValue()
		if !(got == v || math.IsNaN(got) && math.IsNaN(v)) {
			t.Errorf("value %v came back as %v", v, got)
		}
		if strings.ToValidUTF8(value, "\uFFFD") != m.GetLabel()[0].GetValue() {
			t.Errorf("label %q came back as %q", value, m.GetLabel()[0].GetValue())
		}
		if strings.TrimLeft(strings.ToValidUTF8(help, "\uFFFD"), " \t") != mf.GetHelp() {
			t.Errorf("help %q came back as %q", help, mf.GetHelp())
		}
	})
}

// parseText parses the text format with Prometheus' own parser.
func parseText(r io.Reader) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(r)
}

// TestPromtoolCheck runs Prometheus' own linter (promtool check metrics,
// from Debian's prometheus package, which lab/host-deps.sh installs) on
// what the handler serves for a Collector over real recorders, tracepoint
// aggregate and KVM stats: no errors and no lint problems. The lab's
// TestMetricsDuringBoot leaves a live scrape for the same check.
func TestPromtoolCheck(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (Debian: apt-get install prometheus; lab/host-deps.sh does)")
	}
	srv := httptest.NewServer(Handler(nil, collectorSources(t)...))
	defer srv.Close()
	_, body := get(t, srv.URL, "", "")
	if !strings.Contains(string(body), "mvm_exit_handle_seconds_bucket") {
		t.Fatalf("scrape without the histogram:\n%s", body)
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(string(body))
	if out, err := cmd.CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) != 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// TestPromtoolLiveScrape lints the scrape the lab's TestMetricsDuringBoot
// took from a booting 4-vCPU Linux guest and brought back
// (metrics-during-boot.txt in a directory of the list $MVM_REPORT_FIXTURES;
// make report-test sets it to out/lab-out and out/lab-out-insn) with
// promtool check metrics.
func TestPromtoolLiveScrape(t *testing.T) {
	dirs := os.Getenv("MVM_REPORT_FIXTURES")
	if dirs == "" {
		t.Skip("lints the lab's live scrape: make report-test runs it with MVM_REPORT_FIXTURES=out/lab-out")
	}
	var body []byte
	err := os.ErrNotExist
	for _, dir := range filepath.SplitList(dirs) {
		if body, err = os.ReadFile(filepath.Join(dir, "metrics-during-boot.txt")); !errors.Is(err, os.ErrNotExist) {
			break
		}
	}
	if errors.Is(err, os.ErrNotExist) {
		t.Skip("no live scrape: the lab run did not include TestMetricsDuringBoot")
	} else if err != nil {
		t.Fatal(err)
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is not installed: lab/host-deps.sh (make lab-deps) installs Debian's prometheus package")
	}
	for _, want := range []string{"mvm_exits_total", "mvm_exit_handle_seconds_bucket", "mvm_kvm_exits_total", "mvm_exit_breakdown_total"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("the live scrape has no %s", want)
		}
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(string(body))
	if out, err := cmd.CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) != 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
