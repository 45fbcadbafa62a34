package tracepoint

import (
	"cmp"
	"slices"
	"strconv"
	"sync"

	"github.com/mvm-dev/mvm/exits"
)

// EventKind is the kind of a tracepoint record.
type EventKind uint8

// Trace record kinds.
const (
	// EventEntry is a kvm:kvm_entry sample: the thread enters the guest.
	EventEntry EventKind = iota
	// EventExit is a kvm:kvm_exit sample: the guest exited to the host.
	EventExit
	// EventLost says the kernel dropped Lost records of the thread's
	// buffer (PERF_RECORD_LOST) at about Time.
	EventLost
)

// Event is one decoded tracepoint record.
type Event struct {
	Kind EventKind
	// TID is the thread the record belongs to, CPU the CPU it was taken
	// on, Time its CLOCK_MONOTONIC timestamp in nanoseconds.
	TID  int
	CPU  int
	Time uint64
	// Code and Sub are the exit's raw reason fields for EventExit (see
	// Namer.CodeField and SubField).
	Code, Sub uint64
	// Lost is the number of records lost, for EventLost.
	Lost uint64
}

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
	// Handle time: this kvm_exit -> the next kvm_entry. HandleCount exits
	// were followed by an entry (the last exit of a thread is not).
	HandleCount                           uint64
	HandleSumNS, HandleMinNS, HandleMaxNS uint64
}

func (s *ReasonStats) addGuest(ns uint64) {
	if s.GuestCount == 0 || ns < s.GuestMinNS {
		s.GuestMinNS = ns
	}
	if ns > s.GuestMaxNS {
		s.GuestMaxNS = ns
	}
	s.GuestCount++
	s.GuestSumNS += ns
}

func (s *ReasonStats) addHandle(ns uint64) {
	if s.HandleCount == 0 || ns < s.HandleMinNS {
		s.HandleMinNS = ns
	}
	if ns > s.HandleMaxNS {
		s.HandleMaxNS = ns
	}
	s.HandleCount++
	s.HandleSumNS += ns
}

func (s *ReasonStats) merge(o *ReasonStats) {
	s.Count += o.Count
	if o.GuestCount > 0 {
		if s.GuestCount == 0 || o.GuestMinNS < s.GuestMinNS {
			s.GuestMinNS = o.GuestMinNS
		}
		s.GuestMaxNS = max(s.GuestMaxNS, o.GuestMaxNS)
		s.GuestCount += o.GuestCount
		s.GuestSumNS += o.GuestSumNS
	}
	if o.HandleCount > 0 {
		if s.HandleCount == 0 || o.HandleMinNS < s.HandleMinNS {
			s.HandleMinNS = o.HandleMinNS
		}
		s.HandleMaxNS = max(s.HandleMaxNS, o.HandleMaxNS)
		s.HandleCount += o.HandleCount
		s.HandleSumNS += o.HandleSumNS
	}
}

// threadState is the pairing state of one thread, as perf kvm stat keeps
// per vcpu_event_record.
type threadState struct {
	// entry: time of the last kvm_entry not yet closed by an exit.
	entry    uint64
	hasEntry bool
	// pending: the last exit not yet closed by an entry.
	pending    *ReasonStats
	pendingAt  uint64
	hasPending bool
	last       uint64
}

// VCPUStats is the aggregate of one vCPU (VCPU -1 gathers threads that
// were never mapped to a vCPU).
type VCPUStats struct {
	VCPU int
	// Reasons holds one entry per reason seen.
	Reasons []ReasonStats
	// Entries counts kvm_entry samples.
	Entries uint64
	// Lost is the number of records the kernel dropped; with Lost > 0
	// every count is a lower bound.
	Lost uint64
	// Reordered counts records older than one already processed for the
	// same thread (they are counted but not timed).
	Reordered uint64
}

