package exits

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

func TestCollector(t *testing.T) {
	s := NewSchema()
	uart, _ := s.Register(KindMMIO, "uart")
	cpuOn, _ := s.Register(KindHypercall, "CPU_ON")
	r0, r1 := s.NewRecorder(0), s.NewRecorder(1)
	r0.Record(uart, 100*time.Nanosecond)
	r0.Record(uart, 3*time.Microsecond)
	r0.Record(cpuOn, time.Microsecond)
	r1.Record(cpuOn, time.Microsecond)
	r1.Record(KindKey(KindHypercall), time.Microsecond) // a function without a sub-key
	r0.SetState(StateRunning)
	r1.SetState(StateOff)

	agg := NewTraceAggregator(Arm64Namer{})
	agg.SetVCPU(10, 0)
	agg.Add([]TraceEvent{entry(10, 0, 1), exitEv(10, 0, 5, 2, 0x24), entry(10, 0, 9), exitEv(10, 0, 12, 2, 0x01)})

	blob := buildStats("kvm-1/vcpu-0", 48, vcpuStats(42, 7, 1000, []uint64{1, 2}))
	layout, err := ParseStats(bytes.NewReader(blob))
	if err != nil {
		t.Fatal(err)
	}
	reads := 0
	stats := func() ([]LabeledStats, error) {
		reads++
		snap, err := layout.Read(bytes.NewReader(blob))
		// The same snapshot twice under one label: exported once.
		return []LabeledStats{{VCPU: "0", Snapshot: snap}, {VCPU: "0", Snapshot: snap}, {VCPU: "vm"}}, err
	}

	c := NewCollector(CollectorConfig{Recorders: []*Recorder{r0}, Trace: agg, KVMStats: stats})
	c.AddRecorder(r1)
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}

	want := `
# HELP mvm_exits_total VM exits by vCPU, source (userspace: KVM_RUN returns; tracepoint: kvm:kvm_exit) and reason.
# TYPE mvm_exits_total counter
mvm_exits_total{reason="DABT_LOW",source="tracepoint",vcpu="0"} 1
mvm_exits_total{reason="HYPERCALL",source="userspace",vcpu="1"} 1
mvm_exits_total{reason="HYPERCALL/CPU_ON",source="userspace",vcpu="0"} 1
mvm_exits_total{reason="HYPERCALL/CPU_ON",source="userspace",vcpu="1"} 1
mvm_exits_total{reason="MMIO/uart",source="userspace",vcpu="0"} 2
mvm_exits_total{reason="WFx",source="tracepoint",vcpu="0"} 1
# HELP mvm_psci_calls_total PSCI/SMCCC calls forwarded to the VMM, by function, over all vCPUs.
# TYPE mvm_psci_calls_total counter
mvm_psci_calls_total{function="CPU_ON"} 2
mvm_psci_calls_total{function="unknown"} 1
# HELP mvm_vcpu_state 1 for the state the vCPU is in, 0 for the others.
# TYPE mvm_vcpu_state gauge
mvm_vcpu_state{state="created",vcpu="0"} 0
mvm_vcpu_state{state="created",vcpu="1"} 0
mvm_vcpu_state{state="handling",vcpu="0"} 0
mvm_vcpu_state{state="handling",vcpu="1"} 0
mvm_vcpu_state{state="off",vcpu="0"} 0
mvm_vcpu_state{state="off",vcpu="1"} 1
mvm_vcpu_state{state="running",vcpu="0"} 1
mvm_vcpu_state{state="running",vcpu="1"} 0
mvm_vcpu_state{state="stopped",vcpu="0"} 0
mvm_vcpu_state{state="stopped",vcpu="1"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "mvm_exits_total", "mvm_psci_calls_total", "mvm_vcpu_state"); err != nil {
		t.Error(err)
	}

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "mvm_exit_handle_seconds":
			for _, m := range mf.GetMetric() {
				if labelOf(m.GetLabel(), "reason") != "MMIO/uart" {
					continue
				}
				h := m.GetHistogram()
				if h.GetSampleCount() != 2 || h.GetSampleSum() != 3.1e-6 {
					t.Errorf("uart histogram count %d sum %g", h.GetSampleCount(), h.GetSampleSum())
				}
				// 100 ns is below 128 ns = 2^7, 3000 ns below 4096 = 2^12.
				for _, b := range h.GetBucket() {
					ub, n := b.GetUpperBound(), b.GetCumulativeCount()
					switch {
					case ub < 128e-9 && n != 0, ub >= 128e-9 && ub < 4096e-9 && n != 1, ub >= 4096e-9 && n != 2:
						t.Errorf("bucket le=%g holds %d", ub, n)
					}
				}
			}
		case "mvm_kvm_stat":
			got := map[string]float64{}
			for _, m := range mf.GetMetric() {
				got[labelOf(m.GetLabel(), "vcpu")+"/"+labelOf(m.GetLabel(), "name")] = m.GetGauge().GetValue()
			}
			if got["0/exits"] != 42 || got["0/io_exits"] != 7 || got["0/halt_wait_ns"] != 1000 || len(got) != 6 {
				t.Errorf("kvm stats %v", got)
			}
			if _, ok := got["0/halt_wait_hist"]; ok {
				t.Error("histogram stat exported as a gauge")
			}
		}
	}
	if reads != 2 {
		t.Errorf("stats callback called %d times for 2 gathers", reads)
	}

	// A failing stats callback fails only its metric, not the scrape of
	// the others.
	bad := NewCollector(CollectorConfig{KVMStats: func() ([]LabeledStats, error) { return nil, errors.New("stats fd closed") }})
	bad.SetTrace(nil)
	breg := prometheus.NewRegistry()
	breg.MustRegister(bad)
	if _, err := breg.Gather(); err == nil || !strings.Contains(err.Error(), "stats fd closed") {
		t.Errorf("stats error not reported: %v", err)
	}
}

func labelOf(ls []*dto.LabelPair, name string) string {
	for _, l := range ls {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
