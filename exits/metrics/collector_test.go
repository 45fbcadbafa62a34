package metrics

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/mvm-dev/mvm/exits"
	"github.com/mvm-dev/mvm/exits/exitstest"
	"github.com/mvm-dev/mvm/exits/kvmstat"
	"github.com/mvm-dev/mvm/exits/tracepoint"
	"github.com/mvm-dev/mvm/exits/userspace"
)

// vcpuStats is a snapshot of a few vCPU stats of every type and unit.
func vcpuStats(n, ioExits, waitNS uint64, hist []uint64) (*kvmstat.StatsSnapshot, error) {
	f := kvmstat.Flags
	descs := []kvmstat.StatDesc{
		{Name: "exits", Size: 1, Flags: f(kvmstat.StatCumulative, kvmstat.UnitNone, kvmstat.BasePow10)},
		{Name: "io_exits", Size: 1, Flags: f(kvmstat.StatCumulative, kvmstat.UnitNone, kvmstat.BasePow10)},
		{Name: "halt_wait_ns", Size: 1, Exponent: -9, Flags: f(kvmstat.StatCumulative, kvmstat.UnitSeconds, kvmstat.BasePow10)},
		{Name: "blocking", Size: 1, Flags: f(kvmstat.StatInstant, kvmstat.UnitBoolean, kvmstat.BasePow10)},
		{Name: "max_mmu_rmap_size", Size: 1, Flags: f(kvmstat.StatPeak, kvmstat.UnitNone, kvmstat.BasePow10)},
		{Name: "halt_wait_hist", Size: uint16(len(hist)), Exponent: -9, Flags: f(kvmstat.StatLogHist, kvmstat.UnitSeconds, kvmstat.BasePow10)},
		{Name: "pages", Size: 1, Exponent: 12, Flags: f(kvmstat.StatInstant, kvmstat.UnitBytes, kvmstat.BasePow2)},
	}
	return kvmstat.SnapshotOf(descs, [][]uint64{{n}, {ioExits}, {waitNS}, {1}, {n / 2}, hist, {3}})
}

func TestCollector(t *testing.T) {
	s := userspace.NewSchema()
	uart, _ := s.Register(userspace.KindMMIO, "uart")
	cpuOn, _ := s.Register(userspace.KindHypercall, "CPU_ON")
	r0, r1 := s.NewRecorder(0), s.NewRecorder(1)
	r0.Record(uart, 100*time.Nanosecond)
	r0.Record(uart, 3*time.Microsecond)
	r0.Record(cpuOn, time.Microsecond)
	r1.Record(cpuOn, time.Microsecond)
	r1.Record(userspace.KindKey(userspace.KindHypercall), time.Microsecond) // a function without a sub-key
	r0.SetState(userspace.StateRunning)
	r1.SetState(userspace.StateOff)

	agg := tracepoint.NewAggregator(exits.Arm64Namer{})
	agg.SetVCPU(10, 0)
	agg.Add([]tracepoint.Event{exitstest.Entry(10, 0, 1), exitstest.Exit(10, 0, 5, 2, 0x24), exitstest.Entry(10, 0, 9), exitstest.Exit(10, 0, 12, 2, 0x01)})

	reads := 0
	stats := func() ([]kvmstat.Labeled, error) {
		reads++
		snap, err := vcpuStats(42, 7, 1000, []uint64{1, 2})
		// The same snapshot twice under one label: exported once.
		return []kvmstat.Labeled{{VCPU: "0", Snapshot: snap}, {VCPU: "0", Snapshot: snap}, {VCPU: "vm"}}, err
	}

	c := NewCollector(CollectorConfig{Recorders: []*userspace.Recorder{r0}, Trace: agg, KVMStats: stats})
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
	bad := NewCollector(CollectorConfig{KVMStats: func() ([]kvmstat.Labeled, error) { return nil, errors.New("stats fd closed") }})
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

// TestCollectWhileRecording: scrapes and snapshots race with the vCPUs'
// recording (run under -race) and see consistent numbers.
func TestCollectWhileRecording(t *testing.T) {
	s := userspace.NewSchema()
	k, _ := s.Register(userspace.KindMMIO, "virtio")
	recs := []*userspace.Recorder{s.NewRecorder(0), s.NewRecorder(1)}
	const n = 20000
	var wg sync.WaitGroup
	for _, r := range recs {
		wg.Add(1)
		go func(r *userspace.Recorder) {
			defer wg.Done()
			for i := 0; i < n; i++ {
				r.SetState(userspace.StateRunning)
				r.Record(k, time.Duration(i))
				r.SetState(userspace.StateHandling)
			}
			r.SetState(userspace.StateStopped)
		}(r)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c := NewCollector(CollectorConfig{Recorders: recs})
		for i := 0; i < 50; i++ {
			for _, r := range recs {
				for _, ks := range r.Snapshot().Keys {
					if ks.Count > n {
						t.Errorf("count %d > %d", ks.Count, n)
					}
				}
			}
			ch := make(chan prometheus.Metric, 1000)
			go func() { c.Collect(ch); close(ch) }()
			for range ch {
			}
		}
	}()
	wg.Wait()
	<-done
	for _, r := range recs {
		snap := r.Snapshot()
		if len(snap.Keys) != 1 || snap.Keys[0].Count != n || snap.State != userspace.StateStopped {
			t.Fatalf("final snapshot %+v", snap)
		}
		var inBuckets uint64
		for _, b := range snap.Keys[0].Buckets {
			inBuckets += b
		}
		if inBuckets != n || snap.Keys[0].SumNS != n*(n-1)/2 {
			t.Fatalf("buckets hold %d, sum %d", inBuckets, snap.Keys[0].SumNS)
		}
	}
}
