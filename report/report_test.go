package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/mvm-dev/mvm/bench"
	"github.com/mvm-dev/mvm/exits"
	"github.com/mvm-dev/mvm/runsummary"
)

// The structure tests parse each report with a real HTML parser and check
// what it must show against the data it was made from.

func parse(t *testing.T, page []byte) *html.Node {
	t.Helper()
	doc, err := html.Parse(bytes.NewReader(page))
	if err != nil {
		t.Fatalf("parse the report: %v", err)
	}
	return doc
}

func attr(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

func hasClass(n *html.Node, c string) bool {
	v, _ := attr(n, "class")
	return slices.Contains(strings.Fields(v), c)
}

// find returns the element nodes under n (depth first) that match.
func find(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && match(n) {
			out = append(out, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return out
}

func byClass(n *html.Node, tag, class string) []*html.Node {
	return find(n, func(e *html.Node) bool { return e.Data == tag && hasClass(e, class) })
}

func byID(n *html.Node, id string) *html.Node {
	got := find(n, func(e *html.Node) bool { v, _ := attr(e, "id"); return v == id })
	if len(got) != 1 {
		return nil
	}
	return got[0]
}

func text(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return b.String()
}

// tooltip is the text of an element's own <title> child.
func tooltip(n *html.Node) string {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.ElementNode && c.Data == "title" {
			return text(c)
		}
	}
	return ""
}

func num(t *testing.T, n *html.Node, key string) float64 {
	t.Helper()
	v, ok := attr(n, key)
	if !ok {
		t.Fatalf("<%s> has no %s", n.Data, key)
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		t.Fatalf("<%s %s=%q>: %v", n.Data, key, v, err)
	}
	return f
}

// msOf is the test's own rendering of a duration in the reports' unit.
func msOf(ns int64) string { return fmt.Sprintf("%.3f ms", float64(ns)/1e6) }

// checkAxes: every axis has ticks, and both their values and their
// positions increase.
func checkAxes(t *testing.T, doc *html.Node) {
	t.Helper()
	axes := find(doc, func(e *html.Node) bool { v, _ := attr(e, "data-axis"); return v == "x" })
	if len(axes) == 0 {
		t.Fatal("no axis")
	}
	for i, ax := range axes {
		ticks := byClass(ax, "g", "tick")
		if len(ticks) < 2 {
			t.Errorf("axis %d: %d ticks", i, len(ticks))
			continue
		}
		prevV, prevX := -1e300, -1e300
		for _, tk := range ticks {
			v := num(t, tk, "data-ns")
			lines := find(tk, func(e *html.Node) bool { return e.Data == "line" })
			if len(lines) != 1 {
				t.Fatalf("axis %d: tick without its line", i)
			}
			x := num(t, lines[0], "x1")
			if v <= prevV || x <= prevX {
				t.Errorf("axis %d: tick %v at x=%v after %v at x=%v: not increasing", i, v, x, prevV, prevX)
			}
			prevV, prevX = v, x
		}
	}
}

// checkSelfContained: nothing is fetched and nothing needs a script.
func checkSelfContained(t *testing.T, doc *html.Node) {
	t.Helper()
	for _, e := range find(doc, func(*html.Node) bool { return true }) {
		if e.Data == "script" || e.Data == "link" || e.Data == "img" || e.Data == "iframe" {
			t.Errorf("report has a <%s> element", e.Data)
		}
		for _, a := range e.Attr {
			if (a.Key == "src" || a.Key == "href" || strings.HasSuffix(a.Key, ":href")) && a.Val != "" {
				t.Errorf("<%s %s=%q>: the report must not reference other files", e.Data, a.Key, a.Val)
			}
			if strings.Contains(a.Val, "url(") {
				t.Errorf("<%s %s=%q>: external CSS reference", e.Data, a.Key, a.Val)
			}
		}
	}
}

func renderRun(t *testing.T, s *runsummary.Summary) *html.Node {
	t.Helper()
	var b bytes.Buffer
	if err := WriteRun(&b, s, "test.json"); err != nil {
		t.Fatal(err)
	}
	return parse(t, b.Bytes())
}

func TestRunReportStructure(t *testing.T) {
	for _, n := range []int{1, 4, 128} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			s := synthRun(t, n, uint64(n))
			doc := renderRun(t, s)
			checkAxes(t, doc)
			checkSelfContained(t, doc)

			rows := byClass(byID(doc, "vcpus"), "g", "vcpu")
			if len(rows) != n {
				t.Fatalf("%d vCPU rows for %d vCPUs", len(rows), n)
			}
			prevY := -1.0
			for i, r := range rows {
				if int(num(t, r, "data-vcpu")) != i {
					t.Errorf("row %d is vCPU %v", i, num(t, r, "data-vcpu"))
				}
				for key, want := range map[string]int64{"data-cpu-on-ns": s.CPUOnNS[i], "data-entered-ns": s.EnteredNS[i], "data-reset-ns": s.ResetNS[i]} {
					if got := num(t, r, key); int64(got) != want {
						t.Errorf("vCPU %d %s = %v, want %d", i, key, got, want)
					}
				}
				tip := tooltip(r)
				if !strings.Contains(tip, msOf(s.EnteredNS[i])) {
					t.Errorf("vCPU %d tooltip %q lacks its entry %s", i, tip, msOf(s.EnteredNS[i]))
				}
				if i > 0 && !strings.Contains(tip, msOf(s.CPUOnNS[i])) || i > 0 && !strings.Contains(tip, msOf(s.EnteredNS[i]-s.CPUOnNS[i])) {
					t.Errorf("vCPU %d tooltip %q lacks CPU_ON %s or the latency", i, tip, msOf(s.CPUOnNS[i]))
				}
				// Rows are stacked top to bottom, none on another.
				bg := find(r, func(e *html.Node) bool { return e.Data == "rect" })
				if y := num(t, bg[0], "y"); y <= prevY {
					t.Errorf("vCPU %d row at y=%v, not below the previous one at %v", i, y, prevY)
				} else {
					prevY = y
				}
				marks := find(r, func(e *html.Node) bool { return e.Data == "circle" || hasClass(e, "on") || hasClass(e, "boot") })
				if len(marks) == 0 {
					t.Errorf("vCPU %d row shows nothing", i)
				}
			}

			// The phase bands: one per phase with a start, durations as
			// in the JSON.
			bands := byClass(byID(doc, "phases"), "g", "phase")
			if len(bands) != len(s.PhasesNS) {
				t.Errorf("%d phase bands for %d phases", len(bands), len(s.PhasesNS))
			}
			for _, b := range bands {
				name, _ := attr(b, "data-phase")
				d := int64(num(t, b, "data-end-ns") - num(t, b, "data-start-ns"))
				if want := s.PhasesNS[name]; d < want-1 || d > want+1 {
					t.Errorf("phase %s spans %d ns, want %d", name, d, want)
				}
				if !strings.Contains(text(b), msOf(s.PhasesNS[name])) {
					t.Errorf("phase %s label %q lacks %s", name, text(b), msOf(s.PhasesNS[name]))
				}
			}
			if len(byClass(byID(doc, "phases"), "g", "mark")) != len(s.MarksNS)+len(s.ConsoleNS) {
				t.Errorf("marks drawn: %d, want %d", len(byClass(byID(doc, "phases"), "g", "mark")), len(s.MarksNS)+len(s.ConsoleNS))
			}

			// The heat map: every non-zero bucket is a cell with its count.
			cells := byClass(byID(doc, "heat"), "rect", "cell")
			var want, got uint64
			nonzero := 0
			for _, row := range s.ExitHeat.Counts {
				for _, c := range row {
					want += c
					if c > 0 {
						nonzero++
					}
				}
			}
			for _, c := range cells {
				v, b, k := int(num(t, c, "data-vcpu")), int(num(t, c, "data-bucket")), uint64(num(t, c, "data-count"))
				if s.ExitHeat.Counts[v][b] != k {
					t.Errorf("cell vCPU %d bucket %d: %d exits, JSON has %d", v, b, k, s.ExitHeat.Counts[v][b])
				}
				got += k
			}
			if len(cells) != nonzero || got != want {
				t.Errorf("heat map: %d cells with %d exits, want %d cells with %d", len(cells), got, nonzero, want)
			}

			// The profile: a bar per total row of each used source.
			var rowsWant []exits.Row
			for _, r := range s.Profile.Rows {
				if r.VCPU == exits.TotalVCPU {
					rowsWant = append(rowsWant, r)
				}
			}
			bars := byClass(byID(doc, "profile"), "g", "reason")
			if len(bars) != len(rowsWant) {
				t.Fatalf("%d profile bars, want %d", len(bars), len(rowsWant))
			}
			for _, b := range bars {
				reason, _ := attr(b, "data-reason")
				i := slices.IndexFunc(rowsWant, func(r exits.Row) bool { return r.Reason == reason })
				if i < 0 {
					t.Errorf("bar for %q, which the profile does not have", reason)
					continue
				}
				if c := uint64(num(t, b, "data-count")); c != rowsWant[i].Count {
					t.Errorf("%s: %d exits drawn, %d in the JSON", reason, c, rowsWant[i].Count)
				}
				if !strings.Contains(text(b), msOf(int64(rowsWant[i].TimeNS))) {
					t.Errorf("%s label %q lacks its time %s", reason, text(b), msOf(int64(rowsWant[i].TimeNS)))
				}
			}

			// Breakdown rows: under their reason, adding up to it.
			for _, r := range rowsWant {
				var sum uint64
				for _, part := range byClass(byID(doc, "profile"), "g", "part") {
					if v, _ := attr(part, "data-parent"); v == r.Reason {
						sum += uint64(num(t, part, "data-count"))
					}
				}
				var want uint64
				for _, b := range r.Breakdown {
					want += b.Samples
				}
				if sum != want {
					t.Errorf("%s: breakdown rows drawn add up to %d, the JSON's to %d", r.Reason, sum, want)
				}
				if r.Percentiles != nil {
					for _, b := range bars {
						if v, _ := attr(b, "data-reason"); v == r.Reason && !strings.Contains(tooltip(b), "p99 "+msOf(int64(r.Percentiles.Guest.P99))) {
							t.Errorf("%s tooltip %q lacks its guest p99", r.Reason, tooltip(b))
						}
					}
				}
			}

			// Exits by phase and guest code, with the JSON's numbers.
			for _, ph := range s.Profile.ByPhase {
				var want uint64
				for _, r := range ph.Rows {
					want += r.Samples
				}
				got := find(byID(doc, "profile"), func(e *html.Node) bool { v, _ := attr(e, "data-phase"); return hasClass(e, "byphase") && v == ph.Phase })
				if len(got) != 1 || uint64(num(t, got[0], "data-total")) != want {
					t.Errorf("phase %s: %d blocks, want one with %d exits", ph.Phase, len(got), want)
				}
			}
			for _, r := range s.Profile.GuestCode.Reasons {
				got := find(byID(doc, "profile"), func(e *html.Node) bool { v, _ := attr(e, "data-reason"); return hasClass(e, "code") && v == r.Reason })
				if len(got) != 1 || !strings.Contains(text(got[0]), r.Functions[0].Function) || !strings.Contains(text(got[0]), fmt.Sprintf("%d exits", r.Functions[0].Samples)) {
					t.Errorf("guest code of %s not shown", r.Reason)
				}
			}

			// Strings from the result are text, never markup.
			page := text(doc)
			if !strings.Contains(page, s.Config.Cmdline) {
				t.Errorf("the command line %q is not shown as text", s.Config.Cmdline)
			}
			for _, f := range []string{"kernel format" + s.Config.KernelFormat, "kernel build tree" + s.Config.KernelTree} {
				if !strings.Contains(page, f) {
					t.Errorf("the configuration does not show %q", f)
				}
			}
			if len(find(doc, func(e *html.Node) bool { return e.Data == "b" })) != 0 {
				t.Error("markup from the command line reached the page")
			}
		})
	}
}

