package tracepoint

import (
	"slices"

	"github.com/mvm-dev/mvm/exits"
	"github.com/mvm-dev/mvm/exits/hist"
)

// Detail events: tracepoints KVM fires while handling an exit, between its
// kvm_exit and the next kvm_entry on the same thread, that say what the
// exit was about (read from each event's tracefs format).
const (
	// DetailSysReg is kvm:kvm_sys_access: Val is the register encoding
	// (Op0<<14 | Op1<<11 | CRn<<7 | CRm<<3 | Op2) | is_write<<16.
	DetailSysReg DetailKind = iota + 1
	// DetailSysRegESR is kvm:kvm_handle_sys_reg: Val is the ESR (hsr),
	// whose ISS encodes the register (used when kvm_sys_access is absent).
	DetailSysRegESR
	// DetailFault is kvm:kvm_guest_fault: Val is the faulting IPA.
	DetailFault
	// DetailHVC is kvm:kvm_hvc_arm64: Val is X0, the SMCCC function ID.
	DetailHVC
	// DetailWFx is kvm:kvm_wfx_arm64: Val is 1 for WFE, 0 for WFI.
	DetailWFx
	// DetailSMC is no tracepoint but the VMM's word (NoteSMC): Val is X0,
	// the SMCCC function ID, of an SMC that KVM forwarded to it
	// (KVM_EXIT_HYPERCALL with KVM_HYPERCALL_EXIT_SMC, api.rst). KVM's
	// handle_smc fires no tracepoint, so an SMC KVM answers itself stays
	// "unknown".
	DetailSMC
)

// DetailKind says which detail tracepoint an EventDetail came from.
type DetailKind uint8

// Options tune an Aggregator.
type Options struct {
	// Now and Lag make Add hold back events younger than Lag on the
	// CLOCK_MONOTONIC clock Now reads, so that a mark the VMM sets when it
	// handles an exit (MarkUserspace) is known before the events after it
	// are assigned a phase. Nil Now processes every event at once.
	Now func() uint64
	Lag uint64
	// Plain keeps only what perf kvm stat has (counts and times per
	// reason): no breakdown, percentiles, PCs or phases.
	Plain bool
}

// latency is a pair of histograms.
type latency struct{ guest, handle hist.H }

func (l *latency) percentiles() *exits.Latency { return exits.LatencyOf(&l.guest, &l.handle) }

// reasonDetail is the VM-wide detail of one reason.
type reasonDetail struct {
	lat      latency
	rowLat   map[uint64]*latency
	addrs    map[uint64]map[uint64]uint64 // key -> IPA -> count
	addrMore map[uint64]uint64
	pcs      map[uint64]uint64
	pcMore   uint64
}

// detailKey is the breakdown key a detail event gives an exit of class
// cls, or false when the event does not describe such an exit.
func (a *Aggregator) detailKey(cls uint64, ev *Event) (uint64, bool) {
	switch {
	case cls == exits.ClassSys && ev.Detail == DetailSysReg:
		return exits.SysRegKey(ev.Val), true
	case cls == exits.ClassSys && ev.Detail == DetailSysRegESR:
		return exits.SysRegKeyFromESR(ev.Val), true
	case cls == exits.ClassDev && ev.Detail == DetailFault:
		return exits.DevKey(a.layout.Region(ev.Val)), true
	case cls == exits.ClassFunc && (ev.Detail == DetailHVC || ev.Detail == DetailSMC):
		return exits.FuncKey(ev.Val), true
	case cls == exits.ClassWFx && ev.Detail == DetailWFx:
		return exits.WFxKey(ev.Val), true
	}
	return 0, false
}

