package exits

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// syntheticReport builds a small two-vCPU arm64 report from every source.
func syntheticReport(t testing.TB, perVCPU bool) *Report {
	s := NewSchema()
	uart, _ := s.Register(KindMMIO, "uart")
	cpuOn, _ := s.Register(KindHypercall, "CPU_ON")
	off, _ := s.Register(KindHypercall, "SYSTEM_OFF")
	r0, r1 := s.NewRecorder(0), s.NewRecorder(1)
	for i := 0; i < 3; i++ {
		r0.Record(uart, 2*time.Microsecond)
	}
	r0.Record(cpuOn, 10*time.Microsecond)
	r0.Record(off, 4*time.Microsecond)
	r1.Record(uart, 6*time.Microsecond)
	r1.Record(KindKey(KindIntr), 1*time.Microsecond)

	a := NewTraceAggregator(Arm64Namer{})
	a.SetVCPU(100, 0)
	a.SetVCPU(101, 1)
	a.Add([]TraceEvent{
		entry(100, 0, 1000), exitEv(100, 0, 3000, 2, 0x24), entry(100, 0, 3500),
		exitEv(100, 0, 4500, 2, 0x24), entry(100, 0, 5000),
		exitEv(100, 0, 9000, 2, 0x16), entry(100, 0, 9100),
		entry(101, 1, 2000), exitEv(101, 1, 8000, 0, 0), entry(101, 1, 8200),
	})

	ds := func(exits, waitNS uint64) []StatDelta {
		blob := buildStats("kvm-1/vcpu-0", 48, vcpuStats(0, 0, 0, []uint64{0, 0}))
		l, err := ParseStats(bytes.NewReader(blob))
		if err != nil {
			t.Fatal(err)
		}
		before, _ := l.Read(bytes.NewReader(blob))
		after, _ := l.Read(bytes.NewReader(buildStats("kvm-1/vcpu-0", 48, vcpuStats(exits, 0, waitNS, []uint64{0, 1}))))
		d, err := Delta(before, after)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	stats := append(StatRows("0", ds(4, 2500)), StatRows("1", ds(1, 0))...)
	stats = append(stats, TotalStatRows(stats)...)

	rep := &Report{DurationNS: 12_000, PerVCPU: perVCPU}
	rep.AddUserspace([]RecorderSnapshot{r0.Snapshot(), r1.Snapshot()})
	rep.AddKVMStats(stats)
	rep.AddTracepoint(Arm64Namer{}, a.Snapshot())
	return rep
}

func TestReportTable(t *testing.T) {
	var buf bytes.Buffer
	if err := syntheticReport(t, false).WriteTable(&buf); err != nil {
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
	if !strings.Contains(out, "MMIO/uart        4   57.14%") {
		t.Errorf("uart row:\n%s", out)
	}
	if testing.Verbose() {
		os.Stdout.WriteString(out)
	}

	buf.Reset()
	rep := syntheticReport(t, true)
	rep.SetSource(SourceTracepoint, "", errors.New("not root"))
	if err := rep.WriteTable(&buf); err != nil {
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

func TestReportJSON(t *testing.T) {
	var buf bytes.Buffer
	if err := syntheticReport(t, false).WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Arch     string `json:"arch"`
		PerfTime string `json:"perf_time"`
		Sources  []struct {
			Name string `json:"name"`
			Used bool   `json:"used"`
		} `json:"sources"`
		Rows []map[string]any `json:"rows"`
		KVM  []map[string]any `json:"kvm_stats"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Arch != "arm64" || doc.PerfTime != "guest" || len(doc.Sources) != 3 {
		t.Errorf("header %+v", doc)
	}
	for _, r := range doc.Rows {
		for _, f := range []string{"source", "vcpu", "reason", "count", "time_ns", "handle_ns"} {
			if _, ok := r[f]; !ok {
				t.Errorf("row lacks %q: %v", f, r)
			}
		}
	}
	var found bool
	for _, r := range doc.Rows {
		if r["source"] == SourceTracepoint && r["vcpu"] == TotalVCPU && r["reason"] == "DABT_LOW" {
			found = true
			if r["count"] != 2.0 || r["time_ns"] != 3000.0 || r["handle_ns"] != 1000.0 {
				t.Errorf("DABT_LOW total %v", r)
			}
		}
	}
	if !found {
		t.Error("no tracepoint total DABT_LOW row")
	}
	for _, s := range doc.KVM {
		if s["source"] != SourceKVMStats {
			t.Errorf("stat row source %v", s)
		}
	}

	// An empty report is still valid JSON with empty lists.
	buf.Reset()
	if err := (&Report{}).WriteJSON(&buf); err != nil || !strings.Contains(buf.String(), `"rows": []`) {
		t.Errorf("empty report: %v %s", err, buf.String())
	}
}

func TestReportWriteErrors(t *testing.T) {
	rep := syntheticReport(t, true)
	if err := rep.WriteTable(failWriter{}); err == nil {
		t.Error("table write error lost")
	}
	if err := rep.WriteJSON(failWriter{}); err == nil {
		t.Error("JSON write error lost")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// ExampleReport_WriteJSON shows the JSON an exit profile is written as. One
// vCPU made two MMIO exits to the UART and one PSCI SYSTEM_OFF call
// (userspace source), and its thread produced two DABT_LOW kvm_exit samples
// (tracepoint source). Every row names its source, vcpu ("0", ... or
// "total") and reason; count is the number of exits; time_ns the summed
// Time (userspace: handling in the VMM; tracepoint: what perf kvm stat calls
// Time on the architecture, perf_time says which: arm64 "guest", x86
// "handle"); handle_ns the summed exit -> re-entry latency; the *_count
// fields say how many exits each sum covers. kvm_stats rows carry the
// change of each KVM binary statistic over the run. A source that could not
// be used has "used": false and a "reason", e.g. {"name": "tracepoint",
// "used": false, "reason": "tracepoints unavailable: not root and no
// CAP_PERFMON ..."}, and contributes no rows.
func ExampleReport_WriteJSON() {
	s := NewSchema()
	uart, _ := s.Register(KindMMIO, "uart")
	off, _ := s.Register(KindHypercall, "SYSTEM_OFF")
	rec := s.NewRecorder(0)
	rec.Record(uart, 1500*time.Nanosecond)
	rec.Record(uart, 2500*time.Nanosecond)
	rec.Record(off, 9000*time.Nanosecond)

	agg := NewTraceAggregator(Arm64Namer{})
	agg.SetVCPU(4242, 0) // the vCPU thread's TID
	agg.Add([]TraceEvent{
		{Kind: TraceEntry, TID: 4242, Time: 1000},
		{Kind: TraceExit, TID: 4242, Time: 5000, Code: Arm64ExceptionTrap, Sub: 0x24},
		{Kind: TraceEntry, TID: 4242, Time: 5600},
		{Kind: TraceExit, TID: 4242, Time: 6600, Code: Arm64ExceptionTrap, Sub: 0x24},
		{Kind: TraceEntry, TID: 4242, Time: 7000},
	})

	exitsDesc := StatDesc{Name: "exits", Size: 1}
	stats := StatRows("0", []StatDelta{{Desc: exitsDesc, Values: []uint64{2}, After: []uint64{17}}})

	rep := &Report{DurationNS: 20000}
	rep.AddUserspace([]RecorderSnapshot{rec.Snapshot()})
	rep.AddKVMStats(stats)
	rep.AddTracepoint(Arm64Namer{}, agg.Snapshot())
	if err := rep.WriteJSON(os.Stdout); err != nil {
		fmt.Println(err)
	}
	// Output:
	// {
	//   "arch": "arm64",
	//   "perf_time": "guest",
	//   "duration_ns": 20000,
	//   "sources": [
	//     {
	//       "name": "userspace",
	//       "used": true,
	//       "detail": "KVM_RUN returns counted and timed by the vCPU run loops"
	//     },
	//     {
	//       "name": "kvm_stats",
	//       "used": true,
	//       "detail": "KVM_GET_STATS_FD of the VM and every vCPU, deltas over the run"
	//     },
	//     {
	//       "name": "tracepoint",
	//       "used": true,
	//       "detail": "kvm:kvm_entry and kvm:kvm_exit samples of every vCPU thread (perf_event_open)"
	//     }
	//   ],
	//   "rows": [
	//     {
	//       "source": "userspace",
	//       "vcpu": "0",
	//       "reason": "MMIO/uart",
	//       "kind": "MMIO",
	//       "sub": "uart",
	//       "count": 2,
	//       "time_ns": 4000,
	//       "time_count": 2,
	//       "time_mean_ns": 2000,
	//       "time_min_ns": 1500,
	//       "time_max_ns": 2500,
	//       "handle_ns": 4000,
	//       "handle_count": 2,
	//       "handle_mean_ns": 2000,
	//       "handle_min_ns": 1500,
	//       "handle_max_ns": 2500
	//     },
	//     {
	//       "source": "userspace",
	//       "vcpu": "0",
	//       "reason": "HYPERCALL/SYSTEM_OFF",
	//       "kind": "HYPERCALL",
	//       "sub": "SYSTEM_OFF",
	//       "count": 1,
	//       "time_ns": 9000,
	//       "time_count": 1,
	//       "time_mean_ns": 9000,
	//       "time_min_ns": 9000,
	//       "time_max_ns": 9000,
	//       "handle_ns": 9000,
	//       "handle_count": 1,
	//       "handle_mean_ns": 9000,
	//       "handle_min_ns": 9000,
	//       "handle_max_ns": 9000
	//     },
	//     {
	//       "source": "userspace",
	//       "vcpu": "total",
	//       "reason": "MMIO/uart",
	//       "kind": "MMIO",
	//       "sub": "uart",
	//       "count": 2,
	//       "time_ns": 4000,
	//       "time_count": 2,
	//       "time_mean_ns": 2000,
	//       "time_min_ns": 1500,
	//       "time_max_ns": 2500,
	//       "handle_ns": 4000,
	//       "handle_count": 2,
	//       "handle_mean_ns": 2000,
	//       "handle_min_ns": 1500,
	//       "handle_max_ns": 2500
	//     },
	//     {
	//       "source": "userspace",
	//       "vcpu": "total",
	//       "reason": "HYPERCALL/SYSTEM_OFF",
	//       "kind": "HYPERCALL",
	//       "sub": "SYSTEM_OFF",
	//       "count": 1,
	//       "time_ns": 9000,
	//       "time_count": 1,
	//       "time_mean_ns": 9000,
	//       "time_min_ns": 9000,
	//       "time_max_ns": 9000,
	//       "handle_ns": 9000,
	//       "handle_count": 1,
	//       "handle_mean_ns": 9000,
	//       "handle_min_ns": 9000,
	//       "handle_max_ns": 9000
	//     },
	//     {
	//       "source": "tracepoint",
	//       "vcpu": "0",
	//       "reason": "DABT_LOW",
	//       "count": 2,
	//       "time_ns": 5000,
	//       "time_count": 2,
	//       "time_mean_ns": 2500,
	//       "time_min_ns": 1000,
	//       "time_max_ns": 4000,
	//       "handle_ns": 1000,
	//       "handle_count": 2,
	//       "handle_mean_ns": 500,
	//       "handle_min_ns": 400,
	//       "handle_max_ns": 600,
	//       "guest_ns": 5000,
	//       "guest_count": 2
	//     },
	//     {
	//       "source": "tracepoint",
	//       "vcpu": "total",
	//       "reason": "DABT_LOW",
	//       "count": 2,
	//       "time_ns": 5000,
	//       "time_count": 2,
	//       "time_mean_ns": 2500,
	//       "time_min_ns": 1000,
	//       "time_max_ns": 4000,
	//       "handle_ns": 1000,
	//       "handle_count": 2,
	//       "handle_mean_ns": 500,
	//       "handle_min_ns": 400,
	//       "handle_max_ns": 600,
	//       "guest_ns": 5000,
	//       "guest_count": 2
	//     }
	//   ],
	//   "kvm_stats": [
	//     {
	//       "source": "kvm_stats",
	//       "vcpu": "0",
	//       "name": "exits",
	//       "type": "cumulative",
	//       "unit": "none",
	//       "base": 10,
	//       "exponent": 0,
	//       "delta": 2,
	//       "value": 17,
	//       "pretty": "2"
	//     }
	//   ]
	// }
}