// Aggregator pairs kvm_entry and kvm_exit samples per thread and
// aggregates them per vCPU and reason. It is safe for concurrent use: a
// reader goroutine feeds it while metrics scrapes read it.
type Aggregator struct {
	namer exits.Namer

	mu      sync.Mutex
	vcpus   map[int]int // tid -> vCPU
	threads map[int]*threadState
	// Kept per thread and grouped by vCPU in Snapshot, so a thread whose
	// vCPU is learnt late (another VMM's, SetVCPU after its first exits)
	// still lands on its vCPU's row.
	stats  map[int]map[string]*ReasonStats // tid -> reason -> stats
	totals map[int]*VCPUStats              // tid -> counters besides reasons
}

// NewAggregator returns an aggregator naming exits with n.
func NewAggregator(n exits.Namer) *Aggregator {
	return &Aggregator{
		namer:   n,
		vcpus:   make(map[int]int),
		threads: make(map[int]*threadState),
		stats:   make(map[int]map[string]*ReasonStats),
		totals:  make(map[int]*VCPUStats),
	}
}

// Namer is the namer the aggregator was made with.
func (a *Aggregator) Namer() exits.Namer { return a.namer }

// SetVCPU attributes thread tid to vCPU vcpu, including what it did
// before the call.
func (a *Aggregator) SetVCPU(tid, vcpu int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.vcpus[tid] = vcpu
}

// Add feeds a batch of records. The batch is processed in time order (a
// stable sort, since buffers of different CPUs or threads interleave);
// within one thread, records should arrive in time order across batches,
// and older ones are counted but not timed.
func (a *Aggregator) Add(evs []Event) {
	if len(evs) == 0 {
		return
	}
	sorted := slices.Clone(evs)
	slices.SortStableFunc(sorted, func(x, y Event) int { return cmp.Compare(x.Time, y.Time) })
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range sorted {
		a.add(&sorted[i])
	}
}

func (a *Aggregator) thread(tid int) *threadState {
	t, ok := a.threads[tid]
	if !ok {
		t = &threadState{}
		a.threads[tid] = t
	}
	return t
}

func (a *Aggregator) threadTotals(tid int) *VCPUStats {
	v, ok := a.totals[tid]
	if !ok {
		v = &VCPUStats{}
		a.totals[tid] = v
	}
	return v
}

func (a *Aggregator) reason(tid int, name string) *ReasonStats {
	m, ok := a.stats[tid]
	if !ok {
		m = make(map[string]*ReasonStats)
		a.stats[tid] = m
	}
	s, ok := m[name]
	if !ok {
		s = &ReasonStats{Reason: name}
		m[name] = s
	}
	return s
}

func (a *Aggregator) add(ev *Event) {
	t := a.thread(ev.TID)
	tot := a.threadTotals(ev.TID)
	inOrder := ev.Time >= t.last
	if !inOrder {
		tot.Reordered++
	} else {
		t.last = ev.Time
	}
	switch ev.Kind {
	case EventLost:
		// Whatever was lost may have been an entry or an exit: no
		// interval spanning the gap can be trusted.
		tot.Lost += ev.Lost
		t.hasEntry, t.hasPending, t.pending = false, false, nil
	case EventEntry:
		tot.Entries++
		if !inOrder {
			return
		}
		if t.hasPending && ev.Time >= t.pendingAt {
			t.pending.addHandle(ev.Time - t.pendingAt)
		}
		t.hasPending, t.pending = false, nil
		t.entry, t.hasEntry = ev.Time, true
	case EventExit:
		s := a.reason(ev.TID, a.namer.ExitName(ev.Code, ev.Sub))
		s.Count++
		if !inOrder {
			return
		}
		if t.hasEntry && ev.Time >= t.entry {
			s.addGuest(ev.Time - t.entry)
		}
		t.hasEntry = false
		t.pending, t.pendingAt, t.hasPending = s, ev.Time, true
	}
}

