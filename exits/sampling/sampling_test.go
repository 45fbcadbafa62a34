package sampling

import (
	"math"
	"testing"
	"time"

	"github.com/mvm-dev/mvm/exits"
)

// stratum is one stratum's truth: per vCPU, per reason, the exits.
type stratum map[int]map[string]uint64

// window samples a stratum: every reason of every vCPU at fraction f (a
// window that sees the stratum's mix exactly).
func (s stratum) window(f float64) (exact []uint64, win []exits.VCPUStats) {
	n := 0
	for v := range s {
		n = max(n, v+1)
	}
	exact = make([]uint64, n)
	for v := 0; v < n; v++ {
		vs := exits.VCPUStats{VCPU: v}
		for r, c := range s[v] {
			exact[v] += c
			vs.Reasons = append(vs.Reasons, exits.ReasonStats{Reason: r, Count: uint64(float64(c) * f)})
		}
		win = append(win, vs)
	}
	return exact, win
}

func counts(vs []exits.VCPUStats) map[int]map[string]uint64 {
	out := map[int]map[string]uint64{}
	for _, v := range vs {
		out[v.VCPU] = map[string]uint64{}
		for _, r := range v.Reasons {
			out[v.VCPU][r.Reason] = r.Count
		}
	}
	return out
}

// A boot's mix changes: a SYS64 burst, then mostly WFx and IRQ. Windows
// of different lengths (as the adaptive schedule makes them) sample each
// stratum at a different fraction; stratified scaling recovers the truth
// where one pooled share would weigh the burst by its window's length.
func TestEstimatorStratified(t *testing.T) {
	strata := []stratum{
		{0: {"SYS64": 90000, "IRQ": 1000}},
		{0: {"WFx": 2000, "IRQ": 2000, "SYS64": 1000}, 1: {"WFx": 3000, "HVC64": 1000}},
		{0: {"WFx": 500, "DABT_LOW": 1500}, 1: {"WFx": 4000}},
	}
	fractions := []float64{0.01, 0.5, 0.2}
	var e Estimator
	want := map[int]map[string]uint64{}
	var exactAll uint64
	for i, s := range strata {
		exact, win := s.window(fractions[i])
		e.Add(exact, nil, win)
		for v, m := range s {
			if want[v] == nil {
				want[v] = map[string]uint64{}
			}
			for r, c := range m {
				want[v][r] += c
				exactAll += c
			}
		}
	}
	got := counts(e.Result(nil))
	for v, m := range want {
		for r, c := range m {
			if got[v][r] != c {
				t.Errorf("vCPU %d %s: estimated %d, want %d", v, r, got[v][r], c)
			}
		}
	}
	if e.Exact() != exactAll {
		t.Errorf("Exact() = %d, want %d", e.Exact(), exactAll)
	}
	if e.Sampled() == 0 || e.Sampled() >= exactAll {
		t.Errorf("Sampled() = %d, want between 0 and %d", e.Sampled(), exactAll)
	}
}

// A vCPU whose window saw nothing carries its exits to the next window
// that sees some; a vCPU never seen shares out by the VM's mix; with no
// sample at all the exits are Unsampled. Every vCPU's counts add up to
// its exact exits.
func TestEstimatorPendingAndUnsampled(t *testing.T) {
	var e Estimator
	e.Add([]uint64{100, 50}, nil, []exits.VCPUStats{{VCPU: 0, Reasons: []exits.ReasonStats{{Reason: "WFx", Count: 3}, {Reason: "IRQ", Count: 1}}}})
	e.Add([]uint64{0, 30}, nil, []exits.VCPUStats{{VCPU: 1, Reasons: []exits.ReasonStats{{Reason: "HVC64", Count: 2}}}})
	e.Add([]uint64{0, 0, 7}, nil, nil)
	got := counts(e.Result(nil))
	if got[0]["WFx"] != 75 || got[0]["IRQ"] != 25 {
		t.Errorf("vCPU 0: %v, want WFx 75 IRQ 25", got[0])
	}
	if got[1]["HVC64"] != 80 {
		t.Errorf("vCPU 1: %v, want the 50 unsampled exits carried to the next window: HVC64 80", got[1])
	}
	// vCPU 2 never sampled: the VM's shares (75 WFx, 25 IRQ, 80 HVC64 of 180).
	var n uint64
	for _, c := range got[2] {
		n += c
	}
	if n != 7 || got[2]["HVC64"] == 0 || got[2][Unsampled] != 0 {
		t.Errorf("vCPU 2: %v, want 7 exits shared out by the VM's mix", got[2])
	}

	var none Estimator
	none.Add([]uint64{5}, nil, nil)
	if g := counts(none.Result(nil)); g[0][Unsampled] != 5 {
		t.Errorf("no samples: %v, want 5 %s", g, Unsampled)
	}
}

