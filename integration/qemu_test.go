//go:build linux && arm64

package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mvm-dev/mvm/exits"
)

// qemuBase is the QEMU command line every QEMU test and benchmark starts
// from: the lab kernel with initrd on the virt machine with a GICv3 on KVM
// (DESIGN.md section 7), cpus vCPUs, memory (QEMU's -m), no NIC, and
// power-off as exit.
func qemuBase(tb testing.TB, cpus int, memory, initrd, cmdline string) []string {
	return []string{env(tb, "MVM_QEMU"),
		"-machine", "virt,gic-version=3", "-accel", "kvm", "-cpu", "host",
		"-smp", strconv.Itoa(cpus), "-m", memory, "-nographic", "-nic", "none", "-no-reboot",
		"-kernel", env(tb, "MVM_LINUX"), "-initrd", initrd, "-append", cmdline}
}

// qemuConsoleCmdline is the QEMU guests' kernel command line: the PL011
// console, quiet, and a panic that ends QEMU.
const qemuConsoleCmdline = "console=ttyAMA0 quiet panic=-1"

// qemuArgs is a QEMU command line booting the Linux test guest on KVM with
// vCPUs.
func qemuArgs(t *testing.T, vcpus int, extra ...string) []string {
	return append(qemuBase(t, vcpus, "256", testInitrd(t), qemuConsoleCmdline), extra...)
}