// Snapshot returns a copy of the aggregate, vCPUs in ascending order and
// reasons by count, descending; threads never mapped to a vCPU are
// gathered under VCPU -1.
func (a *Aggregator) Snapshot() []VCPUStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	byVCPU := make(map[int]*VCPUStats)
	reasons := make(map[int]map[string]*ReasonStats)
	for tid, tt := range a.totals {
		vcpu, ok := a.vcpus[tid]
		if !ok {
			vcpu = -1
		}
		v, ok := byVCPU[vcpu]
		if !ok {
			v = &VCPUStats{VCPU: vcpu}
			byVCPU[vcpu] = v
			reasons[vcpu] = make(map[string]*ReasonStats)
		}
		v.Entries += tt.Entries
		v.Lost += tt.Lost
		v.Reordered += tt.Reordered
		for name, rs := range a.stats[tid] {
			m, ok := reasons[vcpu][name]
			if !ok {
				m = &ReasonStats{Reason: name}
				reasons[vcpu][name] = m
			}
			m.merge(rs)
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
			v.Reasons = append(v.Reasons, *s)
		}
		sortReasonStats(v.Reasons)
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
			s.merge(r)
		}
	}
	for _, s := range byName {
		tot.Reasons = append(tot.Reasons, *s)
	}
	sortReasonStats(tot.Reasons)
	return tot
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

func sortReasonStats(rs []ReasonStats) {
	slices.SortFunc(rs, func(x, y ReasonStats) int {
		if c := cmp.Compare(y.Count, x.Count); c != 0 {
			return c
		}
		return cmp.Compare(x.Reason, y.Reason)
	})
}

// Rows turns a tracepoint aggregate into per-vCPU rows and total rows of
// the report model, with Time chosen by the namer's PerfTime.
func Rows(n exits.Namer, vs []VCPUStats) []exits.Row {
	var rows []exits.Row
	for _, v := range vs {
		for _, s := range v.Reasons {
			rows = append(rows, row(n, strconv.Itoa(v.VCPU), s))
		}
	}
	for _, s := range Total(vs).Reasons {
		rows = append(rows, row(n, exits.TotalVCPU, s))
	}
	return rows
}

func row(n exits.Namer, vcpu string, s ReasonStats) exits.Row {
	r := exits.Row{
		Source:       exits.SourceTracepoint,
		VCPU:         vcpu,
		Reason:       s.Reason,
		Count:        s.Count,
		HandleNS:     s.HandleSumNS,
		HandleCount:  s.HandleCount,
		HandleMeanNS: exits.MeanNS(s.HandleSumNS, s.HandleCount),
		HandleMinNS:  s.HandleMinNS,
		HandleMaxNS:  s.HandleMaxNS,
		GuestNS:      s.GuestSumNS,
		GuestCount:   s.GuestCount,
	}
	if n.PerfTime() == exits.GuestTime {
		r.TimeNS, r.TimeCount = s.GuestSumNS, s.GuestCount
		r.TimeMinNS, r.TimeMaxNS = s.GuestMinNS, s.GuestMaxNS
	} else {
		r.TimeNS, r.TimeCount = s.HandleSumNS, s.HandleCount
		r.TimeMinNS, r.TimeMaxNS = s.HandleMinNS, s.HandleMaxNS
	}
	r.TimeMeanNS = exits.MeanNS(r.TimeNS, r.TimeCount)
	return r
}

// AddTo adds the rows of a tracepoint aggregate (per vCPU and total) to rep
// and marks the tracepoint source used.
func AddTo(rep *exits.Report, n exits.Namer, vs []VCPUStats) {
	rep.Arch = n.Arch()
	rep.PerfTime = n.PerfTime().String()
	rep.Rows = append(rep.Rows, Rows(n, vs)...)
	for _, v := range vs {
		rep.TraceLost += v.Lost
	}
	rep.SetSource(exits.SourceTracepoint, "kvm:kvm_entry and kvm:kvm_exit samples of every vCPU thread (perf_event_open)", nil)
}
