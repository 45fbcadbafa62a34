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
	// EventDetail is a tracepoint KVM fires while handling the thread's
	// last exit (Detail says which; Val is its value).
	EventDetail
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
	// Namer.CodeField and SubField), PC its guest PC (vcpu_pc).
	Code, Sub uint64
	PC        uint64
	// Detail and Val describe an EventDetail.
	Detail DetailKind
	Val    uint64
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
	// Breakdown holds the reason's parts (SYS64 by register, DABT_LOW by
	// device, ...), largest first; they add up to Count once the
	// aggregate is flushed.
	Breakdown []RowStats
	// Handle time: this kvm_exit -> the next kvm_entry. HandleCount exits
	// were followed by an entry (the last exit of a thread is not).
	HandleCount                           uint64
	HandleSumNS, HandleMinNS, HandleMaxNS uint64
}

func (s *ReasonStats) addGuest(ns uint64) {
	addTimes(&s.GuestCount, &s.GuestSumNS, &s.GuestMinNS, &s.GuestMaxNS, 1, ns, ns, ns)
}

func (s *ReasonStats) addHandle(ns uint64) {
	addTimes(&s.HandleCount, &s.HandleSumNS, &s.HandleMinNS, &s.HandleMaxNS, 1, ns, ns, ns)
}

// Merge adds o's counts and times into s (min and max over both). The
// BPF source merges its per-thread map values with it too.
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

// threadState is the pairing state of one thread, as perf kvm stat keeps
// per vcpu_event_record.
type threadState struct {
	tid int
	// entry: time of the last kvm_entry not yet closed by an exit.
	entry    uint64
	hasEntry bool
	// pending: the last exit not yet closed by an entry, and p what the
	// breakdown needs of it.
	pending    *ReasonStats
	pendingAt  uint64
	hasPending bool
	p          pendingExit
	last       uint64
	// entered: the thread has had a kvm_entry; sawKernel: an exit from a
	// kernel address.
	entered, sawKernel bool
	// notes: the VMM's word on SMCs it handled (NoteSMC), oldest first.
	notes []smcNote
}

// pendingExit is an exit waiting for its next entry.
type pendingExit struct {
	reason        string
	at, pc, guest uint64
	hasGuest      bool
	class, key    uint64
	keyed         bool
	ipa           uint64
	hasIPA        bool
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

	layout  Layout
	held    []Event                                 // events not yet processed (Layout.Lag)
	rows    map[int]map[string]map[uint64]*RowStats // tid -> reason -> key -> row
	details map[string]*reasonDetail                // VM-wide, per reason
	phases  [numPhases]map[string]*phaseAcc
	// Phase boundaries (CLOCK_MONOTONIC ns, 0 until seen).
	firstAt, cpuOnAt, allInAt, userAt, markAt, firstUserAt uint64
	secondariesIn                                          int
}