// finishExit accounts a thread's pending exit in the breakdown, the
// histograms, the PCs and the phases, once its handling time is known (or
// known to be unknowable).
func (a *Aggregator) finishExit(t *threadState, handle uint64, hasHandle bool) {
	if !t.hasPending {
		return
	}
	p := &t.p
	if hasHandle {
		t.pending.AddHandle(handle)
	}
	if a.opts.Plain {
		t.hasPending, t.pending = false, nil
		return
	}
	d := a.detail(p.reason)
	if p.hasGuest {
		d.lat.guest.Add(p.guest)
	}
	if hasHandle {
		d.lat.handle.Add(handle)
	}
	if n := d.pcs[p.pc]; n > 0 || len(d.pcs) < exits.MaxPCsPerReason {
		d.pcs[p.pc] = n + 1
	} else {
		d.pcMore++
	}
	if p.class != 0 {
		key := p.key
		rows := a.rowsOf(t.tid, p.reason)
		r, ok := rows[key]
		if !ok && len(rows) >= exits.MaxKeysPerReason {
			key = exits.KeyOther
			r, ok = rows[key]
		}
		if !ok {
			r = &exits.RowStats{}
			rows[key] = r
		}
		r.Count++
		if p.hasGuest {
			r.GuestCount++
			r.GuestSumNS += p.guest
		}
		if hasHandle {
			r.HandleCount++
			r.HandleSumNS += handle
		}
		l, ok := d.rowLat[key]
		if !ok {
			l = &latency{}
			d.rowLat[key] = l
		}
		if p.hasGuest {
			l.guest.Add(p.guest)
		}
		if hasHandle {
			l.handle.Add(handle)
		}
		if p.class == exits.ClassDev && p.hasIPA {
			m, ok := d.addrs[key]
			if !ok {
				m = map[uint64]uint64{}
				d.addrs[key] = m
			}
			if n := m[p.ipa]; n > 0 || len(m) < exits.MaxAddrsPerRow {
				m[p.ipa] = n + 1
			} else {
				d.addrMore[key]++
			}
		}
	}
	ph := a.bounds().PhaseOf(p.at)
	pm := a.phases[ph]
	if pm == nil {
		pm = map[string]*exits.PhaseTotals{}
		a.phases[ph] = pm
	}
	acc := pm[p.reason]
	if acc == nil {
		acc = &exits.PhaseTotals{}
		pm[p.reason] = acc
	}
	acc.Count++
	if p.hasGuest {
		acc.GuestNS += p.guest
	}
	if hasHandle {
		acc.HandleNS += handle
	}
	t.hasPending, t.pending = false, nil
}

func (a *Aggregator) detail(reason string) *reasonDetail {
	d, ok := a.details[reason]
	if !ok {
		d = &reasonDetail{rowLat: map[uint64]*latency{}, addrs: map[uint64]map[uint64]uint64{},
			addrMore: map[uint64]uint64{}, pcs: map[uint64]uint64{}}
		a.details[reason] = d
	}
	return d
}

func (a *Aggregator) rowsOf(tid int, reason string) map[uint64]*exits.RowStats {
	m, ok := a.rows[tid]
	if !ok {
		m = map[string]map[uint64]*exits.RowStats{}
		a.rows[tid] = m
	}
	r, ok := m[reason]
	if !ok {
		r = map[uint64]*exits.RowStats{}
		m[reason] = r
	}
	return r
}

// bounds are the phase boundaries seen so far (events are processed in
// time order, so an exit's phase is that of the bounds when it is).
func (a *Aggregator) bounds() exits.PhaseBounds {
	return exits.PhaseBounds{First: a.firstAt, CPUOn: a.cpuOnAt, AllIn: a.allInAt, User: a.userAt,
		Mark: a.markAt, FirstUser: a.firstUserAt, VCPUs: a.layout.VCPUs}
}

// noteEntry tracks the secondaries' first entries after the first CPU_ON.
func (a *Aggregator) noteEntry(t *threadState, at uint64) {
	if a.firstAt == 0 {
		a.firstAt = at
	}
	if t.entered || a.vcpuOf(t.tid) <= 0 {
		t.entered = true
		return
	}
	t.entered = true
	if a.cpuOnAt == 0 || a.layout.VCPUs < 2 {
		return
	}
	a.secondariesIn++
	if a.secondariesIn == a.layout.VCPUs-1 && a.allInAt == 0 {
		a.allInAt = at
	}
}

// noteExitPC watches for the first exit from a user address: a PC in the
// TTBR0 half, outside guest RAM (where the kernel runs before its MMU is
// on), on a vCPU that has exited from a kernel address before.
func (a *Aggregator) noteExitPC(t *threadState, pc, at uint64) {
	if exits.KernelPC(pc) {
		t.sawKernel = true
		return
	}
	if t.sawKernel && !a.layout.InRAM(pc) && a.firstUserAt == 0 {
		a.firstUserAt = at
		if a.markAt == 0 {
			a.userAt = at
		}
	}
}

// smcNote is the VMM's word about one SMC it handled (NoteSMC).
type smcNote struct {
	at  uint64
	fid uint32
}

// maxSMCNotes bounds the notes a thread keeps while its records are late.
const maxSMCNotes = 256

