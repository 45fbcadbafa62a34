package bench

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
)

// The JUnit XML report (--junit) is the form CI systems read test results
// in: GitLab's artifacts:reports:junit, Jenkins' junit step, GitHub
// actions that publish test results. The layout is the common subset they
// all take (the Ant JUnit task's: testsuites > testsuite > testcase with
// failure, error or skipped), so that a boot regression shows up in a CI
// system's test view as a failed test with its numbers.
//
// One test suite per vCPU count; in it one test case per variant and phase,
// its time the phase's median in seconds. A case fails when the regression
// check (--fail-on-regression) finds that cell a regression; a run that
// failed is a case of its own with an error, so the CI view shows it too.

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Timestamp  string          `xml:"timestamp,attr,omitempty"`
	Properties []junitProperty `xml:"properties>property,omitempty"`
	Cases      []junitCase     `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Classname string        `xml:"classname,attr"`
	Name      string        `xml:"name,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitProblem `xml:"failure,omitempty"`
	Error     *junitProblem `xml:"error,omitempty"`
	Skipped   *junitProblem `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

// seconds is a JUnit time attribute: seconds with a decimal point.
func seconds(ns float64) string { return fmt.Sprintf("%.6f", ns/1e9) }

// WriteJUnit writes the report as JUnit XML.
func WriteJUnit(w io.Writer, r *Report) error {
	an := &r.Analysis
	out := junitSuites{Name: "mvm bench", Time: seconds(float64(r.Finished.Sub(r.Started)))}
	for _, n := range an.Rows {
		s := junitSuite{
			Name:      fmt.Sprintf("mvm bench %s", vcpus(n)),
			Timestamp: r.Started.UTC().Format("2006-01-02T15:04:05"),
		}
		s.Properties = append(s.Properties,
			junitProperty{"test", an.Test},
			junitProperty{"alpha", fmt.Sprint(an.Alpha)},
			junitProperty{"baseline", an.Baseline},
			junitProperty{"host", strings.TrimSpace(fmt.Sprintf("%s/%s %s, %d CPUs", r.Host.OS, r.Host.Arch, r.Host.Kernel, r.Host.CPUs))})
		if an.FailOnRegression != nil {
			s.Properties = append(s.Properties, junitProperty{"fail_on_regression_pct", fmt.Sprint(*an.FailOnRegression)})
		}
		for _, v := range r.Config.Variants {
			if !hasCPUs(v, n) {
				continue
			}
			desc := v.Describe()
			if v.Settings.Label != "" {
				desc += " (" + v.Settings.Label + ")"
			}
			s.Properties = append(s.Properties, junitProperty{"variant." + v.Name, desc})
			for _, p := range an.Phases {
				if c, ok := an.Cell(n, v.Name, p); ok {
					s.Cases = append(s.Cases, junitCell(r, c))
				}
			}
		}
		for _, f := range an.Failed {
			if f.CPUs != n {
				continue
			}
			name := RunName(Run{Seq: f.Seq, Variant: f.Variant, CPUs: f.CPUs, Warmup: f.Warmup})
			s.Cases = append(s.Cases, junitCase{
				Classname: "mvm-bench." + f.Variant, Name: name, Time: "0",
				Error: &junitProblem{Message: oneLine(f.Error), Type: "run failed", Text: f.Error},
			})
		}
		for _, c := range s.Cases {
			switch {
			case c.Failure != nil:
				s.Failures++
			case c.Error != nil:
				s.Errors++
			}
		}
		var total float64 // the suite's time: its runs' process wall time
		for _, run := range r.Runs {
			if run.CPUs == n {
				total += float64(run.PhasesNS[PhaseProcessWall])
			}
		}
		s.Tests = len(s.Cases)
		s.Time = seconds(total)
		out.Tests += s.Tests
		out.Failures += s.Failures
		out.Errors += s.Errors
		out.Suites = append(out.Suites, s)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return fmt.Errorf("write JUnit report: %w", err)
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("write JUnit report: %w", err)
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return fmt.Errorf("write JUnit report: %w", err)
	}
	return nil
}

// junitCell is one (vCPU count, variant, phase) as a test case: passed
// unless the regression check flagged it.
func junitCell(r *Report, c Cell) junitCase {
	jc := junitCase{
		Classname: "mvm-bench." + c.Variant,
		Name:      fmt.Sprintf("%s %s", c.Phase, vcpus(c.CPUs)),
		Time:      seconds(c.Median),
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: median %s s, min..max %s..%s s, %d runs", PhaseDescription(c.Phase), seconds(c.Median), seconds(c.Min), seconds(c.Max), c.N)
	if d := c.Delta; d != nil {
		fmt.Fprintf(&b, "; vs %s %+.1f%%, p=%s (%s)", d.Baseline, d.Pct, formatP(d.P), r.Analysis.Test)
		if !d.Significant {
			b.WriteString(", not significant")
		}
		if d.Regression {
			msg := fmt.Sprintf("%s, %s, %s: %+.1f%% slower than %s (p=%s), beyond %g%%",
				c.Phase, vcpus(c.CPUs), c.Variant, d.Pct, d.Baseline, formatP(d.P), *r.Analysis.FailOnRegression)
			jc.Failure = &junitProblem{Message: msg, Type: "regression", Text: b.String()}
		}
	}
	jc.SystemOut = b.String()
	return jc
}
