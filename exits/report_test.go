package exits_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mvm-dev/mvm/exits"
	"github.com/mvm-dev/mvm/exits/exitstest"
	"github.com/mvm-dev/mvm/exits/kvmstat"
	"github.com/mvm-dev/mvm/exits/tracepoint"
	"github.com/mvm-dev/mvm/exits/userspace"
)

func TestReportJSON(t *testing.T) {
	var buf bytes.Buffer
	if err := exitstest.Report().WriteJSON(&buf); err != nil {
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
		if r["source"] == exits.SourceTracepoint && r["vcpu"] == exits.TotalVCPU && r["reason"] == "DABT_LOW" {
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
		if s["source"] != exits.SourceKVMStats {
			t.Errorf("stat row source %v", s)
		}
	}

	// An empty report is still valid JSON with empty lists.
	buf.Reset()
	if err := (&exits.Report{}).WriteJSON(&buf); err != nil || !strings.Contains(buf.String(), `"rows": []`) {
		t.Errorf("empty report: %v %s", err, buf.String())
	}
}

func TestReportJSONRoundTrip(t *testing.T) {
	rep := exitstest.Report()
	var buf bytes.Buffer
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := exits.ReadJSON(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rep, back) {
		t.Errorf("round trip changed the report:\n%+v\n%+v", rep, back)
	}
	if _, err := exits.ReadJSON(strings.NewReader("{")); err == nil {
		t.Error("truncated JSON accepted")
	}
}

func TestReportWriteError(t *testing.T) {
	if err := exitstest.Report().WriteJSON(failWriter{}); err == nil {
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
	s := userspace.NewSchema()
	uart, _ := s.Register(userspace.KindMMIO, "uart")
	off, _ := s.Register(userspace.KindHypercall, "SYSTEM_OFF")
	rec := s.NewRecorder(0)
	rec.Record(uart, 1500*time.Nanosecond)
	rec.Record(uart, 2500*time.Nanosecond)
	rec.Record(off, 9000*time.Nanosecond)

	agg := tracepoint.NewAggregator(exits.Arm64Namer{})
	agg.Configure(exits.Layout{VCPUs: 1, Regions: []exits.Region{{Name: "uart", Base: 0x900_0000, Size: 0x1000}}}, tracepoint.Options{})
	agg.SetVCPU(4242, 0) // the vCPU thread's TID
	fault := func(t, ipa uint64) tracepoint.Event {
		return tracepoint.Event{Kind: tracepoint.EventDetail, TID: 4242, Time: t, Detail: tracepoint.DetailFault, Val: ipa}
	}
	agg.Add([]tracepoint.Event{
		{Kind: tracepoint.EventEntry, TID: 4242, Time: 1000},
		{Kind: tracepoint.EventExit, TID: 4242, Time: 5000, Code: exits.Arm64ExceptionTrap, Sub: 0x24, PC: 0xffff800080001234},
		fault(5100, 0x900_0000),
		{Kind: tracepoint.EventEntry, TID: 4242, Time: 5600},
		{Kind: tracepoint.EventExit, TID: 4242, Time: 6600, Code: exits.Arm64ExceptionTrap, Sub: 0x24, PC: 0xffff800080001234},
		fault(6700, 0x900_0005),
		{Kind: tracepoint.EventEntry, TID: 4242, Time: 7000},
	})
	agg.Flush()

	exitsDesc := kvmstat.StatDesc{Name: "exits", Size: 1}
	stats := kvmstat.Rows("0", []kvmstat.StatDelta{{Desc: exitsDesc, Values: []uint64{2}, After: []uint64{17}}})

	rep := &exits.Report{DurationNS: 20000}
	userspace.AddTo(rep, []userspace.RecorderSnapshot{rec.Snapshot()})
	kvmstat.AddTo(rep, stats)
	rep.AddTrace(exits.Arm64Namer{}, agg.Snapshot(), agg.Details())
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
	//       "guest_count": 2,
	//       "breakdown": [
	//         {
	//           "key": "uart",
	//           "samples": 2,
	//           "time_ns": 5000,
	//           "handle_ns": 1000
	//         }
	//       ]
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
	//       "guest_count": 2,
	//       "percentiles": {
	//         "guest": {
	//           "p50": 1008,
	//           "p90": 4000,
	//           "p99": 4000,
	//           "max": 4000
	//         },
	//         "handle": {
	//           "p50": 408,
	//           "p90": 592,
	//           "p99": 592,
	//           "max": 600
	//         }
	//       },
	//       "breakdown": [
	//         {
	//           "key": "uart",
	//           "samples": 2,
	//           "time_ns": 5000,
	//           "handle_ns": 1000,
	//           "percentiles": {
	//             "guest": {
	//               "p50": 1008,
	//               "p90": 4000,
	//               "p99": 4000,
	//               "max": 4000
	//             },
	//             "handle": {
	//               "p50": 408,
	//               "p90": 592,
	//               "p99": 592,
	//               "max": 600
	//             }
	//           },
	//           "addresses": [
	//             {
	//               "addr": "0x9000000",
	//               "samples": 1
	//             },
	//             {
	//               "addr": "0x9000005",
	//               "samples": 1
	//             }
	//           ]
	//         }
	//       ]
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
	//   ],
	//   "by_phase": [
	//     {
	//       "phase": "kernel_to_user",
	//       "start_ns": 0,
	//       "end_ns": -1,
	//       "rows": [
	//         {
	//           "reason": "DABT_LOW",
	//           "samples": 2,
	//           "time_ns": 5000,
	//           "handle_ns": 1000
	//         }
	//       ]
	//     }
	//   ]
	// }
}
