package bench

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
)

// What a CI system reads of a JUnit file, decoded independently of the
// writer's own types.
type readSuites struct {
	XMLName  xml.Name `xml:"testsuites"`
	Tests    int      `xml:"tests,attr"`
	Failures int      `xml:"failures,attr"`
	Errors   int      `xml:"errors,attr"`
	Suites   []struct {
		Name     string `xml:"name,attr"`
		Tests    int    `xml:"tests,attr"`
		Failures int    `xml:"failures,attr"`
		Errors   int    `xml:"errors,attr"`
		Props    []struct {
			Name  string `xml:"name,attr"`
			Value string `xml:"value,attr"`
		} `xml:"properties>property"`
		Cases []struct {
			Classname string `xml:"classname,attr"`
			Name      string `xml:"name,attr"`
			Time      string `xml:"time,attr"`
			Failure   *struct {
				Message string `xml:"message,attr"`
			} `xml:"failure"`
			Error *struct {
				Message string `xml:"message,attr"`
			} `xml:"error"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

func TestWriteJUnit(t *testing.T) {
	r := synthReport(t, 10)
	// A label with XML's special characters must survive as data.
	r.Config.Variants[1].Settings.Label = `serial <&"'>`
	var b bytes.Buffer
	if err := WriteJUnit(&b, r); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", b.String())
	var got readSuites
	if err := xml.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("not XML a CI system can read: %v", err)
	}
	an := &r.Analysis
	if len(an.Regressions) == 0 || len(an.Failed) != 1 {
		t.Fatalf("the synthetic report should have regressions and one failed run: %d, %d", len(an.Regressions), len(an.Failed))
	}
	if len(got.Suites) != len(an.Rows) {
		t.Fatalf("%d test suites, want one per vCPU count %v", len(got.Suites), an.Rows)
	}
	wantFail := map[string]bool{}
	for _, g := range an.Regressions {
		wantFail[fmt.Sprintf("mvm-bench.%s/%s %s", g.Variant, g.Phase, vcpus(g.CPUs))] = true
	}
	tests, failures, errors := 0, 0, 0
	label := false
	for i, s := range got.Suites {
		n := an.Rows[i]
		if !strings.Contains(s.Name, vcpus(n)) {
			t.Errorf("suite %d is %q, want it named for %s", i, s.Name, vcpus(n))
		}
		f, e := 0, 0
		for _, c := range s.Cases {
			key := c.Classname + "/" + c.Name
			switch {
			case c.Failure != nil:
				f++
				if !wantFail[key] {
					t.Errorf("%s failed (%s), but the regression check did not flag it", key, c.Failure.Message)
				}
				delete(wantFail, key)
				if !strings.Contains(c.Failure.Message, "beyond 10%") {
					t.Errorf("%s: failure message %q does not give the threshold", key, c.Failure.Message)
				}
			case c.Error != nil:
				e++
				if n != 8 || c.Classname != "mvm-bench.B" || !strings.Contains(c.Error.Message, "vCPU 0 fault") {
					t.Errorf("error case %s: %q, want only B's failed 8-vCPU run", key, c.Error.Message)
				}
			default:
				// A passed case's time is its cell's median in seconds.
				phase, _, _ := strings.Cut(c.Name, " ")
				cell, ok := an.Cell(n, strings.TrimPrefix(c.Classname, "mvm-bench."), phase)
				sec, err := strconv.ParseFloat(c.Time, 64)
				if !ok || err != nil || math.Abs(sec-cell.Median/1e9) > 1e-6 {
					t.Errorf("%s: time %q, want the median %v s", key, c.Time, cell.Median/1e9)
				}
			}
		}
		if s.Tests != len(s.Cases) || s.Failures != f || s.Errors != e {
			t.Errorf("suite %q counts tests=%d failures=%d errors=%d, its cases say %d, %d, %d", s.Name, s.Tests, s.Failures, s.Errors, len(s.Cases), f, e)
		}
		cells := 0
		for _, c := range an.Cells {
			if c.CPUs == n {
				cells++
			}
		}
		if len(s.Cases) != cells+e {
			t.Errorf("suite %q: %d cases, want one per cell (%d) and per failed run (%d)", s.Name, len(s.Cases), cells, e)
		}
		for _, p := range s.Props {
			if strings.Contains(p.Value, `serial <&"'>`) {
				label = true
			}
		}
		tests, failures, errors = tests+s.Tests, failures+f, errors+e
	}
	if len(wantFail) != 0 {
		t.Errorf("regressions without a failed test case: %v", wantFail)
	}
	if got.Tests != tests || got.Failures != failures || got.Errors != errors {
		t.Errorf("testsuites counts %d/%d/%d, suites sum to %d/%d/%d", got.Tests, got.Failures, got.Errors, tests, failures, errors)
	}
	if !label {
		t.Error("the variant's label with <&\"'> did not come back from the XML")
	}
}

// Without --fail-on-regression nothing fails: a slower variant is news,
// not a failed test.
func TestWriteJUnitNoThreshold(t *testing.T) {
	r := synthReport(t, 10)
	if err := r.Reanalyze(Options{Alpha: 0.05}); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteJUnit(&b, r); err != nil {
		t.Fatal(err)
	}
	var got readSuites
	if err := xml.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Failures != 0 || got.Errors != 1 || got.Tests == 0 {
		t.Errorf("tests %d, failures %d, errors %d; want no failures and the one failed run", got.Tests, got.Failures, got.Errors)
	}
}
