//go:build linux && arm64

package integration

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mvm-dev/mvm/exits"
)

// The work of one iteration of guest/payloads/counts.s (N_MARKER,
// N_VERSION, N_SMC, N_WFI, N_SYSREG there). vCPU k runs (k + 1) * REPS iterations.
const (
	cntMarker  = 3
	cntVersion = 2
	cntSMC     = 1
	cntWFI     = 1
	cntSysreg  = 4
	cntSGI     = 2
	cntCPUs    = 2
)

// countsCPU is one "cpu K ..." line of the payload: what that vCPU did, as
// it counted it.
type countsCPU struct {
	iters, marker, version, wfi, early, sysreg, gicd, gicr, badiar, late, sgi, smc uint64
}

// countsOutput is the payload's console output, parsed.
type countsOutput struct {
	stdout   string
	reps     uint64
	cpu      map[int]countsCPU
	affPolls uint64
	done     bool
	errors   []string
}

var (
	reCountsReps = regexp.MustCompile(`^counts reps (\d+)$`)
	reCountsCPU  = regexp.MustCompile(`^cpu (\d+) iters (\d+) marker (\d+) version (\d+) wfi (\d+) early (\d+) sysreg (\d+) gicd (\d+) gicr (\d+) badiar (\d+) late (\d+) sgi (\d+) smc (\d+)$`)
	reCountsAff  = regexp.MustCompile(`^affinity polls (\d+)$`)
)

func parseCounts(t *testing.T, stdout string) countsOutput {
	t.Helper()
	o := countsOutput{stdout: stdout, cpu: map[int]countsCPU{}}
	num := func(s string) uint64 {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("bad number %q: %v", s, err)
		}
		return v
	}
	for _, l := range strings.Split(strings.TrimRight(stdout, "\n"), "\n") {
		if m := reCountsReps.FindStringSubmatch(l); m != nil {
			o.reps = num(m[1])
		} else if m := reCountsCPU.FindStringSubmatch(l); m != nil {
			var v [13]uint64
			for i := range v {
				v[i] = num(m[i+1])
			}
			o.cpu[int(v[0])] = countsCPU{v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12]}
		} else if m := reCountsAff.FindStringSubmatch(l); m != nil {
			o.affPolls = num(m[1])
		} else if l == "counts done" {
			o.done = true
		} else {
			o.errors = append(o.errors, l)
		}
	}
	return o
}

