package metrics

import (
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
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
	if err := WriteText(&out, Gather(a, b)); err != nil {
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

func TestHandler(t *testing.T) {
	src := SourceFunc(func() []Family {
		return []Family{{Name: "up", Help: "h", Kind: Gauge, Series: []Series{{Value: 1}}}}
	})
	srv := httptest.NewServer(Handler(src))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/plain; version=0.0.4; charset=utf-8" || string(body) != "# HELP up h\n# TYPE up gauge\nup 1\n" {
		t.Errorf("GET: %s %q %q", resp.Status, resp.Header.Get("Content-Type"), body)
	}
	resp, err = http.Post(srv.URL, "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %s", resp.Status)
	}
}

// FuzzWriteText: whatever the names in help texts and label values (they
// can come from a guest's device names or a kernel's stats descriptors),
// the output parses, and label values and help come back unchanged when
// they are valid UTF-8.
func FuzzWriteText(f *testing.F) {
	f.Add("help \\ text\n", "va\"lue\\\n", 1.5)
	f.Add("", "\xff\xfe", math.Inf(-1))
	f.Fuzz(func(t *testing.T, help, value string, v float64) {
		fams := []Family{{Name: "m_total", Help: help, Kind: Counter, Series: []Series{{Labels: []Label{{"l", value}}, Value: v}}}}
		var out strings.Builder
		if err := WriteText(&out, Gather(SourceFunc(func() []Family { return fams }))); err != nil {
			t.Fatal(err)
		}
		p := expfmt.NewTextParser(model.UTF8Validation)
		mfs, err := p.TextToMetricFamilies(strings.NewReader(out.String()))
		if err != nil {
			t.Fatalf("%v\n%s", err, out.String())
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
		// The parser skips the blanks before the help text.
		if strings.TrimLeft(strings.ToValidUTF8(help, "\uFFFD"), " \t") != mf.GetHelp() {
			t.Errorf("help %q came back as %q", help, mf.GetHelp())
		}
	})
}