// TestQEMUProfileCommand profiles a whole QEMU boot of Linux on 2 vCPUs
// with mvm profile -- COMMAND: QEMU's exit status comes back, the table
// has arm64 reasons, and per vCPU the kvm_exit tracepoint counts of WFx,
// HVC64 and all exits equal wfi+wfe, hvc_exit_stat and exits of QEMU's own
// vCPU stats files, read through pidfd_getfd copies.
func TestQEMUProfileCommand(t *testing.T) {
	out := filepath.Join(t.TempDir(), "profile.json")
	args := append([]string{"profile", "--tracepoint-via", "both", "--format", "json", "--out", out, "--"},
		qemuArgs(t, 2, "-name", "guest=mvm-test,debug-threads=on")...)
	r := mvm(t, 4*time.Minute, args...)
	if r.code != 0 {
		t.Fatalf("exit status %d\nstderr:\n%s\nstdout:\n%s", r.code, r.stderr, r.stdout)
	}
	if !strings.Contains(r.stdout, "mvm-guest: poweroff") {
		t.Errorf("the guest did not finish its boot under QEMU:\n%s", r.stdout)
	}
	p := readProfile(t, out)
	for _, src := range []string{"kvm_stats", "tracepoint"} {
		if ok, why := p.used(src); !ok {
			t.Fatalf("source %s not used: %s", src, why)
		}
	}
	if p.Lost != 0 {
		t.Fatalf("the kernel dropped %d tracepoint records: counts are lower bounds", p.Lost)
	}
	for _, reason := range []string{"WFx", "HVC64", "IRQ", "DABT_LOW"} {
		if p.count("tracepoint", "total", reason) == 0 {
			t.Errorf("no %s exits in the QEMU profile", reason)
		}
	}
	if n := p.sum("tracepoint", "-1"); n != 0 {
		t.Errorf("%d exits on threads not told apart as vCPUs (QEMU's CPU n/KVM names)", n)
	}
	for _, v := range []string{"0", "1", "total"} {
		stat := func(name string) uint64 {
			d, ok := p.stat(v, name)
			if !ok {
				t.Fatalf("vCPU %s: no %s in the KVM stats", v, name)
			}
			return d
		}
		wfx := stat("wfi_exit_stat") + stat("wfe_exit_stat")
		if got := p.count("tracepoint", v, "WFx"); got != wfx {
			t.Errorf("vCPU %s: tracepoint WFx %d, stats wfi+wfe %d", v, got, wfx)
		}
		if got, want := p.count("tracepoint", v, "HVC64"), stat("hvc_exit_stat"); got != want {
			t.Errorf("vCPU %s: tracepoint HVC64 %d, stats hvc_exit_stat %d", v, got, want)
		}
		if got, want := p.sum("tracepoint", v), stat("exits"); got != want {
			t.Errorf("vCPU %s: tracepoint exits %d, stats exits %d", v, got, want)
		}
		t.Logf("vCPU %s: WFx %d HVC64 %d exits %d", v, wfx, stat("hvc_exit_stat"), stat("exits"))
	}

	// The BPF counts of the same boot equal the perf samples' per reason
	// and vCPU.
	if ok, why := p.used("tracepoint_bpf"); !ok {
		t.Fatalf("BPF counts not used: %s", why)
	}
	nBPF := 0
	for _, row := range p.Rows {
		switch row.Source {
		case "tracepoint":
			if got := p.count("tracepoint_bpf", row.VCPU, row.Reason); got != row.Count {
				t.Errorf("vCPU %s %s: BPF %d, perf %d", row.VCPU, row.Reason, got, row.Count)
			}
		case "tracepoint_bpf":
			nBPF++
			if p.count("tracepoint", row.VCPU, row.Reason) == 0 {
				t.Errorf("vCPU %s %s: BPF %d, perf none", row.VCPU, row.Reason, row.Count)
			}
		}
	}
	if nBPF == 0 {
		t.Error("no BPF rows")
	}
	// The BPF path times every exit but a thread's first (no entry before
	// it) and closes all but a thread's last with its next entry.
	var timed struct {
		Rows []struct {
			Source, VCPU, Reason    string
			Count                   uint64
			GuestCount, HandleCount uint64 `json:"-"`
			TimeCount               uint64 `json:"guest_count"`
			Handles                 uint64 `json:"handle_count"`
			GuestNS                 uint64 `json:"guest_ns"`
		} `json:"rows"`
	}
	if data, err := os.ReadFile(out); err == nil && json.Unmarshal(data, &timed) == nil {
		for _, row := range timed.Rows {
			if row.Source != "tracepoint_bpf" || row.VCPU != "total" {
				continue
			}
			if row.TimeCount+2 < row.Count || row.Handles+2 < row.Count || row.TimeCount > 0 && row.GuestNS == 0 {
				t.Errorf("BPF %s: %d exits, %d with guest time (%d ns), %d with handle time", row.Reason, row.Count, row.TimeCount, row.GuestNS, row.Handles)
			}
		}
	}

	compareBPFDetail(t, out)

	// mvm's status is the command's, and the command gets the GODEBUG mvm
	// was started with (none here), not mvm's own runtime settings.
	r = mvm(t, time.Minute, "profile", "--", "sh", "-c", `echo "godebug=[${GODEBUG-unset}]"; exit 3`)
	if r.code != 3 {
		t.Errorf("mvm profile -- sh -c '... exit 3': status %d, stderr %q", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "godebug=[unset]") {
		t.Errorf("the command's GODEBUG: %q, want it unset as it was for mvm", r.stdout)
	}
}

// TestQEMUProfileAttach attaches mvm profile --pid to a booting QEMU
// (without thread names: vCPU threads are found by the KVM_RUN they sit
// in) three times — unprivileged, with only CAP_SYS_PTRACE and
// CAP_DAC_READ_SEARCH (no CAP_PERFMON), as root — and
// the guest still finishes its boot. Also: a PID that is not a KVM
// process, and one that has gone.
func TestQEMUProfileAttach(t *testing.T) {
	var console lockedBuffer
	q := exec.Command(qemuArgs(t, 2)[0], qemuArgs(t, 2)[1:]...)
	q.Stdout, q.Stderr = &console, &console
	if err := q.Start(); err != nil {
		t.Fatal(err)
	}
	qdone := make(chan error, 1)
	go func() { qdone <- q.Wait() }()
	defer func() {
		select {
		case <-qdone:
		default:
			q.Process.Kill()
			<-qdone
		}
	}()
	pid := strconv.Itoa(q.Process.Pid)
	// Wait until QEMU holds its VM.
	for i := 0; ; i++ {
		ents, _ := os.ReadDir("/proc/" + pid + "/fd")
		found := false
		for _, e := range ents {
			if l, _ := os.Readlink("/proc/" + pid + "/fd/" + e.Name()); l == "anon_inode:kvm-vm" {
				found = true
			}
		}
		if found {
			break
		}
		if i > 200 {
			t.Fatalf("QEMU created no VM in 10 s:\n%s", console.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	r := mvmCmd(t, time.Minute, asNobody, "profile", "--pid", pid)
	oneLineError(t, r, 1, "ptrace access")

	dir := publicDir(t)
	out := filepath.Join(dir, "no-perfmon.json")
	r = mvmCmd(t, time.Minute, func(c *exec.Cmd) {
		asNobody(c)
		// /proc/PID/fd of another user's process is listed by its mode,
		// not by ptrace rules: CAP_DAC_READ_SEARCH as well.
		c.SysProcAttr.AmbientCaps = []uintptr{unix.CAP_SYS_PTRACE, unix.CAP_DAC_READ_SEARCH}
	}, "profile", "--pid", pid, "--duration", "1s", "--format", "json", "--out", out)
	if r.code != 0 {
		t.Fatalf("without CAP_PERFMON: status %d, stderr %q", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "mvm: tracepoint unavailable") || !strings.Contains(r.stderr, "CAP_PERFMON") ||
		!strings.Contains(r.stderr, "profiled with kvm_stats") {
		t.Errorf("without CAP_PERFMON, stderr should name CAP_PERFMON and what still works:\n%s", r.stderr)
	}
	if p := readProfile(t, out); func() bool { ok, _ := p.used("kvm_stats"); return !ok }() {
		t.Errorf("without CAP_PERFMON, kvm_stats unused: %+v", p.Sources)
	}

	out = filepath.Join(dir, "root.json")
	r = mvm(t, time.Minute, "profile", "--pid", pid, "--duration", "3s", "--format", "json", "--out", out)
	if r.code != 0 {
		t.Fatalf("as root: status %d, stderr %q", r.code, r.stderr)
	}
	p := readProfile(t, out)
	for _, src := range []string{"kvm_stats", "tracepoint"} {
		if ok, why := p.used(src); !ok {
			t.Errorf("source %s not used: %s", src, why)
		}
	}
	for _, s := range p.Sources {
		if s.Name == "tracepoint" && !strings.Contains(s.Detail, "BPF") {
			t.Errorf("as root the tracepoints should be counted by BPF: %q", s.Detail)
		}
	}
	// Tracepoints are opened before the stats baseline and closed after
	// the last stats read, so they count at least what the stats count,
	// and little more (the exits between the two).
	tp, st := p.sum("tracepoint", "total"), uint64(0)
	if d, ok := p.stat("total", "exits"); ok {
		st = d
	}
	t.Logf("attached 3 s: tracepoint exits %d (lost %d), stats exits %d; stderr %q", tp, p.Lost, st, r.stderr)
	if st == 0 || (p.Lost == 0 && (tp < st || tp > st+st/20+50)) {
		t.Errorf("tracepoint exits %d vs stats exits %d over the attached window; sources %+v", tp, st, p.Sources)
	}

	select {
	case err := <-qdone:
		qdone <- err
		if err != nil {
			t.Fatalf("QEMU after mvm detached: %v\n%s", err, console.String())
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("QEMU did not finish after mvm detached:\n%s", console.String())
	}
	if !strings.Contains(console.String(), "mvm-guest: poweroff") {
		t.Errorf("the guest did not finish its boot after mvm detached:\n%s", console.String())
	}

	// Not a KVM process; a process that has gone.
	sleep := exec.Command("sleep", "60")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	r = mvm(t, time.Minute, "profile", "--pid", strconv.Itoa(sleep.Process.Pid))
	oneLineError(t, r, 1, "is not a KVM process")
	sleep.Process.Signal(syscall.SIGKILL)
	sleep.Wait()
	r = mvm(t, time.Minute, "profile", "--pid", strconv.Itoa(sleep.Process.Pid))
	oneLineError(t, r, 1, "no such process")
}

// compareBPFDetail checks, on a report with both tracepoint paths
// (--tracepoint-via both), that the BPF breakdown rows equal the perf
// path's key for key, and that the BPF percentiles of guest and handling
// time agree with the perf path's within the histograms' error (1/32 of
// the value each) plus the two paths' clock difference: BPF reads
// bpf_ktime_get_ns when its program runs, perf stamps the sample a few
// microseconds apart at the same tracepoint (bpfSlackNS). kvm_exit runs
// with interrupts enabled, so now and then a host interrupt falls between
// the two and moves one sample by much more; where the distribution is
// thin around a percentile (IRQ guest times span 40 us to 100 ms) that
// can move the percentile across the gap, so a percentile may also move
// by about 1% of the samples in rank: a tenth of the distance to the next
// percentile reported (p50 -> p90 holds 40% of them, p90 -> p99 9%).
func compareBPFDetail(t *testing.T, path string) {
	t.Helper()
	const bpfSlackNS = 50_000
	rep := readJSON[exits.Report](t, path)
	total := map[string]map[string]exits.Row{}
	for _, r := range rep.Rows {
		if r.VCPU != exits.TotalVCPU {
			continue
		}
		if total[r.Source] == nil {
			total[r.Source] = map[string]exits.Row{}
		}
		total[r.Source][r.Reason] = r
	}
	near := func(a, b, next uint64) bool {
		d := max(a, b) - min(a, b)
		rank := float64(next-min(next, b)) / 10
		return float64(d) <= max(float64(max(a, b))*2/32+bpfSlackNS, rank)
	}
	nRows, nPct, nAddrRows := 0, 0, 0
	for reason, perf := range total["tracepoint"] {
		bpf, ok := total["tracepoint_bpf"][reason]
		if !ok {
			continue // counted and reported above
		}
		rows := map[string]uint64{}
		addrs := map[string][]exits.AddressCount{}
		for _, b := range bpf.Breakdown {
			rows[b.Key] = b.Samples
			addrs[b.Key] = b.Addresses
		}
		// An exit whose records the perf path got out of order (a ring
		// read late, or a thread that moved between CPUs whose clocks
		// differ) is counted but not broken down: it moves from its key
		// to "unknown", at most as many as the report says were
		// reordered. Otherwise the rows must be equal.
		perfRows := map[string]uint64{}
		for _, b := range perf.Breakdown {
			perfRows[b.Key] = b.Samples
		}
		var moved uint64
		for k, n := range rows {
			if k != "unknown" && perfRows[k] < n {
				moved += n - perfRows[k]
			}
		}
		if moved > 0 {
			t.Logf("%s: %d exits keyed by BPF are unknown to the perf path (%d records reordered)", reason, moved, rep.TraceReordered)
		}
		if moved > rep.TraceReordered || perfRows["unknown"] != rows["unknown"]+moved {
			t.Errorf("%s: %d exits moved to unknown (perf unknown %d, BPF %d), %d records reordered", reason, moved, perfRows["unknown"], rows["unknown"], rep.TraceReordered)
		}
		for _, b := range perf.Breakdown {
			nRows++
			if b.Key != "unknown" && b.Samples > rows[b.Key] || b.Samples < rows[b.Key] && moved == 0 {
				t.Errorf("%s %s: BPF %d, perf %d", reason, b.Key, rows[b.Key], b.Samples)
			}
			// The device rows' top addresses (the first 32 distinct
			// IPAs of a row kept, the rest "other") are the perf path's,
			// where no exit of the row moved.
			if len(b.Addresses) > 0 {
				nAddrRows++
			}
			if b.Samples == rows[b.Key] && !slices.Equal(addrs[b.Key], b.Addresses) {
				t.Errorf("%s %s addresses: BPF %v, perf %v", reason, b.Key, addrs[b.Key], b.Addresses)
			}
			delete(rows, b.Key)
		}
		for k, n := range rows {
			if k == "unknown" || moved == 0 {
				t.Errorf("%s %s: BPF %d, perf none", reason, k, n)
			}
		}
		if perf.Percentiles == nil || bpf.Percentiles == nil {
			t.Errorf("%s: percentiles perf %v, BPF %v", reason, perf.Percentiles, bpf.Percentiles)
			continue
		}
		if perf.Count < 100 {
			continue // a few samples: a percentile can fall on either side of a gap
		}
		for _, c := range []struct {
			what      string
			perf, bpf exits.Percentiles
		}{{"guest", perf.Percentiles.Guest, bpf.Percentiles.Guest}, {"handle", perf.Percentiles.Handle, bpf.Percentiles.Handle}} {
			nPct++
			if !near(c.bpf.P50, c.perf.P50, c.perf.P90) || !near(c.bpf.P90, c.perf.P90, c.perf.P99) {
				t.Errorf("%s %s time: BPF p50 %d p90 %d ns, perf p50 %d p90 %d ns", reason, c.what, c.bpf.P50, c.bpf.P90, c.perf.P50, c.perf.P90)
			}
			t.Logf("%s %s (%d exits): p50 BPF %d perf %d, p90 %d %d, p99 %d %d, max %d %d ns", reason, c.what, perf.Count,
				c.bpf.P50, c.perf.P50, c.bpf.P90, c.perf.P90, c.bpf.P99, c.perf.P99, c.bpf.Max, c.perf.Max)
		}
	}
	if nRows == 0 || nPct == 0 || nAddrRows == 0 {
		t.Errorf("nothing compared: %d breakdown rows, %d percentile sets, %d rows with device addresses", nRows, nPct, nAddrRows)
	}
}
