// Package sampling estimates an exit profile's per-reason table from
// sampled windows, for mvm run --profile=light: the kvm_exit tracepoint
// programs (exits/bpfagg) are attached for short windows only, because an
// attached tracepoint costs on every exit whatever its program does, and
// the counts they see are scaled by the exact exits KVM's stats fd counted
// meanwhile.
//
// Each window stands for a stratum: the time from its start to the next
// window's start. A window's per-reason shares of one vCPU, times that
// vCPU's exact exits in the stratum (the stats fd's "exits"), is the
// stratum's estimate; the estimates add up over the run. Stratifying by
// time follows the boot's changing mix (a burst of SYS64 at the start, WFI
// once idle) where one share over the whole run would weigh windows by how
// busy they happened to be. Mean times are weighted the same way: each
// window's time sums count with its stratum's scale, so a window sampled
// at a high rate (the first ones, a quiet stretch) does not outweigh the
// rest. The package makes no system calls: exits/profile feeds it.
package sampling

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/mvm-dev/mvm/exits"
)

// Unsampled is the reason under which exits are counted that no window of
// their vCPU saw anything to share them out by (a vCPU that never exited
// while a window was open).
const Unsampled = "(not sampled)"

// Estimator adds up sampled windows into estimated per-vCPU counts.
// The zero value is ready to use.
type Estimator struct {
	// est is the estimated count per vCPU and reason, fractional until
	// Result rounds it.
	est map[int]map[string]float64
	// pending is the exact exits per vCPU of strata in which that vCPU's
	// window saw nothing: shared out by the next window that sees some.
	pending map[int]uint64
	// exact is the exact exits per vCPU added so far.
	exact map[int]uint64
	// known is the exact count per vCPU of the reasons the stats fd
	// counts itself; knownNames those reasons.
	known      map[int]map[string]uint64
	knownNames map[string]bool
	// sampled is the exits the windows counted, all vCPUs.
	sampled uint64
	// wt is the stratum-weighted time sums per vCPU and reason.
	wt map[int]map[string]*weighted
}

// weighted is one reason's time sums and counts, each window's scaled by
// its stratum's factor.
type weighted struct {
	guestSum, guestN, handleSum, handleN float64
}

// weigh adds window reason r's times at scale.
func (e *Estimator) weigh(vcpu int, r exits.ReasonStats, scale float64) {
	m := e.wt[vcpu]
	if m == nil {
		m = map[string]*weighted{}
		e.wt[vcpu] = m
	}
	w := m[r.Reason]
	if w == nil {
		w = &weighted{}
		m[r.Reason] = w
	}
	w.guestSum += float64(r.GuestSumNS) * scale
	w.guestN += float64(r.GuestCount) * scale
	w.handleSum += float64(r.HandleSumNS) * scale
	w.handleN += float64(r.HandleCount) * scale
}

// Known reports whether reason r's count is exact (from Add's known).
func (e *Estimator) Known(r string) bool { return e.knownNames[r] }

// Add accounts one stratum: exact holds the stats fd's exits per vCPU over
// the stratum (index = vCPU); known, if not nil, the reasons the stats fd
// counts itself per vCPU (WFx from wfi_exit_stat + wfe_exit_stat, HVC64
// from hvc_exit_stat), which are taken as they are and shared out no
// further; window what the tracepoints counted per vCPU and reason while
// its window was open (counts and time sums). The exits not known are
// shared out by the window's shares of the reasons not known.
func (e *Estimator) Add(exact []uint64, known []map[string]uint64, window []exits.VCPUStats) {
	if e.est == nil {
		e.est, e.pending, e.exact = map[int]map[string]float64{}, map[int]uint64{}, map[int]uint64{}
		e.known, e.knownNames = map[int]map[string]uint64{}, map[string]bool{}
		e.wt = map[int]map[string]*weighted{}
	}
	seen := map[int][]exits.ReasonStats{}
	for _, v := range window {
		seen[v.VCPU] = append(seen[v.VCPU], v.Reasons...)
	}
	for vcpu, n := range exact {
		e.exact[vcpu] += n
		var kn map[string]uint64
		if vcpu < len(known) {
			kn = known[vcpu]
		}
		for r, k := range kn {
			e.knownNames[r] = true
			if e.known[vcpu] == nil {
				e.known[vcpu] = map[string]uint64{}
			}
			k = min(k, n) // a stat read a moment apart cannot exceed all exits
			e.known[vcpu][r] += k
			n -= k
		}
		e.pending[vcpu] += n
		var total uint64
		for _, r := range seen[vcpu] {
			e.sampled += r.Count
			if !e.knownNames[r.Reason] {
				total += r.Count
			} else if r.Count > 0 {
				e.weigh(vcpu, r, float64(kn[r.Reason])/float64(r.Count))
			}
		}
		if total == 0 || e.pending[vcpu] == 0 {
			continue
		}
		scale := float64(e.pending[vcpu]) / float64(total)
		m := e.est[vcpu]
		if m == nil {
			m = map[string]float64{}
			e.est[vcpu] = m
		}
		for _, r := range seen[vcpu] {
			if !e.knownNames[r.Reason] {
				m[r.Reason] += float64(r.Count) * scale
				e.weigh(vcpu, r, scale)
			}
		}
		e.pending[vcpu] = 0
	}
}