// countsPayload writes counts.bin with its REPS word (offset 16, after the
// magic "MVCOUNTS" at offset 8) set to reps. Patching one data word keeps
// the code and its layout byte for byte the same between runs, so
// whatever the runs share (boot, GIC setup, stage-2 faults on the same
// pages) cancels out in their difference.
func countsPayload(t testing.TB, reps uint64) string {
	t.Helper()
	img, err := os.ReadFile(payload(t, "counts.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if len(img) < 24 || !bytes.Equal(img[8:16], []byte("MVCOUNTS")) {
		t.Fatalf("counts.bin lacks the MVCOUNTS header at offset 8: rebuild it (make guest)")
	}
	binary.LittleEndian.PutUint64(img[16:24], reps)
	path := filepath.Join(t.TempDir(), fmt.Sprintf("counts-%d.bin", reps))
	if err := os.WriteFile(path, img, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// countsRun is one profiled run of the payload.
type countsRun struct {
	name     string
	userPSCI bool
	out      countsOutput
	rep      exits.Report
}

func runCounts(t *testing.T, reps uint64, extra ...string) *countsRun {
	t.Helper()
	prof := filepath.Join(t.TempDir(), "profile.json")
	args := append([]string{"run", "--kernel", countsPayload(t, reps), "--cpus", strconv.Itoa(cntCPUs),
		"--profile", "--profile-format", "json", "--profile-out", prof}, extra...)
	r := mvm(t, 2*time.Minute, args...)
	if r.code != 0 {
		t.Fatalf("exit status %d, want 0\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	run := &countsRun{name: strings.TrimSpace(fmt.Sprintf("reps %d %s", reps, strings.Join(extra, " "))), userPSCI: true}
	for i, a := range extra {
		if a == "--psci" && i+1 < len(extra) && extra[i+1] == "kernel" {
			run.userPSCI = false
		}
	}
	run.out = parseCounts(t, r.stdout)
	data, err := os.ReadFile(prof)
	if err != nil {
		t.Fatalf("profile report: %v\nstderr:\n%s", err, r.stderr)
	}
	if err := json.Unmarshal(data, &run.rep); err != nil {
		t.Fatalf("profile report is not JSON: %v\n%s", err, data)
	}
	return run
}

func (r *countsRun) rows(source string, vcpu int) []exits.Row {
	var out []exits.Row
	for _, row := range r.rep.Rows {
		if row.Source == source && row.VCPU == strconv.Itoa(vcpu) {
			out = append(out, row)
		}
	}
	return out
}

// count is the count of a reason's row (0 without a row).
func (r *countsRun) count(source string, vcpu int, reason string) uint64 {
	for _, row := range r.rows(source, vcpu) {
		if row.Reason == reason {
			return row.Count
		}
	}
	return 0
}

// sum adds up the rows of a source and vCPU whose reason has prefix.
func (r *countsRun) sum(source string, vcpu int, prefix string) uint64 {
	var n uint64
	for _, row := range r.rows(source, vcpu) {
		if strings.HasPrefix(row.Reason, prefix) {
			n += row.Count
		}
	}
	return n
}

func (r *countsRun) tp(vcpu int, reason string) uint64 {
	return r.count(exits.SourceTracepoint, vcpu, reason)
}

func (r *countsRun) us(vcpu int, reason string) uint64 {
	return r.count(exits.SourceUserspace, vcpu, reason)
}

// stat is a vCPU's KVM stat delta; a missing stat fails the test.
func (r *countsRun) stat(t *testing.T, vcpu int, name string) uint64 {
	t.Helper()
	for _, s := range r.rep.KVMStats {
		if s.VCPU == strconv.Itoa(vcpu) && s.Name == name {
			return s.Delta
		}
	}
	t.Fatalf("%s: no KVM stat %s for vCPU %d", r.name, name, vcpu)
	return 0
}

// untrappedWFI is how many of vCPU vcpu's WFIs, as the guest counted them,
// KVM did not see trap (wfi_exit_stat short of the guest's count; 0 when it
// is not short): WFIs that found the timer's interrupt already pending
// (checkAbsolute bounds them by the vCPU's IRQ exits).
func (r *countsRun) untrappedWFI(t *testing.T, vcpu int) uint64 {
	t.Helper()
	guest, stat := r.out.cpu[vcpu].wfi, r.stat(t, vcpu, "wfi_exit_stat")
	if stat >= guest {
		return 0
	}
	return guest - stat
}

// uart is the number of UART exits the console output implies: the
// payload stores every byte it prints to the THR once and never reads the
// UART, and only vCPU 0 prints.
func (r *countsRun) uart(vcpu int) uint64 {
	if vcpu != 0 {
		return 0
	}
	return uint64(len(r.out.stdout))
}

// hvcs is the number of HVCs vCPU k executed: its PSCI_VERSIONs, and for
// vCPU 0 CPU_ON, the AFFINITY_INFO polls and SYSTEM_OFF, for vCPU 1
// CPU_OFF (see the payload).
func (r *countsRun) hvcs(vcpu int) uint64 {
	c := r.out.cpu[vcpu]
	if vcpu == 0 {
		return c.version + 1 + r.out.affPolls + 1
	}
	return c.version + 1
}

func (r *countsRun) logNumbers(t *testing.T) {
	t.Helper()
	for k := 0; k < cntCPUs; k++ {
		c := r.out.cpu[k]
		var us []string
		for _, row := range r.rows(exits.SourceUserspace, k) {
			us = append(us, fmt.Sprintf("%s %d", row.Reason, row.Count))
		}
		var tp []string
		for _, row := range r.rows(exits.SourceTracepoint, k) {
			tp = append(tp, fmt.Sprintf("%s %d", row.Reason, row.Count))
		}
		var st []string
		for _, name := range []string{"mmio_exit_user", "mmio_exit_kernel", "hvc_exit_stat", "wfi_exit_stat", "wfe_exit_stat", "exits"} {
			st = append(st, fmt.Sprintf("%s %d", name, r.stat(t, k, name)))
		}
		t.Logf("%s, vCPU %d:\n  guest:      %+v (affinity polls %d)\n  userspace:  %s\n  tracepoint: %s\n  kvm_stats:  %s",
			r.name, k, c, r.out.affPolls, strings.Join(us, ", "), strings.Join(tp, ", "), strings.Join(st, ", "))
	}
}

// checkAbsolute asserts the numbers one run must have on its own.
func (r *countsRun) checkAbsolute(t *testing.T, reps uint64) {
	t.Helper()
	o := r.out
	if len(o.errors) > 0 || !o.done {
		t.Fatalf("%s: the payload reported problems (done %v):\n%s", r.name, o.done, strings.Join(o.errors, "\n"))
	}
	if o.reps != reps {
		t.Fatalf("%s: the payload ran %d reps, want %d (is the REPS word at offset 16?)", r.name, o.reps, reps)
	}
	// The guest's own account of the work: fixed by the payload's source,
	// except early WFIs (each adds a WFI) and late ones (skipped, not
	// executed), which are logged.
	for k := 0; k < cntCPUs; k++ {
		c, ok := o.cpu[k]
		if !ok {
			t.Fatalf("%s: no line for vCPU %d", r.name, k)
		}
		it := uint64(k+1) * reps
		if c.iters != it || c.marker != cntMarker*it || c.version != cntVersion*it ||
			c.sysreg != cntSysreg*it || c.sgi != cntSGI*it || c.smc != cntSMC*it || c.wfi != cntWFI*it+c.early || c.badiar != 0 {
			t.Errorf("%s: vCPU %d did not do the work it should: %+v", r.name, k, c)
		}
		if c.early > 0 || c.late > 0 {
			t.Logf("%s: vCPU %d: %d WFIs woke early, %d were skipped as late", r.name, k, c.early, c.late)
		}
	}
	for _, want := range []string{exits.SourceUserspace, exits.SourceKVMStats, exits.SourceTracepoint} {
		found := false
		for _, s := range r.rep.Sources {
			if s.Name == want {
				found = true
				if !s.Used {
					t.Errorf("%s: source %s not used: %s", r.name, want, s.Reason)
				}
			}
		}
		if !found {
			t.Errorf("%s: the report does not list source %s", r.name, want)
		}
	}
	if r.rep.TraceLost != 0 {
		t.Errorf("%s: the kernel dropped %d tracepoint records", r.name, r.rep.TraceLost)
	}
	if t.Failed() {
		t.FailNow()
	}

	for k := 0; k < cntCPUs; k++ {
		c := o.cpu[k]
		eq := func(what string, got, want uint64) {
			t.Helper()
			if got != want {
				t.Errorf("%s: vCPU %d: %s = %d, want %d", r.name, k, what, got, want)
			}
		}
		// Userspace: every marker write and every forwarded PSCI call is
		// one KVM_RUN return, counted by mvm's run loop. Nothing else
		// touches the marker or calls PSCI_VERSION, so these are exact
		// with no GIC or boot overhead in them.
		eq("userspace MMIO/marker", r.us(k, "MMIO/marker"), c.marker)
		eq("userspace MMIO/uart", r.us(k, "MMIO/uart"), r.uart(k))
		eq("userspace MMIO/unmapped", r.us(k, "MMIO/unmapped"), 0)
		if r.userPSCI {
			// By HVC and by SMC: the filter forwards both.
			eq("userspace HYPERCALL/PSCI_VERSION", r.us(k, "HYPERCALL/PSCI_VERSION"), c.version+c.smc)
			if k == 0 {
				eq("userspace HYPERCALL/CPU_ON", r.us(k, "HYPERCALL/CPU_ON"), 1)
				eq("userspace HYPERCALL/AFFINITY_INFO", r.us(k, "HYPERCALL/AFFINITY_INFO"), o.affPolls)
				eq("userspace HYPERCALL/SYSTEM_OFF", r.us(k, "HYPERCALL/SYSTEM_OFF"), 1)
			} else {
				eq("userspace HYPERCALL/CPU_OFF", r.us(k, "HYPERCALL/CPU_OFF"), 1)
			}
			// The SMCCC filter forwards every PSCI HVC and SMC to userspace.
			eq("userspace HYPERCALL/*", r.sum(exits.SourceUserspace, k, "HYPERCALL/"), r.hvcs(k)+c.smc)
		} else {
			// KVM answers PSCI itself: no hypercall reaches mvm.
			eq("userspace HYPERCALL/* with --psci kernel", r.sum(exits.SourceUserspace, k, "HYPERCALL/"), 0)
		}

		// HVC: an HVC at EL1 always traps to EL2; KVM counts it in
		// hvc_exit_stat (handle_hvc) and the kvm_exit tracepoint sees
		// EC 0x16, whether PSCI is then answered by KVM or forwarded.
		eq("tracepoint HVC64", r.tp(k, "HVC64"), r.hvcs(k))
		eq("kvm_stats hvc_exit_stat", r.stat(t, k, "hvc_exit_stat"), r.hvcs(k))
		// SMC: with HCR_EL2.TSC set an SMC at EL1 traps to EL2 as EC
		// 0x17; handle_smc counts it in no stat (not hvc_exit_stat).
		eq("tracepoint SMC64", r.tp(k, "SMC64"), c.smc)

		// WFx: HCR_EL2.TWI is set (KVM clears it only for vCPUs with
		// GICv4 vLPIs or vSGIs), so every WFI the guest executes with no
		// interrupt pending traps, and the payload only executes WFIs
		// after checking that the timer has not fired yet; a trapped WFI
		// increments wfi_exit_stat (kvm_handle_wfx) and is EC 0x01 at
		// kvm_exit. The payload executes no WFE. The check and the WFI
		// are two instructions apart, and the timer can fire between
		// them: its interrupt reaches the host first (an IRQ exit, after
		// which KVM re-enters with the virtual interrupt pending), and
		// the WFI then completes without trapping. The guest cannot tell
		// that WFI from a trapped one, so its count is an upper bound:
		// at most one such WFI per IRQ exit of the vCPU.
		u := r.untrappedWFI(t, k)
		if u > r.tp(k, "IRQ") {
			t.Errorf("%s: vCPU %d: kvm_stats wfi_exit_stat = %d, the guest counted %d WFIs: %d did not trap, more than the vCPU's %d IRQ exits", r.name, k, r.stat(t, k, "wfi_exit_stat"), c.wfi, u, r.tp(k, "IRQ"))
		} else if u > 0 {
			t.Logf("%s: vCPU %d: %d of the guest's %d WFIs did not trap (the timer fired between its check and the WFI)", r.name, k, u, c.wfi)
		}
		eq("tracepoint WFx", r.tp(k, "WFx"), c.wfi-u)
		eq("kvm_stats wfi_exit_stat", r.stat(t, k, "wfi_exit_stat"), c.wfi-u)
		eq("kvm_stats wfe_exit_stat", r.stat(t, k, "wfe_exit_stat"), 0)

		// SYS64: the ID register reads trap (HCR_EL2.TID3), and so do the
		// ICC_SGI1R_EL1 writes (HCR_EL2.IMO: SGI generation is not
		// virtualized by GICv3). The payload's other system register
		// accesses do not reach KVM's exit handler: the other ICC_* go to
		// the virtual CPU interface, the virtual timer and counter are
		// the guest's own on a VHE host without counter errata, and
		// VBAR/ESR/ELR_EL1 are not trapped while HCR_EL2.TVM is clear.
		eq("tracepoint SYS64", r.tp(k, "SYS64"), c.sysreg+c.sgi)

		// MMIO: a KVM_EXIT_MMIO is mmio_exit_user, a GIC access handled
		// in the kernel (vGIC distributor/redistributor) mmio_exit_kernel
		// (io_mem_abort counts both).
		eq("kvm_stats mmio_exit_user", r.stat(t, k, "mmio_exit_user"), c.marker+r.uart(k))
		eq("kvm_stats mmio_exit_user vs userspace MMIO/*", r.stat(t, k, "mmio_exit_user"), r.sum(exits.SourceUserspace, k, "MMIO/"))
		eq("kvm_stats mmio_exit_kernel", r.stat(t, k, "mmio_exit_kernel"), c.gicd+c.gicr)

		// DABT_LOW: every MMIO access above is a data abort from EL1, and
		// so is a stage-2 fault on RAM, which no MMIO stat counts. vCPU 0
		// faults in the pages it touches (how many faults depends on the
		// host, e.g. transparent huge pages); vCPU 1 touches only pages
		// vCPU 0 mapped before CPU_ON, so it has no RAM faults unless the
		// host unmaps guest memory during the run (reclaim, migration,
		// THP collapse).
		mmio := r.stat(t, k, "mmio_exit_user") + r.stat(t, k, "mmio_exit_kernel")
		if k == 0 {
			if got := r.tp(k, "DABT_LOW"); got < mmio {
				t.Errorf("%s: vCPU %d: tracepoint DABT_LOW = %d, fewer than its %d MMIO exits", r.name, k, got, mmio)
			}
		} else {
			eq("tracepoint DABT_LOW", r.tp(k, "DABT_LOW"), mmio)
		}

		// All exits: KVM increments "exits" and fires kvm_exit once per
		// return from the guest in the same loop (kvm_arch_vcpu_ioctl_run).
		eq("kvm_stats exits vs tracepoint total", r.stat(t, k, "exits"), r.sum(exits.SourceTracepoint, k, ""))
	}
}

// breakdown is a tracepoint reason's breakdown rows of one vCPU by key
// ("total" for vcpu -1).
func (r *countsRun) breakdown(vcpu int, reason string) map[string]uint64 {
	label := strconv.Itoa(vcpu)
	if vcpu < 0 {
		label = exits.TotalVCPU
	}
	out := map[string]uint64{}
	for _, row := range r.rep.Rows {
		if row.Source == exits.SourceTracepoint && row.VCPU == label && row.Reason == reason {
			for _, b := range row.Breakdown {
				out[b.Key] += b.Samples
			}
		}
	}
	return out
}

// checkBreakdown asserts the breakdown below the exception class: every
// reason's rows add up to it, and the payload's known work shows under its
// register, device, PSCI function and WFI.
func (r *countsRun) checkBreakdown(t *testing.T) {
	t.Helper()
	for _, row := range r.rep.Rows {
		if row.Source != exits.SourceTracepoint || len(row.Breakdown) == 0 {
			continue
		}
		var n uint64
		for _, b := range row.Breakdown {
			n += b.Samples
		}
		if n != row.Count {
			t.Errorf("%s: vCPU %s %s: breakdown rows add up to %d, the reason has %d: %+v", r.name, row.VCPU, row.Reason, n, row.Count, row.Breakdown)
		}
		if row.VCPU == exits.TotalVCPU {
			p := row.Percentiles
			if p == nil {
				t.Errorf("%s: total %s has no percentiles", r.name, row.Reason)
				continue
			}
			for _, l := range []exits.Percentiles{p.Guest, p.Handle} {
				if l.P50 > l.P90 || l.P90 > l.P99 || l.P99 > l.Max {
					t.Errorf("%s: %s percentiles out of order: %+v", r.name, row.Reason, l)
				}
			}
			if p.Guest.Max != row.TimeMaxNS || p.Handle.Max != row.HandleMaxNS {
				t.Errorf("%s: %s percentile maxima %d/%d, row maxima %d/%d", r.name, row.Reason, p.Guest.Max, p.Handle.Max, row.TimeMaxNS, row.HandleMaxNS)
			}
		}
	}
	for _, reason := range []string{"SYS64", "DABT_LOW", "HVC64", "SMC64", "WFx"} {
		for k := 0; k < cntCPUs; k++ {
			if r.tp(k, reason) > 0 && len(r.breakdown(k, reason)) == 0 {
				t.Errorf("%s: vCPU %d: %s has no breakdown", r.name, k, reason)
			}
		}
	}
	for k := 0; k < cntCPUs; k++ {
		c := r.out.cpu[k]
		eq := func(what string, got, want uint64) {
			t.Helper()
			if got != want {
				t.Errorf("%s: vCPU %d: %s = %d, want %d", r.name, k, what, got, want)
			}
		}
		sys := r.breakdown(k, "SYS64")
		eq("SYS64 ID_AA64MMFR0_EL1 read", sys["ID_AA64MMFR0_EL1 read"], c.sysreg)
		eq("SYS64 ICC_SGI1R_EL1 write", sys["ICC_SGI1R_EL1 write"], c.sgi)
		eq("SYS64 breakdown keys", uint64(len(sys)), 2)

		dabt := r.breakdown(k, "DABT_LOW")
		eq("DABT_LOW gicd", dabt["gicd"], c.gicd)
		eq("DABT_LOW gicr", dabt["gicr"], c.gicr)
		eq("DABT_LOW marker", dabt["marker"], c.marker)
		eq("DABT_LOW uart", dabt["uart"], r.uart(k))
		eq("DABT_LOW unmapped", dabt["unmapped"], 0)
		eq("DABT_LOW unknown", dabt["unknown"], 0)
		if k == 1 {
			eq("DABT_LOW ram (vCPU 1 touches pages vCPU 0 mapped)", dabt["ram"], 0)
		}

		hvc := r.breakdown(k, "HVC64")
		eq("HVC64 PSCI_VERSION", hvc["PSCI_VERSION"], c.version)
		if k == 0 {
			eq("HVC64 CPU_ON", hvc["CPU_ON"], 1)
			eq("HVC64 AFFINITY_INFO", hvc["AFFINITY_INFO"], r.out.affPolls)
			eq("HVC64 SYSTEM_OFF", hvc["SYSTEM_OFF"], 1)
			eq("HVC64 breakdown keys", uint64(len(hvc)), 4)
		} else {
			eq("HVC64 CPU_OFF", hvc["CPU_OFF"], 1)
			eq("HVC64 breakdown keys", uint64(len(hvc)), 2)
		}

		// SMC64: KVM fires no tracepoint with an SMC's X0, so the
		// function is known where mvm handles the SMC (--psci user);
		// the SMCs KVM answers are "unknown".
		smc := r.breakdown(k, "SMC64")
		if r.userPSCI {
			eq("SMC64 PSCI_VERSION", smc["PSCI_VERSION"], c.smc)
		} else {
			eq("SMC64 unknown with --psci kernel", smc["unknown"], c.smc)
		}
		eq("SMC64 breakdown keys", uint64(len(smc)), 1)

		wfx := r.breakdown(k, "WFx")
		eq("WFx WFI", wfx["WFI"], c.wfi-r.untrappedWFI(t, k))
		eq("WFx WFE", wfx["WFE"], 0)
	}
	// The phases split the same totals: boot_to_smp ends at vCPU 0's
	// CPU_ON, secondaries when vCPU 1 first enters the guest.
	perPhase := map[string]uint64{}
	names := map[string]bool{}
	for _, ph := range r.rep.ByPhase {
		names[ph.Phase] = true
		for _, row := range ph.Rows {
			perPhase[row.Reason] += row.Samples
		}
	}
	for _, row := range r.rep.Rows {
		if row.Source == exits.SourceTracepoint && row.VCPU == exits.TotalVCPU && perPhase[row.Reason] != row.Count {
			t.Errorf("%s: %s: phases hold %d exits, the total %d", r.name, row.Reason, perPhase[row.Reason], row.Count)
		}
	}
	if !names["boot_to_smp"] || !names["kernel_to_user"] {
		t.Errorf("%s: phases %v, want boot_to_smp and kernel_to_user", r.name, names)
	}
	if r.rep.Userspace != nil {
		t.Errorf("%s: a bare-metal payload has no userspace, the report says %+v", r.name, r.rep.Userspace)
	}
}

// checkDifference compares two runs of the same image that differ only in
// REPS: whatever they share (boot, GIC setup, stage-2 faults, the fixed
// PSCI calls) cancels, so each vCPU's difference must be exactly the extra
// work, plus the guest-reported extras (early WFIs, AFFINITY_INFO polls,
// longer numbers printed).
func checkDifference(t *testing.T, a, b *countsRun) {
	t.Helper()
	dReps := b.out.reps - a.out.reps
	for k := 0; k < cntCPUs; k++ {
		ca, cb := a.out.cpu[k], b.out.cpu[k]
		dIters := uint64(k+1) * dReps
		dHVC := cntVersion * dIters
		if k == 0 {
			dHVC += b.out.affPolls - a.out.affPolls
		}
		// Less the WFIs that did not trap (checkAbsolute bounds them).
		dWFI := cntWFI*dIters + cb.early - ca.early - (b.untrappedWFI(t, k) - a.untrappedWFI(t, k))
		dUser := cntMarker*dIters + b.uart(k) - a.uart(k)
		dDABT := dUser + cb.gicd + cb.gicr - ca.gicd - ca.gicr
		diff := func(what string, ga, gb, want uint64) {
			t.Helper()
			if got := int64(gb - ga); got != int64(want) {
				t.Errorf("vCPU %d: %s went from %d (%s) to %d (%s): %+d, want %+d", k, what, ga, a.name, gb, b.name, got, int64(want))
			}
		}
		diff("tracepoint DABT_LOW", a.tp(k, "DABT_LOW"), b.tp(k, "DABT_LOW"), dDABT)
		diff("tracepoint HVC64", a.tp(k, "HVC64"), b.tp(k, "HVC64"), dHVC)
		diff("tracepoint SMC64", a.tp(k, "SMC64"), b.tp(k, "SMC64"), cntSMC*dIters)
		diff("tracepoint WFx", a.tp(k, "WFx"), b.tp(k, "WFx"), dWFI)
		diff("tracepoint SYS64", a.tp(k, "SYS64"), b.tp(k, "SYS64"), (cntSysreg+cntSGI)*dIters)
		diff("kvm_stats mmio_exit_user", a.stat(t, k, "mmio_exit_user"), b.stat(t, k, "mmio_exit_user"), dUser)
		diff("kvm_stats hvc_exit_stat", a.stat(t, k, "hvc_exit_stat"), b.stat(t, k, "hvc_exit_stat"), dHVC)
		diff("kvm_stats wfi_exit_stat", a.stat(t, k, "wfi_exit_stat"), b.stat(t, k, "wfi_exit_stat"), dWFI)
		diff("userspace MMIO/marker", a.us(k, "MMIO/marker"), b.us(k, "MMIO/marker"), cntMarker*dIters)
		diff("userspace HYPERCALL/PSCI_VERSION", a.us(k, "HYPERCALL/PSCI_VERSION"), b.us(k, "HYPERCALL/PSCI_VERSION"), (cntVersion+cntSMC)*dIters)
	}
}

// TestProfileCounts runs guest/payloads/counts.s, which does known numbers
// of marker MMIO writes, PSCI_VERSION HVCs and SMCs, timer-woken WFIs and trapped
// ID register reads on two vCPUs, and checks that mvm's exit profile
// reports exactly those counts under DABT_LOW, HVC64, SMC64, WFx and SYS64 per
// vCPU, in every source that sees them: absolutely where the cause of
// every exit is known, and as the difference between a 10- and a 20-rep
// run where the payload's setup adds exits of its own (RAM stage-2 faults).
// A third run with --psci kernel checks the HVC counts when KVM answers
// PSCI itself.
func TestProfileCounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the kvm_exit tracepoints need root")
	}
	// The default path (BPF counters on raw tracepoints, where the lab
	// kernel allows them) for the 10-rep runs, the perf rings for the
	// 20-rep one: the difference then holds only if both are exact.
	a := runCounts(t, 10)
	a.checkVia(t, "raw tracepoints")
	// kvm_entry's program keys the ID register reads from the vCPU's ESR
	// (the lab kernel has BTF), kvm_handle_sys_reg is not attached.
	a.checkVia(t, "SYS64 keyed from the vCPU's ESR at kvm_entry")
	a.logNumbers(t)
	a.checkAbsolute(t, 10)
	a.checkBreakdown(t)
	b := runCounts(t, 20, "--profile-via", "perf")
	b.checkVia(t, "perf_event_open")
	b.logNumbers(t)
	b.checkAbsolute(t, 20)
	b.checkBreakdown(t)
	checkDifference(t, a, b)

	k := runCounts(t, 10, "--psci", "kernel")
	k.checkVia(t, "raw tracepoints")
	k.logNumbers(t)
	k.checkAbsolute(t, 10)
	k.checkBreakdown(t)
}

// checkVia: the tracepoint source was read the way want (a phrase of its
// Sources detail) says.
func (r *countsRun) checkVia(t *testing.T, want string) {
	t.Helper()
	for _, src := range r.rep.Sources {
		if src.Name == exits.SourceTracepoint {
			if !src.Used || !strings.Contains(src.Detail, want) {
				t.Errorf("%s: tracepoint source %+v, want %q", r.name, src, want)
			}
			t.Logf("%s: tracepoints: %s", r.name, src.Detail)
			return
		}
	}
	t.Errorf("%s: no tracepoint source", r.name)
}
