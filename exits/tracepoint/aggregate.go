package tracepoint

import (
	"cmp"
	"slices"
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

// threadState is the pairing state of one thread, as perf kvm stat keeps
// per vcpu_event_record.
type threadState struct {
	tid int
	// entry: time of the last kvm_entry not yet closed by an exit.
	entry    uint64
	hasEntry bool
	// pending: the last exit not yet closed by an entry, and p what the
	// breakdown needs of it.
	pending    *exits.ReasonStats
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
	stats  map[int]map[string]*exits.ReasonStats // tid -> reason -> stats
	totals map[int]*exits.VCPUStats              // tid -> counters besides reasons

	layout  exits.Layout
	opts    Options
	held    []Event                                       // events not yet processed (Options.Lag)
	rows    map[int]map[string]map[uint64]*exits.RowStats // tid -> reason -> key -> row
	details map[string]*reasonDetail                      // VM-wide, per reason
	phases  [exits.NumPhases]map[string]*exits.PhaseTotals
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
		stats:   make(map[int]map[string]*exits.ReasonStats),
		totals:  make(map[int]*exits.VCPUStats),
		rows:    make(map[int]map[string]map[uint64]*exits.RowStats),
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
// those younger than Options.Lag held back for the next call; within one
// thread, records should arrive in time order across batches, and older
// ones are counted but not timed.
func (a *Aggregator) Add(evs []Event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.held = append(a.held, evs...)
	horizon := ^uint64(0)
	if a.opts.Now != nil {
		horizon = a.opts.Now() - a.opts.Lag
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

func (a *Aggregator) threadTotals(tid int) *exits.VCPUStats {
	v, ok := a.totals[tid]
	if !ok {
		v = &exits.VCPUStats{}
		a.totals[tid] = v
	}
	return v
}

func (a *Aggregator) reason(tid int, name string) *exits.ReasonStats {
	m, ok := a.stats[tid]
	if !ok {
		m = make(map[string]*exits.ReasonStats)
		a.stats[tid] = m
	}
	s, ok := m[name]
	if !ok {
		s = &exits.ReasonStats{Reason: name}
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
			if ev.Detail == DetailHVC && exits.IsCPUOn(ev.Val) && a.cpuOnAt == 0 {
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
			if exits.BreakdownClass(a.namer, ev.Code, ev.Sub) != 0 {
				rows := a.rowsOf(ev.TID, name)
				if rows[exits.KeyUnknown] == nil {
					rows[exits.KeyUnknown] = &exits.RowStats{}
				}
				rows[exits.KeyUnknown].Count++
			}
			return
		}
		p := pendingExit{reason: name, at: ev.Time, pc: ev.PC, class: exits.BreakdownClass(a.namer, ev.Code, ev.Sub), key: exits.KeyUnknown}
		if t.hasEntry && ev.Time >= t.entry {
			p.guest, p.hasGuest = ev.Time-t.entry, true
			s.AddGuest(p.guest)
		}
		a.noteExitPC(t, ev.PC, ev.Time)
		t.hasEntry = false
		t.pending, t.pendingAt, t.hasPending, t.p = s, ev.Time, true, p
	}
}

// Snapshot returns a copy of the aggregate, vCPUs in ascending order and
// reasons by count, descending; threads never mapped to a vCPU are
// gathered under VCPU -1.
func (a *Aggregator) Snapshot() []exits.VCPUStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	threads := make([]exits.ThreadStats, 0, len(a.totals))
	for tid, tt := range a.totals {
		t := exits.ThreadStats{TID: tid, Totals: *tt}
		for name, rs := range a.stats[tid] {
			c := *rs
			c.Breakdown = a.snapshotRows(tid, name)
			t.Reasons = append(t.Reasons, c)
		}
		threads = append(threads, t)
	}
	return exits.GroupByVCPU(threads, func(tid int) (int, bool) { v, ok := a.vcpus[tid]; return v, ok })
}