func TestBenchReportStructure(t *testing.T) {
	r := synthBench(t, 5)
	var b bytes.Buffer
	if err := WriteBench(&b, r, "bench.json"); err != nil {
		t.Fatal(err)
	}
	doc := parse(t, b.Bytes())
	checkAxes(t, doc)
	checkSelfContained(t, doc)
	an := &r.Analysis
	figs := find(byID(doc, "phases"), func(e *html.Node) bool { return e.Data == "svg" && hasClass(e, "fig") })
	if len(figs) != len(an.Phases) {
		t.Fatalf("%d phase figures for %d phases", len(figs), len(an.Phases))
	}
	regressions := 0
	for i, p := range an.Phases {
		fig := figs[i]
		// Every run that observed the phase is one mark, with its value.
		want := map[int]int64{}
		for _, run := range r.Runs {
			if v, ok := run.PhasesNS[p]; ok {
				want[run.Seq] = v
			}
		}
		pts := byClass(fig, "circle", "run")
		if len(pts) != len(want) {
			t.Errorf("%s: %d marks for %d runs", p, len(pts), len(want))
		}
		seen := map[int]bool{}
		for _, pt := range pts {
			seq := int(num(t, pt, "data-seq"))
			if seen[seq] {
				t.Errorf("%s: run #%d drawn twice", p, seq)
			}
			seen[seq] = true
			if ns := int64(num(t, pt, "data-ns")); ns != want[seq] {
				t.Errorf("%s run #%d: %d ns drawn, %d in the JSON", p, seq, ns, want[seq])
			}
			if tip := tooltip(pt); !strings.Contains(tip, fmt.Sprintf("#%d", seq)) || !strings.Contains(tip, msOf(want[seq])) {
				t.Errorf("%s run #%d tooltip %q", p, seq, tip)
			}
		}
		// Every cell: its median, and the delta and p next to it.
		for _, row := range byClass(fig, "g", "brow") {
			cpus := int(num(t, row, "data-cpus"))
			v, _ := attr(row, "data-variant")
			c, ok := an.Cell(cpus, v, p)
			if !ok {
				continue
			}
			if m := num(t, row, "data-median-ns"); int64(m) != int64(c.Median+0.5) && int64(m) != int64(c.Median) {
				t.Errorf("%s %d/%s: median %v drawn, %v in the JSON", p, cpus, v, m, c.Median)
			}
			if !strings.Contains(text(row), msOf(int64(c.Median+0.5))) && !strings.Contains(text(row), msOf(int64(c.Median))) {
				t.Errorf("%s %d/%s: label %q lacks the median", p, cpus, v, text(row))
			}
			_, marked := attr(row, "data-regression")
			if c.Delta == nil {
				if _, has := attr(row, "data-delta"); has {
					t.Errorf("%s %d/%s: a delta for the baseline", p, cpus, v)
				}
				continue
			}
			if d, _ := attr(row, "data-delta"); d != fmt.Sprintf("%+.1f%%", c.Delta.Pct) || !strings.Contains(text(row), d) {
				t.Errorf("%s %d/%s: delta %q, JSON %+.1f%%", p, cpus, v, d, c.Delta.Pct)
			}
			if pv, _ := attr(row, "data-p"); pv != fmt.Sprintf("p=%.3g", c.Delta.P) || !strings.Contains(text(row), pv) {
				t.Errorf("%s %d/%s: p %q, JSON %.3g", p, cpus, v, pv, c.Delta.P)
			}
			if marked != c.Delta.Regression {
				t.Errorf("%s %d/%s: marked as regression %v, JSON says %v", p, cpus, v, marked, c.Delta.Regression)
			}
			if marked {
				regressions++
			}
		}
	}
	if regressions != len(an.Regressions) || regressions == 0 {
		t.Errorf("%d regressions marked, the analysis has %d (the synthetic B is 8%% slower: want some)", regressions, len(an.Regressions))
	}
	if diffs := byClass(doc, "tr", "diff"); len(diffs) != len(bench.ProfileDiffs(r, an.Baseline, an.Alpha, an.ProfileAll, 8)) {
		t.Errorf("%d exit-profile difference rows, want %d", len(diffs), len(bench.ProfileDiffs(r, an.Baseline, an.Alpha, an.ProfileAll, 8)))
	}
	if !strings.Contains(text(doc), "slow <init>") || len(find(doc, func(e *html.Node) bool { return e.Data == "init" })) > 0 {
		t.Error("the variant label is not shown as text")
	}
}

