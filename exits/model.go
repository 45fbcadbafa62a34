package exits

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/mvm-dev/mvm/exits/hist"
)

// The exit model: what a kvm_exit reader (exits/tracepoint's perf rings,
// exits/bpfagg's BPF maps) fills per vCPU, and how those numbers merge,
// order and become report rows. The readers only decode; merging,
// ordering, percentiles and naming happen here once.

// ReasonStats are the numbers of one (vCPU, reason).
type ReasonStats struct {
	Reason string
	// Count is the number of kvm_exit samples.
	Count uint64
	// Guest time: previous kvm_entry -> this kvm_exit. GuestCount exits had
	// a preceding entry on the same thread (the first exit after attaching
	// or after lost records has none).
	GuestCount                         uint64
	GuestSumNS, GuestMinNS, GuestMaxNS uint64
	// Breakdown holds the reason's parts (SYS64 by register, DABT_LOW by
	// device, ...), largest first; they add up to Count once the
	// aggregate is flushed.
	Breakdown []RowStats
	// Handle time: this kvm_exit -> the next kvm_entry. HandleCount exits
	// were followed by an entry (the last exit of a thread is not).
	HandleCount                           uint64
	HandleSumNS, HandleMinNS, HandleMaxNS uint64
}

// AddGuest adds one guest time.
func (s *ReasonStats) AddGuest(ns uint64) {
	addTimes(&s.GuestCount, &s.GuestSumNS, &s.GuestMinNS, &s.GuestMaxNS, 1, ns, ns, ns)
}

// AddHandle adds one handling time.
func (s *ReasonStats) AddHandle(ns uint64) {
	addTimes(&s.HandleCount, &s.HandleSumNS, &s.HandleMinNS, &s.HandleMaxNS, 1, ns, ns, ns)
}

// Merge adds o's counts and times into s (min and max over both); the
// breakdown rows are left alone (MergeRows merges those).
func (s *ReasonStats) Merge(o *ReasonStats) {
	s.Count += o.Count
	addTimes(&s.GuestCount, &s.GuestSumNS, &s.GuestMinNS, &s.GuestMaxNS, o.GuestCount, o.GuestSumNS, o.GuestMinNS, o.GuestMaxNS)
	addTimes(&s.HandleCount, &s.HandleSumNS, &s.HandleMinNS, &s.HandleMaxNS, o.HandleCount, o.HandleSumNS, o.HandleMinNS, o.HandleMaxNS)
}

// addTimes adds n durations with sum, minimum lo and maximum hi (one
// sample: n = 1, sum = lo = hi) to the count, sum, min and max of one kind
// of time. A min is only meaningful with a count, so the first durations
// set it.
func addTimes(count, sum, minNS, maxNS *uint64, n, s, lo, hi uint64) {
	if n == 0 {
		return
	}
	if *count == 0 || lo < *minNS {
		*minNS = lo
	}
	*maxNS = max(*maxNS, hi)
	*count += n
	*sum += s
}

// RowStats are one breakdown row of one (vCPU, reason).
type RowStats struct {
	Key                      string
	Count                    uint64
	GuestCount, GuestSumNS   uint64
	HandleCount, HandleSumNS uint64
}

// Merge adds o's counts and times into r.
func (r *RowStats) Merge(o *RowStats) {
	r.Count += o.Count
	r.GuestCount += o.GuestCount
	r.GuestSumNS += o.GuestSumNS
	r.HandleCount += o.HandleCount
	r.HandleSumNS += o.HandleSumNS
}

// MergeRows merges breakdown rows by key name into into (two keys can
// share a name, as the regions of one device do) and returns it.
func MergeRows(into []RowStats, from []RowStats) []RowStats {
	for i := range from {
		j := slices.IndexFunc(into, func(r RowStats) bool { return r.Key == from[i].Key })
		if j < 0 {
			into = append(into, from[i])
			continue
		}
		into[j].Merge(&from[i])
	}
	return into
}

// SortRowStats orders breakdown rows largest first, then by key.
func SortRowStats(rs []RowStats) {
	slices.SortFunc(rs, func(x, y RowStats) int { return cmp.Or(cmp.Compare(y.Count, x.Count), cmp.Compare(x.Key, y.Key)) })
}