// NoteSMC records the SMCCC function ID of the SMC that thread tid's last
// exit (an SMC64 or SMC32 trap) brought to the VMM, which handles it at
// time at (CLOCK_MONOTONIC, so between that kvm_exit and the next
// kvm_entry). The note waits for those records, which the ring reader may
// deliver much later (it polls every 100 ms), and keys the exit when its
// entry is processed.
func (a *Aggregator) NoteSMC(tid int, at uint64, fid uint32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.thread(tid)
	if len(t.notes) >= maxSMCNotes {
		t.notes = slices.Delete(t.notes, 0, maxSMCNotes/2)
	}
	t.notes = append(t.notes, smcNote{at: at, fid: fid})
}

// keyFromNote keys thread t's pending exit, an SMC no detail event named,
// with the note the VMM made before the entry at time entry and after the
// exit; notes up to entry are used up (older ones belonged to exits that
// were lost or not SMCs).
func (a *Aggregator) keyFromNote(t *threadState, entry uint64) {
	n := 0
	for n < len(t.notes) && t.notes[n].at <= entry {
		n++
	}
	if t.hasPending && !t.p.keyed && t.p.class == exits.ClassFunc {
		for _, nt := range t.notes[:n] {
			if nt.at < t.pendingAt {
				continue
			}
			ev := Event{Kind: EventDetail, Detail: DetailSMC, Val: uint64(nt.fid)}
			if k, ok := a.detailKey(t.p.class, &ev); ok {
				t.p.key, t.p.keyed = k, true
				if exits.IsCPUOn(ev.Val) && a.cpuOnAt == 0 {
					a.cpuOnAt = t.pendingAt
				}
			}
			break
		}
	}
	t.notes = slices.Delete(t.notes, 0, n)
}

// MarkUserspace records the guest's userspace boot marker (the VMM saw
// code 0x41) at CLOCK_MONOTONIC time at. The marker is the precise edge
// and wins over the first user-PC exit.
func (a *Aggregator) MarkUserspace(at uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.markAt == 0 {
		a.markAt = at
		a.userAt = at
	}
}

// Configure sets the guest layout and the options. Call it before the
// first Add.
func (a *Aggregator) Configure(l exits.Layout, o Options) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.layout, a.opts = l, o
}

// Flush processes every held event and accounts the exits still waiting
// for their next entry (without a handling time). Call it once the vCPUs
// have stopped, before the final Snapshot and Details.
func (a *Aggregator) Flush() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.process(^uint64(0))
	for _, t := range a.threads {
		a.finishExit(t, 0, false)
	}
}

// Details returns a copy of the VM-wide detail.
func (a *Aggregator) Details() *exits.TraceDetails {
	a.mu.Lock()
	defer a.mu.Unlock()
	d := &exits.TraceDetails{
		Latency: map[string]*exits.Latency{}, RowLatency: map[string]map[string]*exits.Latency{},
		Addresses: map[string]map[string][]exits.AddressCount{},
		PCs:       map[string]map[uint64]uint64{}, PCsOther: map[string]uint64{},
		FirstNS: a.firstAt,
	}
	for reason, rd := range a.details {
		d.Latency[reason] = rd.lat.percentiles()
		rl := map[string]*exits.Latency{}
		for k, l := range rd.rowLat {
			rl[a.layout.KeyName(k)] = l.percentiles()
		}
		d.RowLatency[reason] = rl
		am := map[string][]exits.AddressCount{}
		for k, m := range rd.addrs {
			am[a.layout.KeyName(k)] = exits.TopAddresses(m, rd.addrMore[k])
		}
		d.Addresses[reason] = am
		d.PCs[reason] = maps(rd.pcs)
		d.PCsOther[reason] = rd.pcMore
	}
	var per [exits.NumPhases]map[string]exits.PhaseTotals
	for ph, pm := range a.phases {
		per[ph] = map[string]exits.PhaseTotals{}
		for reason, acc := range pm {
			per[ph][reason] = *acc
		}
	}
	d.Phases, d.Userspace = exits.PhaseReport(a.bounds(), per)
	return d
}

func maps(m map[uint64]uint64) map[uint64]uint64 {
	out := make(map[uint64]uint64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// snapshotRows copies one (thread, reason)'s breakdown rows, largest first.
func (a *Aggregator) snapshotRows(tid int, reason string) []exits.RowStats {
	m := a.rows[tid][reason]
	if len(m) == 0 {
		return nil
	}
	out := make([]exits.RowStats, 0, len(m))
	for k, r := range m {
		c := *r
		c.Key = a.layout.KeyName(k)
		out = append(out, c)
	}
	exits.SortRowStats(out)
	return out
}
