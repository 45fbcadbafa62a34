package tracepoint

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/mvm-dev/mvm/exits"
	"github.com/mvm-dev/mvm/exits/hist"
	"github.com/mvm-dev/mvm/psci"
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

// Bounds that keep the aggregate's memory fixed however long the guest
// runs: distinct breakdown keys per reason, addresses per device row, and
// exit PCs per reason; past them, exits count under "other".
const (
	maxKeysPerReason = 64
	maxAddrsPerRow   = 32
	maxPCsPerReason  = 4096
	topAddrs         = 8
)

// A breakdown key is a class in the top byte and a value below it.
const (
	classUnknown = 0
	classOther   = 1
	classSys     = 2
	classFunc    = 3
	classWFx     = 4
	classDev     = 5

	keyUnknown  = classUnknown << 56
	keyOther    = classOther << 56
	devUnmapped = 0xffff_ffff
)

// Region is a named guest-physical address range, for naming the device
// of a data or instruction abort (vGIC distributor, redistributors, the
// VMM's devices, RAM).
type Region struct {
	Name       string
	Base, Size uint64
}

// Layout tells the aggregator about the guest it profiles.
type Layout struct {
	// Regions name the guest-physical address ranges; an abort elsewhere
	// is "unmapped".
	Regions []Region
	// RAM is the guest's RAM: a PC inside it is not a user address (the
	// kernel runs there with the MMU off).
	RAM []Region
	// VCPUs is the number of vCPUs; the secondaries phase ends when all
	// but the boot vCPU have entered the guest.
	VCPUs int
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

// RowStats are one breakdown row of one (vCPU, reason).
type RowStats struct {
	Key                      string
	Count                    uint64
	GuestCount, GuestSumNS   uint64
	HandleCount, HandleSumNS uint64
}

// Merge adds o's counts and times into r (the BPF source merges its
// rows with it too).
func (r *RowStats) Merge(o *RowStats) {
	r.Count += o.Count
	r.GuestCount += o.GuestCount
	r.GuestSumNS += o.GuestSumNS
	r.HandleCount += o.HandleCount
	r.HandleSumNS += o.HandleSumNS
}

// latency is a pair of histograms.
type latency struct{ guest, handle hist.H }

func (l *latency) percentiles() *exits.Latency {
	p := func(h *hist.H) exits.Percentiles {
		return exits.Percentiles{P50: h.Quantile(0.5), P90: h.Quantile(0.9), P99: h.Quantile(0.99), Max: h.Max()}
	}
	return &exits.Latency{Guest: p(&l.guest), Handle: p(&l.handle)}
}

// reasonDetail is the VM-wide detail of one reason.
type reasonDetail struct {
	lat      latency
	rowLat   map[uint64]*latency
	addrs    map[uint64]map[uint64]uint64 // key -> IPA -> count
	addrMore map[uint64]uint64
	pcs      map[uint64]uint64
	pcMore   uint64
}

// Phases of the boot the tracepoint totals are split by (vmm_setup, before
// the first KVM_RUN, has no exits).
const (
	phaseBootToSMP = iota
	phaseSecondaries
	phaseKernelToUser
	phaseAfterUser
	numPhases
)

// NumPhases is the number of boot phases the tracepoint totals are split
// by (boot_to_smp, secondaries, kernel_to_user, after_userspace).
const NumPhases = numPhases

// PhaseBounds are the boot phase boundaries on the CLOCK_MONOTONIC clock
// (0 until seen): the first kvm_entry, the first PSCI CPU_ON exit, the
// last secondary's first entry after it, userspace (the marker, else the
// first user-PC exit), the marker and the first user-PC exit; VCPUs is the
// number of vCPUs (0: not known, no phases).
type PhaseBounds struct {
	First, CPUOn, AllIn, User, Mark, FirstUser uint64
	VCPUs                                      int
}

// PhaseOf is the phase (0..NumPhases-1) of an exit at time at with the
// boundaries known so far.
func (b PhaseBounds) PhaseOf(at uint64) int {
	switch {
	case b.User != 0 && at >= b.User:
		return phaseAfterUser
	case b.AllIn != 0 && at >= b.AllIn:
		return phaseKernelToUser
	case b.CPUOn != 0 && at >= b.CPUOn:
		return phaseSecondaries
	case b.VCPUs == 1:
		return phaseKernelToUser
	}
	return phaseBootToSMP
}

// PhaseTotals are one reason's exits in one phase.
type PhaseTotals struct{ Count, GuestNS, HandleNS uint64 }

func phaseName(p int) string {
	return [numPhases]string{"boot_to_smp", "secondaries", "kernel_to_user", "after_userspace"}[p]
}

type phaseAcc struct {
	count, guestNS, handleNS uint64
}

// breakdownClass is the kind of breakdown of an arm64 exit (0: none).
func breakdownClass(n exits.Namer, code, sub uint64) uint64 {
	if n.Arch() != "arm64" || code != exits.Arm64ExceptionTrap {
		return 0
	}
	switch sub {
	case 0x18: // SYS64
		return classSys
	case 0x20, 0x24: // IABT_LOW, DABT_LOW
		return classDev
	case 0x16, 0x17: // HVC64, SMC64
		return classFunc
	case 0x01: // WFx
		return classWFx
	}
	return 0
}

// detailKey is the breakdown key a detail event gives an exit of class
// cls, or false when the event does not describe such an exit.
func (a *Aggregator) detailKey(cls uint64, ev *Event) (uint64, bool) {
	switch {
	case cls == classSys && ev.Detail == DetailSysReg:
		return classSys<<56 | ev.Val&0x1ffff, true
	case cls == classSys && ev.Detail == DetailSysRegESR:
		return SysRegKeyFromESR(ev.Val), true
	case cls == classDev && ev.Detail == DetailFault:
		return classDev<<56 | uint64(a.region(ev.Val)), true
	case cls == classFunc && (ev.Detail == DetailHVC || ev.Detail == DetailSMC):
		return classFunc<<56 | ev.Val&0xffff_ffff, true
	case cls == classWFx && ev.Detail == DetailWFx:
		return classWFx<<56 | ev.Val&1, true
	}
	return 0, false
}

func (a *Aggregator) region(ipa uint64) uint32 {
	for i, r := range a.layout.Regions {
		if ipa >= r.Base && ipa-r.Base < r.Size {
			return uint32(i)
		}
	}
	return devUnmapped
}

// keyName names a breakdown key.
func (a *Aggregator) keyName(k uint64) string {
	v := k & (1<<56 - 1)
	switch k >> 56 {
	case classOther:
		return "other"
	case classSys:
		r := exits.SysReg{Op0: uint8(v >> 14 & 3), Op1: uint8(v >> 11 & 7), CRn: uint8(v >> 7 & 15), CRm: uint8(v >> 3 & 15), Op2: uint8(v & 7)}
		if v>>16&1 == 1 {
			return r.Name() + " write"
		}
		return r.Name() + " read"
	case classFunc:
		fid := uint32(v)
		if psci.InRange(fid) {
			return psci.Name(fid)
		}
		if n := smcccName(fid); n != "" {
			return n
		}
		return fmt.Sprintf("SMCCC 0x%08x", fid)
	case classWFx:
		if v == 1 {
			return "WFE"
		}
		return "WFI"
	case classDev:
		if int(v) < len(a.layout.Regions) {
			return a.layout.Regions[v].Name
		}
		if len(a.layout.Regions) == 0 {
			return "no memory map" // another VMM's guest: see the addresses
		}
		return "unmapped"
	}
	return "unknown"
}

// isCPUOn reports a PSCI CPU_ON function ID (SMC32 or SMC64 convention).
func isCPUOn(fid uint64) bool { return fid == uint64(psci.FnCPUOn) || fid == uint64(psci.FnCPUOn64) }

// kernelPC reports an address in the TTBR1 half (bit 55 set: the kernel's
// half of the address space, Arm ARM D8.1 "Address translation").
func kernelPC(pc uint64) bool { return pc>>55&1 == 1 }

// finishExit accounts a thread's pending exit in the breakdown, the
// histograms, the PCs and the phases, once its handling time is known (or
// known to be unknowable).
func (a *Aggregator) finishExit(t *threadState, handle uint64, hasHandle bool) {
	if !t.hasPending {
		return
	}
	p := &t.p
	if hasHandle {
		t.pending.addHandle(handle)
	}
	if a.layout.Plain {
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
	if n := d.pcs[p.pc]; n > 0 || len(d.pcs) < maxPCsPerReason {
		d.pcs[p.pc] = n + 1
	} else {
		d.pcMore++
	}
	if p.class != 0 {
		key := p.key
		rows := a.rowsOf(t.tid, p.reason)
		r, ok := rows[key]
		if !ok && len(rows) >= maxKeysPerReason {
			key = keyOther
			r, ok = rows[key]
		}
		if !ok {
			r = &RowStats{}
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
		if p.class == classDev && p.hasIPA {
			m, ok := d.addrs[key]
			if !ok {
				m = map[uint64]uint64{}
				d.addrs[key] = m
			}
			if n := m[p.ipa]; n > 0 || len(m) < maxAddrsPerRow {
				m[p.ipa] = n + 1
			} else {
				d.addrMore[key]++
			}
		}
	}
	ph := a.phaseAt(p.at)
	pm := a.phases[ph]
	if pm == nil {
		pm = map[string]*phaseAcc{}
		a.phases[ph] = pm
	}
	acc := pm[p.reason]
	if acc == nil {
		acc = &phaseAcc{}
		pm[p.reason] = acc
	}
	acc.count++
	if p.hasGuest {
		acc.guestNS += p.guest
	}
	if hasHandle {
		acc.handleNS += handle
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

func (a *Aggregator) rowsOf(tid int, reason string) map[uint64]*RowStats {
	m, ok := a.rows[tid]
	if !ok {
		m = map[string]map[uint64]*RowStats{}
		a.rows[tid] = m
	}
	r, ok := m[reason]
	if !ok {
		r = map[uint64]*RowStats{}
		m[reason] = r
	}
	return r
}

// phaseAt is the phase an exit at time at belongs to, from the boundaries
// seen so far (events are processed in time order).
func (a *Aggregator) phaseAt(at uint64) int {
	return PhaseBounds{CPUOn: a.cpuOnAt, AllIn: a.allInAt, User: a.userAt, VCPUs: a.layout.VCPUs}.PhaseOf(at)
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
	if kernelPC(pc) {
		t.sawKernel = true
		return
	}
	inRAM := false
	for _, r := range a.layout.RAM {
		inRAM = inRAM || pc >= r.Base && pc-r.Base < r.Size
	}
	if t.sawKernel && !inRAM && a.firstUserAt == 0 {
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
	if t.hasPending && !t.p.keyed && t.p.class == classFunc {
		for _, nt := range t.notes[:n] {
			if nt.at < t.pendingAt {
				continue
			}
			ev := Event{Kind: EventDetail, Detail: DetailSMC, Val: uint64(nt.fid)}
			if k, ok := a.detailKey(t.p.class, &ev); ok {
				t.p.key, t.p.keyed = k, true
				if isCPUOn(ev.Val) && a.cpuOnAt == 0 {
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

// Configure sets the guest layout. Call it before the first Add.
func (a *Aggregator) Configure(l Layout) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.layout = l
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

// Details is the VM-wide part of the aggregate: latency percentiles per
// reason and breakdown row, device addresses, exit PCs and the phases.
type Details struct {
	// Latency and RowLatency: percentiles per reason, and per reason and
	// breakdown key.
	Latency    map[string]*exits.Latency
	RowLatency map[string]map[string]*exits.Latency
	// Addresses: the top guest-physical addresses of each device row.
	Addresses map[string]map[string][]exits.AddressCount
	// PCs: exit PCs per reason with their counts; PCsOther the exits past
	// the bound on distinct PCs.
	PCs      map[string]map[uint64]uint64
	PCsOther map[string]uint64
	// Phases, in boot order, with their bounds.
	Phases []exits.PhaseRows
	// Userspace is when the guest reached userspace (nil if not seen).
	Userspace *exits.UserspaceStart
	// FirstNS is the CLOCK_MONOTONIC time of the first kvm_entry.
	FirstNS uint64
}

// Details returns a copy of the VM-wide detail.
func (a *Aggregator) Details() *Details {
	a.mu.Lock()
	defer a.mu.Unlock()
	d := &Details{
		Latency: map[string]*exits.Latency{}, RowLatency: map[string]map[string]*exits.Latency{},
		Addresses: map[string]map[string][]exits.AddressCount{},
		PCs:       map[string]map[uint64]uint64{}, PCsOther: map[string]uint64{},
		FirstNS: a.firstAt,
	}
	for reason, rd := range a.details {
		d.Latency[reason] = rd.lat.percentiles()
		rl := map[string]*exits.Latency{}
		for k, l := range rd.rowLat {
			rl[a.keyName(k)] = l.percentiles()
		}
		d.RowLatency[reason] = rl
		am := map[string][]exits.AddressCount{}
		for k, m := range rd.addrs {
			am[a.keyName(k)] = TopAddresses(m, rd.addrMore[k])
		}
		d.Addresses[reason] = am
		d.PCs[reason] = maps(rd.pcs)
		d.PCsOther[reason] = rd.pcMore
	}
	var per [NumPhases]map[string]PhaseTotals
	for ph, pm := range a.phases {
		per[ph] = map[string]PhaseTotals{}
		for reason, acc := range pm {
			per[ph][reason] = PhaseTotals{Count: acc.count, GuestNS: acc.guestNS, HandleNS: acc.handleNS}
		}
	}
	b := PhaseBounds{First: a.firstAt, CPUOn: a.cpuOnAt, AllIn: a.allInAt, User: a.userAt, Mark: a.markAt, FirstUser: a.firstUserAt, VCPUs: a.layout.VCPUs}
	d.Phases, d.Userspace = PhaseReport(b, per)
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
func (a *Aggregator) snapshotRows(tid int, reason string) []RowStats {
	m := a.rows[tid][reason]
	if len(m) == 0 {
		return nil
	}
	out := make([]RowStats, 0, len(m))
	for k, r := range m {
		c := *r
		c.Key = a.keyName(k)
		out = append(out, c)
	}
	sortRowStats(out)
	return out
}

func sortRowStats(rs []RowStats) {
	slices.SortFunc(rs, func(x, y RowStats) int { return cmp.Or(cmp.Compare(y.Count, x.Count), cmp.Compare(x.Key, y.Key)) })
}

// mergeRows merges breakdown rows by key.
func mergeRows(into []RowStats, from []RowStats) []RowStats {
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

// smcccName names the non-PSCI SMCCC calls a Linux guest makes of KVM: the
// Arm architecture calls (SMCCC v1.1+, DEN0028), the TRNG interface
// (DEN0098) and KVM's vendor hypervisor services (Documentation/virt/kvm/
// arm/hypercalls.rst, pvtime.rst).
func smcccName(fid uint32) string {
	switch fid {
	case psci.SMCCCVersionFID:
		return "SMCCC_VERSION"
	case 0x8000_0001:
		return "SMCCC_ARCH_FEATURES"
	case 0x8000_0002:
		return "SMCCC_ARCH_SOC_ID"
	case 0x8000_8000:
		return "SMCCC_ARCH_WORKAROUND_1"
	case 0x8000_7fff:
		return "SMCCC_ARCH_WORKAROUND_2"
	case 0x8000_3fff:
		return "SMCCC_ARCH_WORKAROUND_3"
	case 0x8400_0050:
		return "TRNG_VERSION"
	case 0x8400_0051:
		return "TRNG_FEATURES"
	case 0x8400_0052:
		return "TRNG_GET_UUID"
	case 0x8400_0053, 0xc400_0053:
		return "TRNG_RND"
	case 0x8600_ff01:
		return "KVM_VENDOR_HYP_UID"
	case 0x8600_0000:
		return "KVM_HYP_FEATURES"
	case 0xc500_0020:
		return "PV_TIME_FEATURES"
	case 0xc500_0021:
		return "PV_TIME_ST"
	}
	return ""
}

// PhaseReport builds the report's phases, in boot order with their bounds
// relative to the first entry, and the userspace start, from the bounds
// and the per-phase totals.
func PhaseReport(b PhaseBounds, per [NumPhases]map[string]PhaseTotals) ([]exits.PhaseRows, *exits.UserspaceStart) {
	rel := func(t uint64) int64 {
		if t == 0 || t < b.First {
			return -1
		}
		return int64(t - b.First)
	}
	starts := [numPhases]uint64{b.First, b.CPUOn, b.AllIn, b.User}
	var out []exits.PhaseRows
	// Without the number of vCPUs (a VMM attached to while it runs) there
	// are no phases to tell.
	for ph := 0; ph < numPhases && b.VCPUs > 0; ph++ {
		pm := per[ph]
		if len(pm) == 0 {
			continue
		}
		pr := exits.PhaseRows{Phase: phaseName(ph), StartNS: rel(starts[ph]), EndNS: -1}
		if ph == phaseBootToSMP || pr.StartNS < 0 {
			pr.StartNS = max(pr.StartNS, 0)
		}
		for next := ph + 1; next < numPhases; next++ {
			if starts[next] != 0 && len(per[next]) > 0 {
				pr.EndNS = rel(starts[next])
				break
			}
		}
		for reason, acc := range pm {
			pr.Rows = append(pr.Rows, exits.PhaseRow{Reason: reason, Samples: acc.Count, TimeNS: acc.GuestNS, HandleNS: acc.HandleNS})
		}
		slices.SortFunc(pr.Rows, func(x, y exits.PhaseRow) int {
			return cmp.Or(cmp.Compare(y.Samples, x.Samples), cmp.Compare(x.Reason, y.Reason))
		})
		out = append(out, pr)
	}
	var u *exits.UserspaceStart
	if b.User != 0 {
		u = &exits.UserspaceStart{Source: "first_user_exit", AtNS: rel(b.User), FirstUserExitNS: rel(b.FirstUser)}
		if b.Mark != 0 {
			u.Source = "marker"
		}
	}
	return out, u
}

// TopAddresses lists the topAddrs addresses of a device row with the most
// exits (ties: the lower address first), then "other": the rest of them
// and more, the exits at addresses past maxAddrsPerRow.
func TopAddresses(m map[uint64]uint64, more uint64) []exits.AddressCount {
	var ac []exits.AddressCount
	ips := make([]uint64, 0, len(m))
	for ip := range m {
		ips = append(ips, ip)
	}
	slices.SortFunc(ips, func(x, y uint64) int { return cmp.Or(cmp.Compare(m[y], m[x]), cmp.Compare(x, y)) })
	rest := more
	for i, ip := range ips {
		if i < topAddrs {
			ac = append(ac, exits.AddressCount{Addr: fmt.Sprintf("0x%x", ip), Samples: m[ip]})
		} else {
			rest += m[ip]
		}
	}
	if rest > 0 {
		ac = append(ac, exits.AddressCount{Addr: "other", Samples: rest})
	}
	return ac
}