// SortReasonStats orders reasons by count, descending, then by name.
func SortReasonStats(rs []ReasonStats) {
	slices.SortFunc(rs, func(x, y ReasonStats) int {
		return cmp.Or(cmp.Compare(y.Count, x.Count), cmp.Compare(x.Reason, y.Reason))
	})
}

// VCPUStats is the aggregate of one vCPU (VCPU -1 gathers threads that
// were never mapped to a vCPU).
type VCPUStats struct {
	VCPU int
	// Reasons holds one entry per reason seen.
	Reasons []ReasonStats
	// Entries counts kvm_entry samples.
	Entries uint64
	// Lost is the number of records the kernel dropped (or rows a full
	// map could not take); with Lost > 0 every count is a lower bound.
	Lost uint64
	// Reordered counts records older than one already processed for the
	// same thread (they are counted but not timed).
	Reordered uint64
}

// Count is the number of kvm_exit samples of one reason (0 if none).
func (v VCPUStats) Count(reason string) uint64 {
	for _, r := range v.Reasons {
		if r.Reason == reason {
			return r.Count
		}
	}
	return 0
}

// Exits is the number of kvm_exit samples of every reason.
func (v VCPUStats) Exits() uint64 {
	var n uint64
	for _, r := range v.Reasons {
		n += r.Count
	}
	return n
}

// ThreadStats is what a reader kept of one thread: its counters and its
// reasons, each with its breakdown rows (in any order).
type ThreadStats struct {
	TID     int
	Totals  VCPUStats // Entries, Lost, Reordered; VCPU and Reasons unused
	Reasons []ReasonStats
}

