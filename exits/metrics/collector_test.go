package metrics

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

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
mvm_vcpu_state{state="off",vcpu="0"} 0
mvm_vcpu_state{state="off",vcpu="1"} 1
mvm_vcpu_state{state="running",vcpu="0"} 1
mvm_vcpu_state{state="running",vcpu="1"} 0
mvm_vcpu_state{state="stopped",vcpu="0"} 0
mvm_vcpu_state{state="stopped",vcpu="1"} 0
`
	mfs := scrapeParsed(t, c)
	compareFamilies(t, mfs, want, "mvm_exits_total", "mvm_psci_calls_total", "mvm_vcpu_state")
	// The KVM stats come with the collector when KVMStats is set.
	if mfs["mvm_kvm_exits_total"].GetType() != dto.MetricType_COUNTER || reads != 1 {
		t.Errorf("KVM stats: %v after %d reads", mfs["mvm_kvm_exits_total"], reads)
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
		}
	}
}

func TestStatsCollector(t *testing.T) {
	reads := 0
	stats := func() ([]kvmstat.Labeled, error) {
		reads++
		snap, err := vcpuStats(42, 7, 1500, []uint64{1, 2})
		// The same snapshot twice under one label: exported once.
		return []kvmstat.Labeled{{VCPU: "0", Snapshot: snap}, {VCPU: "0", Snapshot: snap}, {VCPU: "vm"}}, err
	}
	c := NewStatsCollector(stats)
	want := `
# HELP mvm_kvm_exits_total KVM binary statistic exits (cumulative, none), KVM_GET_STATS_FD; vcpu="vm" for the VM's own.
# TYPE mvm_kvm_exits_total counter
mvm_kvm_exits_total{vcpu="0"} 42
# HELP mvm_kvm_halt_wait_seconds_total KVM binary statistic halt_wait_ns (cumulative, seconds), KVM_GET_STATS_FD; vcpu="vm" for the VM's own.
# TYPE mvm_kvm_halt_wait_seconds_total counter
mvm_kvm_halt_wait_seconds_total{vcpu="0"} 1.5e-06
# HELP mvm_kvm_blocking KVM binary statistic blocking (instant, boolean), KVM_GET_STATS_FD; vcpu="vm" for the VM's own.
# TYPE mvm_kvm_blocking gauge
mvm_kvm_blocking{vcpu="0"} 1
# HELP mvm_kvm_pages_bytes KVM binary statistic pages (instant, bytes), KVM_GET_STATS_FD; vcpu="vm" for the VM's own.
# TYPE mvm_kvm_pages_bytes gauge
mvm_kvm_pages_bytes{vcpu="0"} 12288
`
	compareFamilies(t, scrapeParsed(t, c), want, "mvm_kvm_exits_total", "mvm_kvm_halt_wait_seconds_total", "mvm_kvm_blocking", "mvm_kvm_pages_bytes")
	mfs := scrapeParsed(t, c)
	for _, mf := range mfs {
		if strings.Contains(mf.GetName(), "hist") {
			t.Errorf("histogram stat exported as %s", mf.GetName())
		}
	}
	if reads != 2 {
		t.Errorf("stats callback called %d times for 2 gathers", reads)
	}
	// A failing stats callback fails only its own metrics.
	bad := NewStatsCollector(func() ([]kvmstat.Labeled, error) { return nil, errors.New("stats fd closed") })
	s := userspace.NewSchema()
	r := s.NewRecorder(0)
	r.Record(userspace.KindKey(userspace.KindMMIO), time.Microsecond)
	mfs = scrapeParsed(t, bad, NewCollector(CollectorConfig{Recorders: []*userspace.Recorder{r}}))
	if got := mfs["mvm_kvm_stats_error"].GetMetric(); len(got) != 1 || got[0].GetGauge().GetValue() != 1 {
		t.Errorf("stats error not reported: %v", mfs["mvm_kvm_stats_error"])
	}
	if mfs["mvm_exits_total"] == nil {
		t.Errorf("a failing stats read took the exit counters with it")
	}
}

func TestBreakdownMetricBounded(t *testing.T) {
	agg := tracepoint.NewAggregator(exits.Arm64Namer{})
	agg.Configure(exits.Layout{VCPUs: 1}, tracepoint.Options{})
	agg.SetVCPU(10, 0)
	var evs []tracepoint.Event
	tm := uint64(1)
	// 30 distinct system registers, register i read i+1 times.
	for i := uint64(0); i < 30; i++ {
		for n := uint64(0); n <= i; n++ {
			evs = append(evs, exitstest.Exit(10, 0, tm, 2, 0x18),
				tracepoint.Event{Kind: tracepoint.EventDetail, TID: 10, Time: tm + 1, Detail: tracepoint.DetailSysReg, Val: 3<<14 | i},
				exitstest.Entry(10, 0, tm+2))
			tm += 3
		}
	}
	agg.Add(evs)
	agg.Flush()
	mfs := scrapeParsed(t, NewCollector(CollectorConfig{Trace: agg}))
	var series int
	var sum, other float64
	for _, mf := range mfs {
		if mf.GetName() != "mvm_exit_breakdown_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			series++
			sum += m.GetCounter().GetValue()
			if labelOf(m.GetLabel(), "key") == "other" {
				other = m.GetCounter().GetValue()
			}
		}
	}
	// Top 10 (registers 29..20: 30+...+21 = 255 reads) and other (210).
	if series != BreakdownTop+1 || sum != 465 || other != 210 {
		t.Errorf("%d series, sum %g, other %g", series, sum, other)
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
				r.SetState(userspace.StateOff)
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
			if err := WriteText(&strings.Builder{}, c); err != nil {
				t.Error(err)
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

// scrapeParsed is one scrape of the sources as Prometheus' own text parser
// reads it; a parse error fails the test.
func scrapeParsed(t *testing.T, srcs ...Source) map[string]*dto.MetricFamily {
	t.Helper()
	var b strings.Builder
	if err := WriteText(&b, srcs...); err != nil {
		t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(b.String()))
	if err != nil {
		t.Fatalf("exposition does not parse: %v\n%s", err, b.String())
	}
	return mfs
}

// compareFamilies compares the named families of got with those of the
// text want, both printed by expfmt, line order ignored.
func compareFamilies(t *testing.T, got map[string]*dto.MetricFamily, want string, names ...string) {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	wantMFs, err := p.TextToMetricFamilies(strings.NewReader(want))
	if err != nil {
		t.Fatalf("want text: %v", err)
	}
	render := func(mf *dto.MetricFamily) []string {
		if mf == nil {
			return nil
		}
		var b strings.Builder
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(b.String()), "\n")
		slices.Sort(lines)
		return lines
	}
	for _, n := range names {
		g, w := render(got[n]), render(wantMFs[n])
		if !slices.Equal(g, w) {
			t.Errorf("%s:\ngot\n%s\nwant\n%s", n, strings.Join(g, "\n"), strings.Join(w, "\n"))
		}
	}
}