// Times keep the sampled mean; their count and sum follow the estimate.
func TestEstimatorTimes(t *testing.T) {
	var e Estimator
	e.Add([]uint64{1000}, nil, []exits.VCPUStats{{VCPU: 0, Reasons: []exits.ReasonStats{{Reason: "SYS64", Count: 10}}}})
	times := []exits.VCPUStats{{VCPU: 0, Reasons: []exits.ReasonStats{{Reason: "SYS64", Count: 10,
		GuestCount: 9, GuestSumNS: 900, GuestMinNS: 50, GuestMaxNS: 200,
		HandleCount: 10, HandleSumNS: 3000, HandleMinNS: 100, HandleMaxNS: 900}}}}
	r := e.Result(times)[0].Reasons[0]
	if r.Count != 1000 || r.GuestCount != 1000 || r.GuestSumNS != 100000 || r.HandleSumNS != 300000 {
		t.Errorf("got %+v, want count 1000, guest mean 100 and handle mean 300 over 1000", r)
	}
	if r.GuestMinNS != 50 || r.GuestMaxNS != 200 || r.HandleMinNS != 100 || r.HandleMaxNS != 900 {
		t.Errorf("min/max %+v, want the sampled ones", r)
	}
}

func TestRoundTo(t *testing.T) {
	got := roundTo(map[string]float64{"a": 1.0 / 3 * 10, "b": 1.0 / 3 * 10, "c": 1.0 / 3 * 10}, 10)
	if got["a"]+got["b"]+got["c"] != 10 || got["a"] != 4 {
		t.Errorf("roundTo thirds of 10 = %v, want 4/3/3 adding to 10 (ties by name)", got)
	}
}

func TestDelta(t *testing.T) {
	prev := []exits.VCPUStats{{VCPU: 0, Reasons: []exits.ReasonStats{{Reason: "WFx", Count: 5, HandleCount: 4, HandleSumNS: 40}}}}
	cur := []exits.VCPUStats{
		{VCPU: 0, Reasons: []exits.ReasonStats{{Reason: "WFx", Count: 8, HandleCount: 7, HandleSumNS: 100, HandleMaxNS: 30}, {Reason: "IRQ", Count: 2}}},
		{VCPU: 1, Reasons: []exits.ReasonStats{{Reason: "WFx", Count: 0}}},
	}
	d := Delta(cur, prev)
	if len(d) != 1 || len(d[0].Reasons) != 2 {
		t.Fatalf("Delta = %+v, want vCPU 0 only with WFx and IRQ", d)
	}
	w := d[0].Reasons[0]
	if w.Count != 3 || w.HandleCount != 3 || w.HandleSumNS != 60 || w.HandleMaxNS != 30 {
		t.Errorf("WFx delta %+v, want 3 exits, 3 handle times summing to 60, max 30", w)
	}
	if d[0].Reasons[1].Count != 2 {
		t.Errorf("IRQ delta %+v, want 2 (new reason counts from zero)", d[0].Reasons[1])
	}
}

func TestScheduleGap(t *testing.T) {
	s := Schedule{Target: 0.05, Window: 10 * time.Millisecond, MinFraction: 0.01, MaxFraction: 0.5, MinSamples: 100}
	if g := s.Gap(10, 1000, time.Second, 2*time.Second); g != 10*time.Millisecond {
		t.Errorf("below MinSamples: gap %v, want MaxFraction's 10ms", g)
	}
	even := s.Gap(500, 10000, 50*time.Millisecond, time.Second) // 5% of exits in 5% of time
	if even != 190*time.Millisecond {
		t.Errorf("even exits: gap %v, want 190ms (5%% of the time)", even)
	}
	busy := s.Gap(1000, 10000, 50*time.Millisecond, time.Second) // windows saw twice their share
	if busy <= even {
		t.Errorf("windows on busy stretches: gap %v, want longer than %v", busy, even)
	}
	quiet := s.Gap(250, 10000, 50*time.Millisecond, time.Second)
	if quiet >= even {
		t.Errorf("windows on quiet stretches: gap %v, want shorter than %v", quiet, even)
	}
	if g := s.Gap(100000, 100001, 10*time.Millisecond, 10*time.Second); g != 990*time.Millisecond {
		t.Errorf("clamped to MinFraction: gap %v, want 990ms", g)
	}
}