// GroupByVCPU merges per-thread numbers into per-vCPU ones with vcpuOf
// (thread id -> vCPU; ok false gathers the thread under vCPU -1): vCPUs in
// ascending order, reasons by count, descending, breakdown rows largest
// first. A thread whose vCPU is learnt late still lands on its row.
func GroupByVCPU(threads []ThreadStats, vcpuOf func(tid int) (int, bool)) []VCPUStats {
	byVCPU := map[int]*VCPUStats{}
	reasons := map[int]map[string]*ReasonStats{}
	for _, t := range threads {
		id, ok := vcpuOf(t.TID)
		if !ok {
			id = -1
		}
		v := byVCPU[id]
		if v == nil {
			v = &VCPUStats{VCPU: id}
			byVCPU[id] = v
			reasons[id] = map[string]*ReasonStats{}
		}
		v.Entries += t.Totals.Entries
		v.Lost += t.Totals.Lost
		v.Reordered += t.Totals.Reordered
		for i := range t.Reasons {
			r := &t.Reasons[i]
			m := reasons[id][r.Reason]
			if m == nil {
				m = &ReasonStats{Reason: r.Reason}
				reasons[id][r.Reason] = m
			}
			m.Merge(r)
			m.Breakdown = MergeRows(m.Breakdown, r.Breakdown)
		}
	}
	ids := make([]int, 0, len(byVCPU))
	for id := range byVCPU {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := make([]VCPUStats, 0, len(ids))
	for _, id := range ids {
		v := *byVCPU[id]
		for _, s := range reasons[id] {
			SortRowStats(s.Breakdown)
			v.Reasons = append(v.Reasons, *s)
		}
		SortReasonStats(v.Reasons)
		out = append(out, v)
	}
	return out
}

// Total merges per-vCPU aggregates into one (VCPU -1).
func Total(vs []VCPUStats) VCPUStats {
	tot := VCPUStats{VCPU: -1}
	byName := make(map[string]*ReasonStats)
	for _, v := range vs {
		tot.Entries += v.Entries
		tot.Lost += v.Lost
		tot.Reordered += v.Reordered
		for i := range v.Reasons {
			r := &v.Reasons[i]
			s, ok := byName[r.Reason]
			if !ok {
				s = &ReasonStats{Reason: r.Reason}
				byName[r.Reason] = s
			}
			s.Merge(r)
			s.Breakdown = MergeRows(s.Breakdown, r.Breakdown)
		}
	}
	for _, s := range byName {
		SortRowStats(s.Breakdown)
		tot.Reasons = append(tot.Reasons, *s)
	}
	SortReasonStats(tot.Reasons)
	return tot
}

// LatencyOf is the percentiles of a pair of histograms: guest time and
// handling time.
func LatencyOf(guest, handle *hist.H) *Latency {
	p := func(h *hist.H) Percentiles {
		return Percentiles{P50: h.Quantile(0.5), P90: h.Quantile(0.9), P99: h.Quantile(0.99), Max: h.Max()}
	}
	return &Latency{Guest: p(guest), Handle: p(handle)}
}

// TraceDetails is the VM-wide part of a kvm_exit aggregate: latency
// percentiles per reason and breakdown row, device addresses, exit PCs and
// the boot phases.
type TraceDetails struct {
	// Latency and RowLatency: percentiles per reason, and per reason and
	// breakdown key.
	Latency    map[string]*Latency
	RowLatency map[string]map[string]*Latency
	// Addresses: the top guest-physical addresses of each device row.
	Addresses map[string]map[string][]AddressCount
	// PCs: exit PCs per reason with their counts; PCsOther the exits past
	// the bound on distinct PCs.
	PCs      map[string]map[uint64]uint64
	PCsOther map[string]uint64
	// Phases, in boot order, with their bounds.
	Phases []PhaseRows
	// Userspace is when the guest reached userspace (nil if not seen).
	Userspace *UserspaceStart
	// FirstNS is the CLOCK_MONOTONIC time of the first kvm_entry.
	FirstNS uint64
}

// TraceRows turns a kvm_exit aggregate into per-vCPU rows and total rows
// of the report, with Time chosen by the namer's PerfTime. With d, the
// total rows carry percentiles and their breakdown rows percentiles and
// device addresses.
func TraceRows(n Namer, vs []VCPUStats, d *TraceDetails) []Row {
	var rows []Row
	for _, v := range vs {
		for _, s := range v.Reasons {
			rows = append(rows, traceRow(n, strconv.Itoa(v.VCPU), s, nil))
		}
	}
	for _, s := range Total(vs).Reasons {
		rows = append(rows, traceRow(n, TotalVCPU, s, d))
	}
	return rows
}

func traceRow(n Namer, vcpu string, s ReasonStats, d *TraceDetails) Row {
	r := Row{
		Source:       SourceTracepoint,
		VCPU:         vcpu,
		Reason:       s.Reason,
		Count:        s.Count,
		HandleNS:     s.HandleSumNS,
		HandleCount:  s.HandleCount,
		HandleMeanNS: MeanNS(s.HandleSumNS, s.HandleCount),
		HandleMinNS:  s.HandleMinNS,
		HandleMaxNS:  s.HandleMaxNS,
		GuestNS:      s.GuestSumNS,
		GuestCount:   s.GuestCount,
	}
	guestTime := n.PerfTime() == GuestTime
	if guestTime {
		r.TimeNS, r.TimeCount = s.GuestSumNS, s.GuestCount
		r.TimeMinNS, r.TimeMaxNS = s.GuestMinNS, s.GuestMaxNS
	} else {
		r.TimeNS, r.TimeCount = s.HandleSumNS, s.HandleCount
		r.TimeMinNS, r.TimeMaxNS = s.HandleMinNS, s.HandleMaxNS
	}
	r.TimeMeanNS = MeanNS(r.TimeNS, r.TimeCount)
	if d != nil {
		r.Percentiles = d.Latency[s.Reason]
	}
	for _, b := range s.Breakdown {
		br := BreakdownRow{Key: b.Key, Samples: b.Count, TimeNS: b.GuestSumNS, HandleNS: b.HandleSumNS}
		if !guestTime {
			br.TimeNS = b.HandleSumNS
		}
		if d != nil {
			br.Percentiles = d.RowLatency[s.Reason][b.Key]
			br.Addresses = d.Addresses[s.Reason][b.Key]
		}
		r.Breakdown = append(r.Breakdown, br)
	}
	return r
}

// AddTrace adds the rows of a kvm_exit aggregate (per vCPU and total) to
// the report and marks the tracepoint source used; with d, also the
// phases and the userspace start.
func (r *Report) AddTrace(n Namer, vs []VCPUStats, d *TraceDetails) {
	r.Arch = n.Arch()
	r.PerfTime = n.PerfTime().String()
	r.Rows = append(r.Rows, TraceRows(n, vs, d)...)
	if d != nil {
		r.ByPhase = d.Phases
		r.Userspace = d.Userspace
	}
	for _, v := range vs {
		r.TraceLost += v.Lost
		r.TraceReordered += v.Reordered
	}
	r.SetSource(SourceTracepoint, "kvm:kvm_entry and kvm:kvm_exit samples of every vCPU thread (perf_event_open)", nil)
}