// Sampled is the exits the windows counted and Exact the stats fd's, all
// vCPUs, so far.
func (e *Estimator) Sampled() uint64 { return e.sampled }

// Exact is the stats fd's exits of all vCPUs added so far.
func (e *Estimator) Exact() uint64 {
	var n uint64
	for _, x := range e.exact {
		n += x
	}
	return n
}

// Result is the estimate per vCPU, each vCPU's counts adding up to its
// exact exits, the known reasons' exact: what is still pending is shared out by the vCPU's own
// shares over the run (by the VM's where the vCPU has none, else counted
// as Unsampled), and counts are rounded by largest remainder. Times are
// times's (the windows' sums over the run, per vCPU and reason, with their
// minimum and maximum): each reason keeps its sampled mean, its time
// counts and sums scaled to the estimated count.
func (e *Estimator) Result(times []exits.VCPUStats) []exits.VCPUStats {
	sampledTimes := map[int]map[string]exits.ReasonStats{}
	for _, v := range times {
		m := sampledTimes[v.VCPU]
		if m == nil {
			m = map[string]exits.ReasonStats{}
			sampledTimes[v.VCPU] = m
		}
		for _, r := range v.Reasons {
			s := m[r.Reason]
			s.Reason = r.Reason
			s.Merge(&r)
			m[r.Reason] = s
		}
	}
	vm := map[string]float64{}
	for _, m := range e.est {
		for r, n := range m {
			vm[r] += n
		}
	}
	var out []exits.VCPUStats
	for _, vcpu := range sortedKeys(e.exact) {
		shares := e.est[vcpu]
		counts := map[string]float64{}
		for r, n := range shares {
			counts[r] = n
		}
		if left := e.pending[vcpu]; left > 0 {
			switch {
			case sum(shares) > 0:
				spread(counts, shares, left)
			case sum(vm) > 0:
				spread(counts, vm, left)
			default:
				counts[Unsampled] += float64(left)
			}
		}
		var exactKnown uint64
		for _, k := range e.known[vcpu] {
			exactKnown += k
		}
		rounded := roundTo(counts, e.exact[vcpu]-exactKnown)
		for r, k := range e.known[vcpu] {
			rounded[r] += k
		}
		v := exits.VCPUStats{VCPU: vcpu}
		for r, n := range rounded {
			if n == 0 {
				continue
			}
			v.Reasons = append(v.Reasons, scaleTimes(r, n, sampledTimes[vcpu][r], e.wt[vcpu][r]))
		}
		exits.SortReasonStats(v.Reasons)
		out = append(out, v)
	}
	return out
}

// scaleTimes is reason r with estimated count n: its mean times the
// stratum-weighted ones of w (the windows' plain means of t where w has
// none), minimum and maximum t's, count and sum scaled to n.
func scaleTimes(r string, n uint64, t exits.ReasonStats, w *weighted) exits.ReasonStats {
	s := exits.ReasonStats{Reason: r, Count: n}
	guestMean, handleMean := mean(float64(t.GuestSumNS), float64(t.GuestCount)), mean(float64(t.HandleSumNS), float64(t.HandleCount))
	if w != nil {
		if w.guestN > 0 {
			guestMean = mean(w.guestSum, w.guestN)
		}
		if w.handleN > 0 {
			handleMean = mean(w.handleSum, w.handleN)
		}
	}
	if t.GuestCount > 0 {
		s.GuestCount, s.GuestSumNS = n, uint64(math.Round(guestMean*float64(n)))
		s.GuestMinNS, s.GuestMaxNS = t.GuestMinNS, t.GuestMaxNS
	}
	if t.HandleCount > 0 {
		s.HandleCount, s.HandleSumNS = n, uint64(math.Round(handleMean*float64(n)))
		s.HandleMinNS, s.HandleMaxNS = t.HandleMinNS, t.HandleMaxNS
	}
	return s
}

func mean(sum, n float64) float64 {
	if n == 0 {
		return 0
	}
	return sum / n
}

// spread adds n to counts in proportion to shares (whose sum is > 0).
func spread(counts, shares map[string]float64, n uint64) {
	total := sum(shares)
	for r, s := range shares {
		counts[r] += float64(n) * s / total
	}
}

func sum(m map[string]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}