// TestLoadDetects: a run result and a bench report are told apart and
// render; the round trip through JSON keeps what the page shows.
func TestLoadDetects(t *testing.T) {
	s := synthRun(t, 4, 9)
	js, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	in, err := Load(js)
	if err != nil || in.Run == nil || in.Bench != nil {
		t.Fatalf("run result: %+v, %v", in, err)
	}
	var a, b bytes.Buffer
	if err := WriteRun(&a, s, "x"); err != nil {
		t.Fatal(err)
	}
	if err := Write(&b, in, "x"); err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() {
		t.Error("the run report differs after a JSON round trip")
	}
	var bj bytes.Buffer
	if err := bench.WriteJSON(&bj, synthBench(t, 1)); err != nil {
		t.Fatal(err)
	}
	in, err = Load(bj.Bytes())
	if err != nil || in.Bench == nil || in.Run != nil {
		t.Fatalf("bench report: %+v, %v", in, err)
	}
}

func TestLoadErrors(t *testing.T) {
	good, _ := json.Marshal(synthRun(t, 2, 1))
	var bj bytes.Buffer
	bench.WriteJSON(&bj, synthBench(t, 1))
	for _, c := range []struct {
		name, data, want string
	}{
		{"empty", "", "empty file"},
		{"truncated run", string(good[:len(good)/2]), "ends early"},
		{"truncated bench", bj.String()[:bj.Len()/3], "ends early"},
		{"garbage", "{\"phases_ns\": {}, x}", "line 1, column"},
		{"not an object", "[1,2,3]", "JSON"},
		{"other JSON", `{"hello": 1}`, "neither an mvm run"},
		{"other format", `{"format": "other/1"}`, "not an mvm bench report"},
		{"wrong type", `{"phases_ns": {}, "cpus": "four"}`, `"cpus"`},
		{"arrays disagree", `{"phases_ns": {}, "cpus": 2, "cpu_on_ns": [-1], "entered_ns": [1, 2]}`, "entries for 2 vCPUs"},
		{"too many vCPUs", `{"phases_ns": {}, "cpus": 100000}`, "1 to 512"},
		{"bad heat", `{"phases_ns": {}, "cpus": 1, "cpu_on_ns": [-1], "entered_ns": [1], "exit_heat": {"bucket_ns": 0, "counts": [[1]]}}`, "bucket_ns"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load([]byte(c.data))
			if err == nil {
				t.Fatal("no error")
			}
			if strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q: want one line mentioning %q", err, c.want)
			}
		})
	}
}

// FuzzLoadRender: whatever a file holds, Load either refuses it with an
// error or the report renders; it never panics.
func FuzzLoadRender(f *testing.F) {
	good, _ := json.Marshal(synthRun(f, 3, 1))
	var bj bytes.Buffer
	bench.WriteJSON(&bj, synthBench(f, 1))
	f.Add(good)
	f.Add(bj.Bytes())
	f.Add([]byte(`{"phases_ns": {"total": -5}, "cpus": 1, "cpu_on_ns": [9e18], "entered_ns": [-9e18]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := Load(data)
		if err != nil {
			return
		}
		var b bytes.Buffer
		if err := Write(&b, in, "fuzz"); err != nil {
			t.Fatalf("loaded but did not render: %v", err)
		}
	})
}
