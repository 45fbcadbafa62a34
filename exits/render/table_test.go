package render_test

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/mvm-dev/mvm/exits"
	"github.com/mvm-dev/mvm/exits/exitstest"
	"github.com/mvm-dev/mvm/exits/render"
)

func TestTable(t *testing.T) {
	var buf bytes.Buffer
	if err := render.Table(&buf, exitstest.Report(), render.Options{}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"Exit profile over 12µs",
		"userspace   used",
		"tracepoint  used",
		"VM exits from tracepoints, all vCPUs (arm64)",
		"Time = guest time before the exit, kvm_entry -> kvm_exit (perf kvm stat on arm64)",
		"Userspace exits, all vCPUs.",
		"KVM stats of all vCPUs (sum)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	header := "Event name Samples Sample% Time (ns) Time% Mean Time (ns) Min (ns) Max (ns) Handle mean (ns)"
	if n := strings.Count(strings.Join(strings.Fields(out), " "), header); n != 2 {
		t.Errorf("%d table headers, want 2:\n%s", n, out)
	}
	if strings.Contains(out, " \n") {
		t.Errorf("trailing blanks:\n%q", out)
	}
	if strings.Contains(out, "vCPU 1") {
		t.Errorf("per-vCPU table without PerVCPU:\n%s", out)
	}
	// Sorted by samples: DABT_LOW (2) before HVC64 and IRQ (1 each).
	if i, j := strings.Index(out, "DABT_LOW"), strings.Index(out, "HVC64"); i < 0 || j < i {
		t.Errorf("not sorted by samples:\n%s", out)
	}
	// Userspace: MMIO/uart 4 of 7 samples.
	if !strings.Contains(out, "MMIO/uart                   4   57.14%") {
		t.Errorf("uart row:\n%s", out)
	}
	if testing.Verbose() {
		os.Stdout.WriteString(out)
	}

	buf.Reset()
	rep := exitstest.Report()
	rep.SetSource(exits.SourceTracepoint, "", errors.New("not root"))
	if err := render.Table(&buf, rep, render.Options{PerVCPU: true}); err != nil {
		t.Fatal(err)
	}
	out = buf.String()
	for _, want := range []string{"Userspace exits, vCPU 0.", "Userspace exits, vCPU 1.", "KVM stats of vCPU 1", "tracepoint  unavailable  not root"} {
		if !strings.Contains(out, want) {
			t.Errorf("per-vCPU table lacks %q:\n%s", want, out)
		}
	}
	if testing.Verbose() {
		os.Stdout.WriteString(out)
	}
}

func TestTableWriteError(t *testing.T) {
	if err := render.Table(failWriter{}, exitstest.Report(), render.Options{PerVCPU: true}); err == nil {
		t.Error("table write error lost")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// A group of KVM stats none of which changed gets one line, not a header
// over an empty table.
func TestTableUnchangedStats(t *testing.T) {
	rep := exitstest.Report()
	rep.KVMStats = append(rep.KVMStats, exits.StatRow{VCPU: exits.VMVCPU, Name: "remote_tlb_flush", Type: "cumulative", Value: 7})
	var buf bytes.Buffer
	if err := render.Table(&buf, rep, render.Options{}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, "KVM stats of the VM: none changed over the run.") {
		t.Errorf("no 'none changed' line for the VM's stats:\n%s", out)
	}
	if strings.Contains(out, "KVM stats of the VM, change over the run") || strings.Contains(out, "remote_tlb_flush") {
		t.Errorf("header or unchanged row for the VM's stats:\n%s", out)
	}
	if !strings.Contains(out, "KVM stats of all vCPUs (sum), change over the run") {
		t.Errorf("the vCPUs' changed stats lost their table:\n%s", out)
	}
}

// A sampled profile's tracepoint table says so in its title and marks
// each row's estimate; a measured one has neither.
func TestTableEstimated(t *testing.T) {
	rep := exitstest.Report()
	var plain bytes.Buffer
	if err := render.Table(&plain, rep, render.Options{}); err != nil {
		t.Fatal(err)
	}
	rep.Sampling = &exits.Sampling{Windows: 7, SampledExits: 40, ExactExits: 1000}
	n := 0
	for i := range rep.Rows {
		if rep.Rows[i].Source == exits.SourceTracepoint {
			rep.Rows[i].Estimate = exits.EstimateCountTimes
			if rep.Rows[i].Reason == "HVC64" {
				rep.Rows[i].Estimate = exits.EstimateTimes
			}
			n++
		}
	}
	if n == 0 {
		t.Fatal("the sample report has no tracepoint rows")
	}
	var buf bytes.Buffer
	if err := render.Table(&buf, rep, render.Options{}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, "Estimated from 7 sampled windows (40 of 1000 exits seen)") {
		t.Errorf("no sampling line in the title:\n%s", out)
	}
	var hvc, dabt string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == "HVC64" {
			hvc = f[len(f)-1]
		}
		if len(f) > 0 && f[0] == "DABT_LOW" {
			dabt = f[len(f)-1]
		}
	}
	if hvc != exits.EstimateTimes || dabt != exits.EstimateCountTimes {
		t.Errorf("Estimated column: HVC64 %q, DABT_LOW %q; want %q, %q:\n%s", hvc, dabt, exits.EstimateTimes, exits.EstimateCountTimes, out)
	}
	if strings.Contains(plain.String(), "Estimated") {
		t.Errorf("a measured profile mentions estimates:\n%s", plain.String())
	}
	if strings.Contains(out, " \n") {
		t.Errorf("trailing blanks:\n%q", out)
	}
}

// TestTableReordered: records the aggregation could not order are said
// under the tables, and nothing is said when there are none.
func TestTableReordered(t *testing.T) {
	var buf bytes.Buffer
	rep := exitstest.Report()
	if err := render.Table(&buf, rep, render.Options{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "out of order") {
		t.Errorf("a report without reordered records mentions them:\n%s", buf.String())
	}
	buf.Reset()
	rep.TraceReordered = 3
	if err := render.Table(&buf, rep, render.Options{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "3 tracepoint records arrived out of order") {
		t.Errorf("reordered records not said:\n%s", buf.String())
	}
}
