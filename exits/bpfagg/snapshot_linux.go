//go:build linux

package bpfagg

import (
	"fmt"

	"github.com/mvm-dev/mvm/exits"
	"github.com/mvm-dev/mvm/exits/hist"
)

// Snapshot is what the maps hold, grouped by vCPU.
type Snapshot struct {
	VCPUs []exits.VCPUStats
	// Details holds the VM-wide latency percentiles per reason and
	// breakdown row (nil without histograms).
	Details *exits.TraceDetails
	// HistDropped counts samples left out of the histograms (their map
	// was full); counts and times do not miss them.
	HistDropped uint64
}

// Snapshot reads the maps and groups them by vCPU with vcpuOf (thread id
// -> vCPU; ok false gathers the thread under vCPU -1), in the form of the
// perf_event path's aggregate. Each thread's exit still waiting for its
// next entry is counted with its guest time, as the perf path flushes it.
// While the threads run, a thread's numbers can trail by the exit it is
// handling.
//
// The reading goes in four steps on a reading value: the row map
// (readRows), the thread states with their open rows and pending exits
// (readStates), the histograms (readHists, then details turns them into
// percentiles) and the grouping by vCPU, which the exit model does.
func (c *Counter) Snapshot(vcpuOf func(tid int) (int, bool)) (*Snapshot, error) {
	r := &reading{c: c, threads: map[uint32]map[string]*acc{}, hists: map[histKey]*histAcc{}, entries: map[uint32]uint64{}}
	if c.phaseMem != nil {
		r.bounds = c.bounds()
	}
	if err := r.readRows(); err != nil {
		return nil, err
	}
	if err := r.readStates(); err != nil {
		return nil, err
	}
	snap := &Snapshot{HistDropped: r.histDropped}
	if c.hists != nil {
		if err := r.readHists(); err != nil {
			return nil, err
		}
		d, err := r.details()
		if err != nil {
			return nil, err
		}
		snap.Details = d
	}
	snap.VCPUs = exits.GroupByVCPU(r.threadStats(), vcpuOf)
	return snap, nil
}

// reading is one Snapshot in the making: per thread and reason the rows
// read so far, VM-wide per (reason, key) the histograms, per phase the
// totals.
type reading struct {
	c        *Counter
	bounds   exits.PhaseBounds
	threads  map[uint32]map[string]*acc // tid -> reason name -> numbers
	hists    map[histKey]*histAcc
	perPhase [exits.NumPhases]map[string]exits.PhaseTotals
	entries  map[uint32]uint64 // kvm_entry count per thread
	// lost counts rows the full row map could not take; histDropped
	// samples the full histogram map could not.
	lost, histDropped uint64
	// pending are the guest times of exits still waiting for their next
	// entry, for the histograms (their rows are counted by readStates).
	pending []pendingGuest
}

// acc is one (thread, reason) in the making, its breakdown rows by key.
type acc struct {
	rs   exits.ReasonStats
	rows map[uint64]*exits.RowStats
}

// histAcc is one VM-wide (reason, key) histogram pair in the making.
type histAcc struct {
	guest, handle []uint64
	rs            exits.ReasonStats // sums, minima, maxima
}

// pendingGuest is the guest time of a thread's exit not yet entered back.
type pendingGuest struct {
	tid uint32
	k   histKey
	ns  uint64
}

// breakdownKey is the model's key of a map key's detail: the programs
// mark a SYS64 key they took from the ESR (kvm_handle_sys_reg or the
// vCPU's ESR) rather than from kvm_sys_access, and leave its decoding
// to here.
func breakdownKey(detail uint64) uint64 {
	if detail>>56 == exits.ClassSys && detail&sysESRMark != 0 {
		return exits.SysRegKeyFromESR(detail)
	}
	return detail
}

// reason is thread tid's numbers for the reason of k, and k's breakdown
// key.
func (r *reading) reason(tid uint32, k histKey) (*acc, uint64) {
	name := r.c.namer.ExitName(k.Code, k.Sub)
	m := r.threads[tid]
	if m == nil {
		m = map[string]*acc{}
		r.threads[tid] = m
	}
	a := m[name]
	if a == nil {
		a = &acc{rs: exits.ReasonStats{Reason: name}, rows: map[uint64]*exits.RowStats{}}
		m[name] = a
	}
	return a, breakdownKey(k.Detail)
}

// stats is a row value in the model's form.
func (v rowValue) stats() exits.ReasonStats {
	return exits.ReasonStats{Count: v.Count,
		GuestCount: v.GuestCount, GuestSumNS: v.GuestSum, GuestMinNS: v.GuestMin, GuestMaxNS: v.GuestMax,
		HandleCount: v.HandleCount, HandleSumNS: v.HandleSum, HandleMinNS: v.HandleMin, HandleMaxNS: v.HandleMax}
}