// NewAggregator returns an aggregator naming exits with n.
func NewAggregator(n exits.Namer) *Aggregator {
	return &Aggregator{
		namer:   n,
		vcpus:   make(map[int]int),
		threads: make(map[int]*threadState),
		stats:   make(map[int]map[string]*ReasonStats),
		totals:  make(map[int]*VCPUStats),
		rows:    make(map[int]map[string]map[uint64]*RowStats),
		details: make(map[string]*reasonDetail),
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

// vcpuOf is the vCPU of a thread (-1 if not known).
func (a *Aggregator) vcpuOf(tid int) int {
	if v, ok := a.vcpus[tid]; ok {
		return v
	}
	return -1
}

// Add feeds a batch of records. They are processed in time order (a
// stable sort, since buffers of different CPUs or threads interleave),
// those younger than Layout.Lag held back for the next call; within one
// thread, records should arrive in time order across batches, and older
// ones are counted but not timed.
func (a *Aggregator) Add(evs []Event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.held = append(a.held, evs...)
	horizon := ^uint64(0)
	if a.layout.Now != nil {
		horizon = a.layout.Now() - a.layout.Lag
	}
	a.process(horizon)
}

// process handles the held events up to time horizon, in time order.
func (a *Aggregator) process(horizon uint64) {
	if len(a.held) == 0 {
		return
	}
	slices.SortStableFunc(a.held, func(x, y Event) int { return cmp.Compare(x.Time, y.Time) })
	n := 0
	for n < len(a.held) && a.held[n].Time <= horizon {
		a.add(&a.held[n])
		n++
	}
	rest := copy(a.held, a.held[n:])
	a.held = a.held[:rest]
}

func (a *Aggregator) thread(tid int) *threadState {
	t, ok := a.threads[tid]
	if !ok {
		t = &threadState{tid: tid}
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
		a.finishExit(t, 0, false)
		t.hasEntry = false
	case EventEntry:
		tot.Entries++
		if !inOrder {
			return
		}
		a.noteEntry(t, ev.Time)
		if len(t.notes) > 0 {
			a.keyFromNote(t, ev.Time)
		}
		if t.hasPending && ev.Time >= t.pendingAt {
			a.finishExit(t, ev.Time-t.pendingAt, true)
		} else {
			a.finishExit(t, 0, false)
		}
		t.entry, t.hasEntry = ev.Time, true
	case EventDetail:
		if !inOrder || !t.hasPending || t.p.keyed {
			return
		}
		if k, ok := a.detailKey(t.p.class, ev); ok {
			t.p.key, t.p.keyed = k, true
			if ev.Detail == DetailFault {
				t.p.ipa, t.p.hasIPA = ev.Val, true
			}
			if ev.Detail == DetailHVC && isCPUOn(ev.Val) && a.cpuOnAt == 0 {
				a.cpuOnAt = t.pendingAt
			}
		}
	case EventExit:
		a.finishExit(t, 0, false) // an exit without an entry since the last one
		name := a.namer.ExitName(ev.Code, ev.Sub)
		s := a.reason(ev.TID, name)
		s.Count++
		if !inOrder {
			// Counted, but not timed, not broken down: the breakdown
			// counts only exits it can follow to their detail.
			t.hasEntry = false
			if breakdownClass(a.namer, ev.Code, ev.Sub) != 0 {
				rows := a.rowsOf(ev.TID, name)
				if rows[keyUnknown] == nil {
					rows[keyUnknown] = &RowStats{}
				}
				rows[keyUnknown].Count++
			}
			return
		}
		p := pendingExit{reason: name, at: ev.Time, pc: ev.PC, class: breakdownClass(a.namer, ev.Code, ev.Sub), key: keyUnknown}
		if t.hasEntry && ev.Time >= t.entry {
			p.guest, p.hasGuest = ev.Time-t.entry, true
			s.addGuest(p.guest)
		}
		a.noteExitPC(t, ev.PC, ev.Time)
		t.hasEntry = false
		t.pending, t.pendingAt, t.hasPending, t.p = s, ev.Time, true, p
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
	rows := make(map[int]map[string][]RowStats)
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
			rows[vcpu] = make(map[string][]RowStats)
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
			m.Merge(rs)
			rows[vcpu][name] = mergeRows(rows[vcpu][name], a.snapshotRows(tid, name))
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
		for name, s := range reasons[id] {
			c := *s
			c.Breakdown = rows[id][name]
			sortRowStats(c.Breakdown)
			v.Reasons = append(v.Reasons, c)
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
			s.Merge(r)
			s.Breakdown = mergeRows(s.Breakdown, r.Breakdown)
		}
	}
	for _, s := range byName {
		sortRowStats(s.Breakdown)
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
// the report model, with Time chosen by the namer's PerfTime. With d, the
// total rows carry percentiles and their breakdown rows percentiles and
// device addresses.
func Rows(n exits.Namer, vs []VCPUStats, d *Details) []exits.Row {
	var rows []exits.Row
	for _, v := range vs {
		for _, s := range v.Reasons {
			rows = append(rows, row(n, strconv.Itoa(v.VCPU), s, nil))
		}
	}
	for _, s := range Total(vs).Reasons {
		rows = append(rows, row(n, exits.TotalVCPU, s, d))
	}
	return rows
}

func row(n exits.Namer, vcpu string, s ReasonStats, d *Details) exits.Row {
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
	guestTime := n.PerfTime() == exits.GuestTime
	if guestTime {
		r.TimeNS, r.TimeCount = s.GuestSumNS, s.GuestCount
		r.TimeMinNS, r.TimeMaxNS = s.GuestMinNS, s.GuestMaxNS
	} else {
		r.TimeNS, r.TimeCount = s.HandleSumNS, s.HandleCount
		r.TimeMinNS, r.TimeMaxNS = s.HandleMinNS, s.HandleMaxNS
	}
	r.TimeMeanNS = exits.MeanNS(r.TimeNS, r.TimeCount)
	if d != nil {
		r.Percentiles = d.Latency[s.Reason]
	}
	for _, b := range s.Breakdown {
		br := exits.BreakdownRow{Key: b.Key, Samples: b.Count, TimeNS: b.GuestSumNS, HandleNS: b.HandleSumNS}
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

// AddTo adds the rows of a tracepoint aggregate (per vCPU and total) to rep
// and marks the tracepoint source used; with d, also the phases and the
// userspace start.
func AddTo(rep *exits.Report, n exits.Namer, vs []VCPUStats, d *Details) {
	rep.Arch = n.Arch()
	rep.PerfTime = n.PerfTime().String()
	rep.Rows = append(rep.Rows, Rows(n, vs, d)...)
	if d != nil {
		rep.ByPhase = d.Phases
		rep.Userspace = d.Userspace
	}
	for _, v := range vs {
		rep.TraceLost += v.Lost
	}
	rep.SetSource(exits.SourceTracepoint, "kvm:kvm_entry and kvm:kvm_exit samples of every vCPU thread (perf_event_open)", nil)
}
