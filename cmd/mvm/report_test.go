package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mvm-dev/mvm/bench"
	"github.com/mvm-dev/mvm/runsummary"
)

func runResultJSON(t *testing.T) []byte {
	t.Helper()
	s := runsummary.Summary{Exit: runsummary.ExitPowerOff, PSCI: runsummary.PSCIUser, CPUs: 2,
		PhasesNS: map[string]int64{runsummary.PhaseVMMSetup: 5e6, runsummary.PhaseTotal: 9e6, runsummary.PhaseBootToSMP: 1e6, runsummary.PhaseSecondaries: 2e5},
		CPUOnNS:  []int64{-1, 6e6}, EnteredNS: []int64{5e6, 62e5}, ResetNS: []int64{49e5, 61e5},
		ExitHeat: &runsummary.ExitHeat{BucketNS: 1e6, Counts: [][]uint64{{0, 0, 0, 0, 0, 3, 9}, {0, 0, 0, 0, 0, 0, 4}}}}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func benchReportJSON(t *testing.T) []byte {
	t.Helper()
	vs := []bench.Variant{{Name: "A", Settings: bench.Settings{Kernel: "k", CPUs: []int{1}}}}
	var runs []bench.Run
	for i := 1; i <= 3; i++ {
		runs = append(runs, bench.Run{Seq: i, Variant: "A", CPUs: 1, Status: bench.StatusOK, PhasesNS: map[string]int64{runsummary.PhaseTotal: int64(i) * 1e8}})
	}
	an, err := bench.Analyze(vs, runs, bench.Options{Alpha: 0.05, Baseline: "A"})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := bench.WriteJSON(&b, &bench.Report{Format: bench.ReportFormat, Config: bench.Config{Variants: vs}, Runs: runs, Analysis: an}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestReportCommand: mvm report renders either kind of JSON, next to the
// input by default, to -o, or to stdout.
func TestReportCommand(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "run.json"), runResultJSON(t), 0o644)
	os.WriteFile(filepath.Join(dir, "bench.json"), benchReportJSON(t), 0o644)
	for _, c := range []struct {
		args      []string
		out, want string
	}{
		{[]string{"report", "run.json"}, "run.html", "mvm run report"},
		{[]string{"report", "bench.json", "-o", "b.html"}, "b.html", "mvm bench report"},
	} {
		r := mvm(t, dir, c.args...)
		if r.code != 0 || r.stderr != "" {
			t.Fatalf("mvm %v: exit %d, stderr %q", c.args, r.code, r.stderr)
		}
		page, err := os.ReadFile(filepath.Join(dir, c.out))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(page, []byte("<!DOCTYPE html>")) || !bytes.Contains(page, []byte(c.want)) {
			t.Errorf("mvm %v: %s is not a %s", c.args, c.out, c.want)
		}
	}
	r := mvm(t, dir, "report", "run.json", "-o", "-")
	if r.code != 0 || !strings.Contains(r.stdout, "vCPU bring-up") {
		t.Errorf("-o -: exit %d, %d bytes on stdout", r.code, len(r.stdout))
	}
}

// TestReportBadInput: a malformed, truncated, foreign or missing file is
// bad input: one line on stderr, exit status 2, and no page left behind.
func TestReportBadInput(t *testing.T) {
	good := runResultJSON(t)
	for _, c := range []struct {
		name, data, want string
	}{
		{"truncated", string(good[:len(good)-20]), "ends early"},
		{"malformed", "{\"phases_ns\": {\"total\": 1,,}}", "not valid JSON at line 1"},
		{"empty", "", "empty file"},
		{"foreign", `{"name": "not mvm"}`, "neither an mvm run"},
		{"truncated bench", string(benchReportJSON(t)[:200]), "ends early"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "in.json"), []byte(c.data), 0o644)
			r := mvm(t, dir, "report", "in.json")
			checkOneLine(t, r, 2, c.want)
			if ents, _ := os.ReadDir(dir); len(ents) != 1 {
				t.Errorf("files left behind: %v", ents)
			}
		})
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"missing", []string{"report", "missing.json"}, "missing.json does not exist"},
		{"a directory", []string{"report", "."}, ". is a directory"},
		{"no argument", []string{"report"}, "give the JSON file to render: mvm report FILE.json"},
		{"two arguments", []string{"report", "a.json", "b.json"}, "one JSON file at a time"},
		{"-o in a missing directory", []string{"report", "in.json", "-o", filepath.Join("nodir", "x.html")}, "-o " + filepath.Join("nodir", "x.html") + ": directory nodir does not exist"},
		{"-o a directory", []string{"report", "in.json", "-o", "."}, "-o .: is a directory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "in.json"), good, 0o644)
			checkOneLine(t, mvm(t, dir, c.args...), 2, c.want)
			if ents, _ := os.ReadDir(dir); len(ents) != 1 {
				t.Errorf("files left behind: %v", ents)
			}
		})
	}
	// The default page next to an input in a directory mvm cannot write
	// to: said before the input is read, and it names -o.
	if os.Getuid() != 0 {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "in.json"), good, 0o644)
		os.Chmod(dir, 0o555)
		defer os.Chmod(dir, 0o755)
		checkOneLine(t, mvm(t, t.TempDir(), "report", filepath.Join(dir, "in.json")), 2, "-o to put it elsewhere")
	}
}

func checkOneLine(t *testing.T, r result, code int, want string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
	if r.code != code || len(lines) != 1 || !strings.HasPrefix(lines[0], "mvm: ") || !strings.Contains(r.stderr, want) {
		t.Errorf("exit %d (want %d), stderr %q (want one 'mvm: ' line with %q)", r.code, code, r.stderr, want)
	}
	if strings.Contains(r.stderr, "goroutine ") {
		t.Errorf("stack trace: %s", r.stderr)
	}
}