// add accounts one row value of thread tid in boot phase phase: to the
// thread's reason, the phase totals, the (reason, key) histogram's sums
// and the reason's breakdown row.
func (r *reading) add(tid, phase uint32, k histKey, v rowValue) {
	a, key := r.reason(tid, k)
	rv := v.stats()
	a.rs.Merge(&rv)
	if r.c.phaseMem != nil && phase < exits.NumPhases {
		if r.perPhase[phase] == nil {
			r.perPhase[phase] = map[string]exits.PhaseTotals{}
		}
		t := r.perPhase[phase][a.rs.Reason]
		t.Add(exits.PhaseTotals{Count: v.Count, GuestNS: v.GuestSum, HandleNS: v.HandleSum})
		r.perPhase[phase][a.rs.Reason] = t
	}
	if r.c.hists != nil {
		hk := histKey{k.Code, k.Sub, key}
		h := r.hists[hk]
		if h == nil {
			h = &histAcc{guest: make([]uint64, hist.NumBuckets), handle: make([]uint64, hist.NumBuckets)}
			r.hists[hk] = h
		}
		h.rs.Merge(&rv)
	}
	if r.c.cfg.NoBreakdown || exits.BreakdownClass(r.c.namer, k.Code, k.Sub) == 0 {
		return
	}
	row := a.rows[key]
	if row == nil {
		row = &exits.RowStats{}
		a.rows[key] = row
	}
	row.Merge(&exits.RowStats{Count: v.Count, GuestCount: v.GuestCount, GuestSumNS: v.GuestSum, HandleCount: v.HandleCount, HandleSumNS: v.HandleSum})
}

// readRows reads the row map: the rows the programs closed.
func (r *reading) readRows() error {
	var rk rowKey
	var rv rowValue
	it := r.c.rows.Iterate()
	for it.Next(&rk, &rv) {
		r.add(rk.TID, rk.Phase, histKey{rk.Code, rk.Sub, rk.Detail}, rv)
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("read the BPF row map: %w", err)
	}
	return nil
}

// readStates reads every thread's state: its counters, the row it keeps
// open (not yet in the row map) and its exit still waiting for an entry,
// counted with its guest time as the perf path flushes it.
func (r *reading) readStates() error {
	return r.c.eachState(func(tid uint32, st threadState) {
		r.entries[tid] += st.Entries
		r.lost += st.Drops
		r.histDropped += st.HistDrops
		if st.OPhase != 0 {
			r.add(tid, uint32(st.OPhase-1), histKey{st.OCode, st.OSub, st.ODetail}, st.ORow)
		}
		if st.Exit == 0 {
			return
		}
		v := rowValue{Count: 1}
		if st.HasGuest != 0 {
			v.GuestSum, v.GuestCount, v.GuestMin, v.GuestMax = st.Guest, 1, st.Guest, st.Guest
		}
		k := histKey{st.Code, st.Sub, st.Detail}
		r.add(tid, uint32(r.bounds.PhaseOf(st.Exit)), k, v)
		if st.HasGuest != 0 {
			r.pending = append(r.pending, pendingGuest{tid, k, st.Guest})
		}
	})
}

// addBuckets adds a histogram value's buckets (guest and handle
// interleaved) to its (reason, key) pair.
func (r *reading) addBuckets(hk histKey, buckets *[2 * hist.NumBuckets]uint64) {
	h := r.hists[histKey{hk.Code, hk.Sub, breakdownKey(hk.Detail)}]
	if h == nil {
		return // a row not read (it appeared after the row map was)
	}
	for i := range hist.NumBuckets {
		h.guest[i] += buckets[2*i]
		h.handle[i] += buckets[2*i+1]
	}
}

// readHists reads the histogram map and the histogram slots, and adds
// the pending exits' guest times.
func (r *reading) readHists() error {
	var buckets [2 * hist.NumBuckets]uint64
	var hk histKey
	it := r.c.hists.Iterate()
	for it.Next(&hk, &buckets) {
		r.addBuckets(hk, &buckets)
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("read the BPF histogram map: %w", err)
	}
	if r.c.histSlots != nil {
		var slot uint32
		var v struct {
			Owner   uint64
			Buckets [2 * hist.NumBuckets]uint64
		}
		it = r.c.histSlots.Iterate()
		for it.Next(&slot, &v) {
			if v.Owner != 0 {
				r.addBuckets(unpackHistKey(v.Owner), &v.Buckets)
			}
		}
		if err := it.Err(); err != nil {
			return fmt.Errorf("read the BPF histogram slot map: %w", err)
		}
	}
	for _, p := range r.pending {
		if h := r.hists[histKey{p.k.Code, p.k.Sub, breakdownKey(p.k.Detail)}]; h != nil {
			h.guest[hist.Index(p.ns)]++
		}
	}
	return nil
}