// roundTo rounds counts to integers adding up to total (largest
// remainder; ties by name, so the result does not depend on map order).
// The counts' own sum is total up to float error.
func roundTo(counts map[string]float64, total uint64) map[string]uint64 {
	type part struct {
		name string
		frac float64
	}
	out := make(map[string]uint64, len(counts))
	var parts []part
	var floor uint64
	for r, c := range counts {
		f := math.Floor(c)
		out[r] = uint64(f)
		floor += uint64(f)
		parts = append(parts, part{r, c - f})
	}
	slices.SortFunc(parts, func(a, b part) int { return cmp.Or(cmp.Compare(b.frac, a.frac), cmp.Compare(a.name, b.name)) })
	for i := 0; floor < total && len(parts) > 0; i = (i + 1) % len(parts) {
		out[parts[i].name]++
		floor++
	}
	// Float error can only leave floor above total by a rounding unit or
	// so per reason: take it from the largest counts.
	for floor > total {
		r := largest(out)
		out[r]--
		floor--
	}
	return out
}

func largest(m map[string]uint64) string {
	var best string
	for r, n := range m {
		if best == "" || n > m[best] || (n == m[best] && r < best) {
			best = r
		}
	}
	return best
}

func sortedKeys(m map[int]uint64) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Delta is what cur counted beyond prev, per vCPU and reason: counts and
// time sums subtracted (a reason missing from prev counts from zero);
// minimum and maximum are cur's, which do not subtract. Reasons and vCPUs
// with nothing new are left out.
func Delta(cur, prev []exits.VCPUStats) []exits.VCPUStats {
	before := map[int]map[string]exits.ReasonStats{}
	for _, v := range prev {
		m := map[string]exits.ReasonStats{}
		for _, r := range v.Reasons {
			m[r.Reason] = r
		}
		before[v.VCPU] = m
	}
	var out []exits.VCPUStats
	for _, v := range cur {
		d := exits.VCPUStats{VCPU: v.VCPU}
		for _, r := range v.Reasons {
			p := before[v.VCPU][r.Reason]
			n := exits.ReasonStats{Reason: r.Reason,
				Count:       sub(r.Count, p.Count),
				GuestCount:  sub(r.GuestCount, p.GuestCount),
				GuestSumNS:  sub(r.GuestSumNS, p.GuestSumNS),
				GuestMinNS:  r.GuestMinNS,
				GuestMaxNS:  r.GuestMaxNS,
				HandleCount: sub(r.HandleCount, p.HandleCount),
				HandleSumNS: sub(r.HandleSumNS, p.HandleSumNS),
				HandleMinNS: r.HandleMinNS,
				HandleMaxNS: r.HandleMaxNS,
			}
			if n.Count > 0 || n.GuestCount > 0 || n.HandleCount > 0 {
				d.Reasons = append(d.Reasons, n)
			}
		}
		if len(d.Reasons) > 0 {
			out = append(out, d)
		}
	}
	return out
}

// sub is a - b, 0 where a counter went backwards (it cannot: the maps only
// grow between a window's two readings; a reader that raced a program can
// see a word one event behind).
func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

// Schedule decides how long the programs stay detached between windows.
// Cost is per exit seen while attached, so the schedule aims at a fraction
// of the exits (which the stats fd counts exactly), not of the time: when
// the windows land on busier stretches than average it spaces them out,
// when on quieter ones it closes them up, within MinFraction..MaxFraction
// of the time. Until MinSamples exits were sampled it runs at MaxFraction,
// so that a short run still gets a usable sample.
type Schedule struct {
	// Target is the fraction of all exits to sample.
	Target float64
	// Window is how long each window stays attached.
	Window time.Duration
	// MinFraction and MaxFraction bound the attached share of the time.
	MinFraction, MaxFraction float64
	// MinSamples is the sample a run gets at MaxFraction before the
	// schedule aims at Target.
	MinSamples uint64
}

// DefaultSchedule samples 2% of the exits in 2 ms windows (many short
// strata follow a bursty boot better than a few long ones), between 0.5%
// and 20% of the time, the first 1000 sampled exits at 20% (a short run
// still gets a sample; a long one pays for it once). The programs without
// breakdown cost about 1.36x an unprofiled exit while attached (issue 20's
// "bpf without profile extras"), so 2% of the exits add about 0.7% per
// exit, plus the attach and detach of each window (Sampling.SwitchNS).
func DefaultSchedule() Schedule {
	return Schedule{Target: 0.02, Window: 2 * time.Millisecond, MinFraction: 0.005, MaxFraction: 0.2, MinSamples: 1000}
}

// Gap is how long to stay detached after a window, given the exits sampled
// and counted exactly so far and the time spent attached and in all.
func (s Schedule) Gap(sampled, exact uint64, attached, elapsed time.Duration) time.Duration {
	f := s.Target
	switch {
	case sampled < s.MinSamples:
		f = s.MaxFraction
	case exact > 0 && attached > 0 && elapsed > 0 && sampled > 0:
		// density: the sampled share of the exits over the attached
		// share of the time (1 when the exits are spread evenly).
		density := (float64(sampled) / float64(exact)) / (float64(attached) / float64(elapsed))
		f = s.Target / density
	}
	f = min(max(f, s.MinFraction), s.MaxFraction)
	if f <= 0 || f >= 1 {
		return 0
	}
	return time.Duration(float64(s.Window) * (1/f - 1))
}
