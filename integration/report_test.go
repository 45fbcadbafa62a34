//go:build linux && arm64

package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/mvm-dev/mvm/bench"
	"github.com/mvm-dev/mvm/runsummary"
)

// reportFixture copies a result into $MVM_LAB_OUT, when set: the lab
// brings that directory back to the host (lab -out), where
// report/browser_test.go renders the reports in a real browser.
func reportFixture(t *testing.T, src, name string) {
	t.Helper()
	dir := os.Getenv("MVM_LAB_OUT")
	if dir == "" {
		return
	}
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
		t.Fatalf("report fixture: %v", err)
	}
}

// checkRunReport: a real run's result JSON has the timeline, heat map,
// profile, configuration and host a report needs, and the page mvm run
// --report wrote has one row per vCPU with that vCPU's entry time.
func checkRunReport(t *testing.T, res, page string, cpus int) {
	t.Helper()
	data, err := os.ReadFile(res)
	if err != nil {
		t.Fatal(err)
	}
	var s runsummary.Summary
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatalf("%s: %v", res, err)
	}
	if s.CPUs != cpus || len(s.ResetNS) != cpus || s.Config == nil || s.Config.CPUs != cpus || s.Host == nil || s.Host.Arch != "arm64" {
		t.Errorf("result: %d vCPUs, %d reset times, config %+v, host %+v", s.CPUs, len(s.ResetNS), s.Config, s.Host)
	}
	for i := 1; i < min(cpus, len(s.ResetNS), len(s.EnteredNS), len(s.CPUOnNS)); i++ {
		// CPU_ON serviced, then the target's thread took it, then entered.
		if !(s.CPUOnNS[i] >= 0 && s.CPUOnNS[i] <= s.ResetNS[i] && s.ResetNS[i] <= s.EnteredNS[i]) {
			t.Errorf("vCPU %d: CPU_ON %d, reset %d, entered %d ns: not in order", i, s.CPUOnNS[i], s.ResetNS[i], s.EnteredNS[i])
		}
	}
	if s.ExitHeat == nil || len(s.ExitHeat.Counts) != cpus {
		t.Errorf("exit heat map: %+v", s.ExitHeat)
	} else {
		// Every secondary made exits (its PSCI calls, its console line).
		for i, row := range s.ExitHeat.Counts {
			var n uint64
			for _, c := range row {
				n += c
			}
			if n == 0 {
				t.Errorf("exit heat map: no exits for vCPU %d", i)
			}
		}
	}
	if s.Profile == nil {
		t.Error("no profile in the result")
	}

	rows := byClass(parsePage(t, page), "g", "vcpu")
	if len(rows) != cpus {
		t.Fatalf("the report has %d vCPU rows for %d vCPUs", len(rows), cpus)
	}
	for i, r := range rows {
		for _, a := range r.Attr {
			if a.Key == "data-entered-ns" && a.Val != strconv.FormatInt(s.EnteredNS[i], 10) {
				t.Errorf("row %d shows entry %s ns, the JSON %d", i, a.Val, s.EnteredNS[i])
			}
		}
	}
	st, _ := os.Stat(page)
	t.Logf("run report of %d vCPUs: %d bytes (result JSON %d bytes)", cpus, st.Size(), len(data))
	reportFixture(t, res, "smp"+strconv.Itoa(cpus)+".json")
}

func parsePage(t *testing.T, page string) *html.Node {
	t.Helper()
	f, err := os.Open(page)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := html.Parse(f)
	if err != nil {
		t.Fatalf("%s: %v", page, err)
	}
	return doc
}

// byClass returns the <tag> elements under n with class c.
func byClass(n *html.Node, tag, c string) []*html.Node {
	var out []*html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == tag && slices.ContainsFunc(n.Attr, func(a html.Attribute) bool {
			return a.Key == "class" && slices.Contains(strings.Fields(a.Val), c)
		}) {
			out = append(out, n)
		}
		for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
			walk(ch)
		}
	}
	walk(n)
	return out
}

// checkBenchReport: mvm bench --html (from the saved runs) draws every run
// that observed a phase as one mark.
func checkBenchReport(t *testing.T, js string) {
	t.Helper()
	page := filepath.Join(t.TempDir(), "bench.html")
	r := mvm(t, time.Minute, "bench", "--from", js, "--html", page, "--out", os.DevNull)
	if r.code != 0 && r.code != 1 { // 1: the regressions the test expects
		t.Fatalf("mvm bench --from --html: exit %d\n%s", r.code, r.stderr)
	}
	rep, err := bench.ReadJSONFile(js)
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, p := range rep.Analysis.Phases {
		for _, run := range rep.Runs {
			if _, ok := run.PhasesNS[p]; ok {
				want++
			}
		}
	}
	if got := len(byClass(parsePage(t, page), "circle", "run")); got != want || want == 0 {
		t.Errorf("the bench report has %d run marks, want %d", got, want)
	}
}