// details turns the VM-wide histograms into percentiles per reason and
// breakdown row, and adds the device addresses and the phases.
func (r *reading) details() (*exits.TraceDetails, error) {
	d := &exits.TraceDetails{Latency: map[string]*exits.Latency{}, RowLatency: map[string]map[string]*exits.Latency{}}
	type pair struct{ guest, handle hist.H }
	byReason := map[string]*pair{}
	byRow := map[string]map[string]*pair{}
	for k, h := range r.hists {
		g, _ := hist.FromBuckets(h.guest, h.rs.GuestSumNS, h.rs.GuestMinNS, h.rs.GuestMaxNS)
		hh, _ := hist.FromBuckets(h.handle, h.rs.HandleSumNS, h.rs.HandleMinNS, h.rs.HandleMaxNS)
		name := r.c.namer.ExitName(k.Code, k.Sub)
		if byReason[name] == nil {
			byReason[name] = &pair{}
		}
		byReason[name].guest.Merge(g)
		byReason[name].handle.Merge(hh)
		if exits.BreakdownClass(r.c.namer, k.Code, k.Sub) == 0 {
			continue
		}
		if byRow[name] == nil {
			byRow[name] = map[string]*pair{}
		}
		key := r.c.cfg.Layout.KeyName(k.Detail)
		if byRow[name][key] == nil {
			byRow[name][key] = &pair{}
		}
		byRow[name][key].guest.Merge(g)
		byRow[name][key].handle.Merge(hh)
	}
	for name, p := range byReason {
		d.Latency[name] = exits.LatencyOf(&p.guest, &p.handle)
	}
	for name, m := range byRow {
		d.RowLatency[name] = map[string]*exits.Latency{}
		for key, p := range m {
			d.RowLatency[name][key] = exits.LatencyOf(&p.guest, &p.handle)
		}
	}
	if r.c.addrs != nil {
		var err error
		if d.Addresses, err = r.c.addresses(); err != nil {
			return nil, err
		}
	}
	if r.c.phaseMem != nil {
		d.Phases, d.Userspace = exits.PhaseReport(r.bounds, r.perPhase)
		d.FirstNS = r.bounds.First
	}
	return d, nil
}

// threadStats hands the per-thread numbers to the exit model, breakdown
// keys named; rows the full map could not take go to thread 0 (no vCPU),
// making every count a lower bound.
func (r *reading) threadStats() []exits.ThreadStats {
	var out []exits.ThreadStats
	for tid, m := range r.threads {
		t := exits.ThreadStats{TID: int(tid), Totals: exits.VCPUStats{Entries: r.entries[tid]}}
		for _, a := range m {
			rs := a.rs
			for k, row := range a.rows {
				x := *row
				x.Key = r.c.cfg.Layout.KeyName(k)
				rs.Breakdown = append(rs.Breakdown, x)
			}
			t.Reasons = append(t.Reasons, rs)
		}
		out = append(out, t)
	}
	for tid, n := range r.entries {
		if r.threads[tid] == nil {
			out = append(out, exits.ThreadStats{TID: int(tid), Totals: exits.VCPUStats{Entries: n}})
		}
	}
	if r.lost > 0 {
		out = append(out, exits.ThreadStats{TID: 0, Totals: exits.VCPUStats{Lost: r.lost}})
	}
	return out
}

// SeenCounts is what the programs saw of the process, from their thread states,
// for a diagnosis when they counted nothing: which of the two programs ran
// (kvm_entry counts Entries; kvm_exit leaves an exit pending, which the
// next kvm_entry accounts into the thread's open row or the row map).
type SeenCounts struct {
	Threads int
	// Entries is the kvm_entry events; Pending the threads with an exit
	// not yet accounted; Open the exits in the threads' open rows (not
	// yet flushed to the row map); Drops the exits lost to a full row
	// map.
	Entries, Pending, Open, Drops uint64
}

// Seen reads the thread states (see SeenCounts).
func (c *Counter) Seen() (SeenCounts, error) {
	var s SeenCounts
	err := c.eachState(func(_ uint32, st threadState) {
		s.Threads++
		s.Entries += st.Entries
		s.Drops += st.Drops
		if st.Exit != 0 {
			s.Pending++
		}
		if st.OPhase != 0 {
			s.Open += st.ORow.Count
		}
	})
	return s, err
}