// FuzzEstimator: whatever the windows say, no panic, and every vCPU's
// estimate adds up to its exact exits.
func FuzzEstimator(f *testing.F) {
	f.Add([]byte{3, 10, 4, 0, 200, 1, 0, 7})
	f.Fuzz(func(t *testing.T, data []byte) {
		var e Estimator
		want := map[int]uint64{}
		reasons := []string{"SYS64", "WFx", "IRQ", "HVC64"}
		for len(data) >= 4 {
			ncpu := int(data[0]%3) + 1
			exact := make([]uint64, ncpu)
			var win []exits.VCPUStats
			for v := 0; v < ncpu; v++ {
				exact[v] = uint64(data[1]) * uint64(v+1)
				want[v] += exact[v]
				if data[2]&(1<<v) != 0 {
					win = append(win, exits.VCPUStats{VCPU: v, Reasons: []exits.ReasonStats{{Reason: reasons[int(data[3])%4], Count: uint64(data[3] % 5)}}})
				}
			}
			e.Add(exact, nil, win)
			data = data[4:]
		}
		for _, v := range e.Result(nil) {
			var n uint64
			for _, r := range v.Reasons {
				n += r.Count
			}
			if n != want[v.VCPU] {
				t.Fatalf("vCPU %d: estimate adds up to %d, exact %d", v.VCPU, n, want[v.VCPU])
			}
		}
	})
}

// Reasons the stats fd counts are exact whatever the window saw, and the
// window's shares of them do not take from the others.
func TestEstimatorKnown(t *testing.T) {
	var e Estimator
	win := []exits.VCPUStats{{VCPU: 0, Reasons: []exits.ReasonStats{{Reason: "WFx", Count: 50}, {Reason: "SYS64", Count: 30}, {Reason: "IRQ", Count: 10}}}}
	e.Add([]uint64{1000}, []map[string]uint64{{"WFx": 400}}, win)
	got := counts(e.Result(nil))[0]
	if got["WFx"] != 400 || got["SYS64"] != 450 || got["IRQ"] != 150 {
		t.Errorf("got %v, want WFx 400 (exact), SYS64 450 and IRQ 150 (the other 600 by 3:1)", got)
	}
	if !e.Known("WFx") || e.Known("SYS64") {
		t.Errorf("Known: WFx %v SYS64 %v, want true, false", e.Known("WFx"), e.Known("SYS64"))
	}
}

// A window sampled at a high rate does not outweigh the others in a mean:
// stratum 1 (100 exits, 50 sampled at 10 ns) and stratum 2 (10000 exits,
// 10 sampled at 100 ns) give a mean near 99 ns, not the pooled 25.
func TestEstimatorWeightedMeans(t *testing.T) {
	var e Estimator
	w := func(n, ns uint64) []exits.VCPUStats {
		return []exits.VCPUStats{{VCPU: 0, Reasons: []exits.ReasonStats{{Reason: "SYS64", Count: n, GuestCount: n, GuestSumNS: n * ns, HandleCount: n, HandleSumNS: n * ns}}}}
	}
	e.Add([]uint64{100}, nil, w(50, 10))
	e.Add([]uint64{10000}, nil, w(10, 100))
	times := []exits.VCPUStats{{VCPU: 0, Reasons: []exits.ReasonStats{{Reason: "SYS64", Count: 60, GuestCount: 60, GuestSumNS: 1500, HandleCount: 60, HandleSumNS: 1500}}}}
	r := e.Result(times)[0].Reasons[0]
	want := (100*10 + 10000*100) / 10100.0
	if got := float64(r.GuestSumNS) / float64(r.GuestCount); math.Abs(got-want) > 0.5 {
		t.Errorf("guest mean %.1f, want the stratum-weighted %.1f", got, want)
	}
	if got := float64(r.HandleSumNS) / float64(r.HandleCount); math.Abs(got-want) > 0.5 {
		t.Errorf("handle mean %.1f, want the stratum-weighted %.1f", got, want)
	}
}
