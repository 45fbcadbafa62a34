//go:build linux && arm64

package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Benchmarks of issue "mvm run" and "exit profiling", run by 'make bench'
// in the lab. Absolute times under emulation mean little; each benchmark
// reports ratios against a baseline measured in the same run.

// runSummary is the part of --result-json the benchmarks read.
type runSummary struct {
	Exit     string           `json:"exit"`
	PhasesNS map[string]int64 `json:"phases_ns"`
	Memory   struct {
		RSS           uint64 `json:"rss_bytes"`
		GuestResident uint64 `json:"guest_resident_bytes"`
		Overhead      uint64 `json:"overhead_bytes"`
		Private       uint64 `json:"private_overhead_bytes"`
	} `json:"memory"`
}

func bootLinux(b *testing.B, cpus int, memory string, extra ...string) runSummary {
	b.Helper()
	out := filepath.Join(b.TempDir(), "result.json")
	args := append([]string{"run", "--kernel", env(b, "MVM_LINUX"), "--initrd", testInitrdB(b),
		"--cpus", strconv.Itoa(cpus), "--memory", memory, "--append", "quiet", "--console", "none",
		"--result-json", out}, extra...)
	r := mvm(b, 5*time.Minute, args...)
	if r.code != 0 {
		b.Fatalf("exit status %d\n%s", r.code, r.stderr)
	}
	return readJSON[runSummary](b, out)
}

func testInitrdB(b *testing.B) string {
	p, err := linuxInitrd()
	if err != nil {
		b.Fatal(err)
	}
	return p
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// BenchmarkLinuxBoot: time from the first KVM_RUN to the userspace marker,
// and mvm's own memory (resident set minus resident guest RAM), for 1 and
// 8 vCPUs. The 8-vCPU boot is reported relative to the 1-vCPU one of the
// same run.
func BenchmarkLinuxBoot(b *testing.B) {
	var one, eight, overhead, private []float64
	for i := 0; i < b.N; i++ {
		s1 := bootLinux(b, 1, "128M")
		s8 := bootLinux(b, 8, "512M")
		one = append(one, float64(s1.PhasesNS["kernel_to_user"]))
		eight = append(eight, float64(s8.PhasesNS["kernel_to_user"]))
		overhead = append(overhead, float64(s1.Memory.Overhead))
		private = append(private, float64(s1.Memory.Private))
	}
	b.ReportMetric(median(one)/1e6, "cpus=1-ms-to-init")
	b.ReportMetric(median(eight)/1e6, "cpus=8-ms-to-init")
	b.ReportMetric(median(eight)/median(one), "cpus=8/cpus=1")
	b.ReportMetric(median(overhead)/(1<<20), "vmm-MiB(1cpu,128M)")
	b.ReportMetric(median(private)/(1<<20), "vmm-private-MiB")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkProfileOverhead boots Linux on 8 vCPUs plain and under mvm run
// --profile with every source, the tracepoints read by the BPF counters
// (--profile-via bpf: raw tracepoint programs, breakdown and histograms in
// the kernel) or by the perf rings (--profile-via perf, with phases and
// per-exit PCs), with the userspace and KVM stats sources only, and with
// --profile=light (issue 20's always-on mode: on this boot within the
// plain boots' spread), interleaved in each round. Reported: ratios of
// medians against the plain boots of the same run, with the min..max of
// the per-round ratios.
func BenchmarkProfileOverhead(b *testing.B) {
	out := filepath.Join(b.TempDir(), "profile.json")
	prof := []string{"--profile", "--profile-format", "json", "--profile-out", out}
	interleaved(b, func(args ...string) float64 { return float64(bootLinux(b, 8, "512M", args...).PhasesNS["total"]) },
		benchVariant{name: "bpf", args: append([]string{"--profile-via", "bpf"}, prof...)},
		benchVariant{name: "perf", args: append([]string{"--profile-via", "perf"}, prof...)},
		benchVariant{name: "profile-no-trace", args: append([]string{"--profile-sources", "userspace,kvm_stats"}, prof...)},
		benchVariant{name: "light", args: []string{"--profile=light", "--profile-format", "json", "--profile-out", out}},
	)
}

// benchVariant is one way of booting compared with the plain boot.
type benchVariant struct {
	name string
	args []string
	// around, if set, runs before the variant's boot and returns what
	// undoes it after (e.g. BPF programs attached for the boot).
	around func() func()
}

// interleaved boots plain, then once per variant, in each of b.N rounds
// (so the lab's drift hits all alike), and reports each variant's ratio
// of medians against the plain boots, with the min..max of the per-round
// ratios. boot returns one boot's time in ns.
func interleaved(b *testing.B, boot func(args ...string) float64, variants ...benchVariant) {
	var plain []float64
	times := make([][]float64, len(variants))
	ratios := make([][]float64, len(variants))
	for i := 0; i < b.N; i++ {
		p := boot()
		plain = append(plain, p)
		for j, v := range variants {
			undo := func() {}
			if v.around != nil {
				undo = v.around()
			}
			d := boot(v.args...)
			undo()
			times[j] = append(times[j], d)
			ratios[j] = append(ratios[j], d/p)
		}
		// Each round on stdout: the lab's noise shows in single rounds,
		// which the medians hide (b.Log's output is cut for long runs).
		line := fmt.Sprintf("%s round %d/%d: plain %.0f ms", b.Name(), i+1, b.N, p/1e6)
		for j, v := range variants {
			line += fmt.Sprintf(", %s %.0f ms (%.3f)", v.name, times[j][i]/1e6, ratios[j][i])
		}
		fmt.Println(line)
	}
	b.ReportMetric(median(plain)/1e6, "plain-ms")
	for j, v := range variants {
		b.ReportMetric(median(ratios[j]), v.name+"/plain-round-median")
		b.ReportMetric(median(times[j])/median(plain), v.name+"/plain")
		b.ReportMetric(slices.Min(ratios[j]), v.name+"/plain-min")
		b.ReportMetric(slices.Max(ratios[j]), v.name+"/plain-max")
	}
	b.ReportMetric(0, "ns/op")
}

var cpuonRe = regexp.MustCompile(`(?m)^cpuon (0x[0-9a-f]+) (0x[0-9a-f]+)$`)
var cntfrqRe = regexp.MustCompile(`(?m)^cntfrq (0x[0-9a-f]+)$`)

// cpuOnRun is one run of guest/payloads/cpuon.s.
type cpuOnRun struct {
	// ns[k-1]: CPU_ON of vCPU k to its first instruction, timed in the
	// guest with the virtual counter (from just before the boot CPU's HVC).
	ns []float64
	// steps: with PSCI in mvm, the host-side steps of each CPU_ON from
	// --result-json (docs/boot-phases.md, "The CPU_ON path").
	steps map[string][]float64
	cpu   time.Duration // mvm's CPU time (user + system)
}

// CPU_ON steps mvm times (from the hypercall exit to the KVM_RUN call), in
// order; "kvm" is what remains of the guest-measured latency: the caller's
// trap and exit to mvm plus the target's entry into the guest.
var cpuOnSteps = []string{"exit->serviced", "serviced->woken", "woken->regs", "regs->run", "kvm"}

func cpuOnLatencies(b *testing.B, cpus int, mode string) cpuOnRun {
	out := filepath.Join(b.TempDir(), "result.json")
	r := mvm(b, 2*time.Minute, "run", "--kernel", payload(b, "cpuon.bin"), "--cpus", strconv.Itoa(cpus), "--psci", mode, "--result-json", out)
	if r.code != 0 {
		b.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	fm := cntfrqRe.FindStringSubmatch(r.stdout)
	if fm == nil {
		b.Fatalf("no cntfrq line in %q", r.stdout)
	}
	freq, _ := strconv.ParseUint(fm[1], 0, 64)
	run := cpuOnRun{ns: make([]float64, cpus-1), cpu: r.cpu}
	seen := 0
	for _, m := range cpuonRe.FindAllStringSubmatch(r.stdout, -1) {
		k, _ := strconv.ParseUint(m[1], 0, 64)
		ticks, _ := strconv.ParseUint(m[2], 0, 64)
		if k < 1 || int(k) >= cpus {
			b.Fatalf("cpuon line for vCPU %d of %d", k, cpus)
		}
		run.ns[k-1] = float64(ticks) * 1e9 / float64(freq)
		seen++
	}
	if seen != cpus-1 {
		b.Fatalf("%d CPU_ON samples for %d vCPUs:\n%s", seen, cpus, r.stdout)
	}
	if mode != "user" {
		return run
	}
	s := readJSON[struct {
		Exit    []int64 `json:"cpu_on_exit_ns"`
		On      []int64 `json:"cpu_on_ns"`
		Woken   []int64 `json:"woken_ns"`
		Reset   []int64 `json:"reset_ns"`
		Entered []int64 `json:"entered_ns"`
	}](b, out)
	run.steps = map[string][]float64{}
	for k := 1; k < cpus && k < len(s.Entered); k++ {
		t := []int64{s.Exit[k], s.On[k], s.Woken[k], s.Reset[k], s.Entered[k]}
		if slices.Contains(t, -1) {
			b.Fatalf("vCPU %d: CPU_ON timeline incomplete: %v", k, t)
		}
		for i := 0; i < 4; i++ {
			run.steps[cpuOnSteps[i]] = append(run.steps[cpuOnSteps[i]], float64(t[i+1]-t[i]))
		}
		run.steps["kvm"] = append(run.steps["kvm"], run.ns[k-1]-float64(t[4]-t[0]))
	}
	return run
}

// quantile is the q-quantile (0..1) of v by linear interpolation.
func quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	pos := q * float64(len(s)-1)
	i := int(pos)
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[i] + (pos-float64(i))*(s[i+1]-s[i])
}

// distribution is one line: min, p10, p25, median, p75, p90, max in µs.
func distribution(v []float64) string {
	var b strings.Builder
	for _, q := range []float64{0, 0.1, 0.25, 0.5, 0.75, 0.9, 1} {
		fmt.Fprintf(&b, " %7.1f", quantile(v, q)/1e3)
	}
	return b.String()
}

// ratioCI is a bootstrap 95% interval of median(a)/median(b) (resampling
// each side; fixed seed, so a run's verdict is reproducible from its data).
func ratioCI(a, b []float64) (lo, hi float64) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 2000
	rs := make([]float64, n)
	ra, rb := make([]float64, len(a)), make([]float64, len(b))
	for i := range rs {
		for j := range ra {
			ra[j] = a[rng.IntN(len(a))]
		}
		for j := range rb {
			rb[j] = b[rng.IntN(len(b))]
		}
		rs[i] = median(ra) / median(rb)
	}
	return quantile(rs, 0.025), quantile(rs, 0.975)
}

// BenchmarkCPUOn: PSCI CPU_ON to the secondary's first guest instruction,
// over every secondary of a 64-vCPU payload run, with PSCI in mvm (user)
// and in KVM (kernel), three runs of each per iteration, interleaved. It prints both distributions, the
// host-side steps of mvm's path, mvm's CPU time per run (what any polling
// costs), and a bootstrap 95% interval of the user/kernel median ratio; a
// run whose interval is wider than ±15% of the ratio is flagged as too
// noisy to judge. Aim: user/kernel <= 1.0.
func BenchmarkCPUOn(b *testing.B) {
	const cpus, pairs = 64, 3
	var user, kernel []float64
	var userCPU, kernelCPU []float64
	steps := map[string][]float64{}
	for i := 0; i < b.N*pairs; i++ {
		u := cpuOnLatencies(b, cpus, "user")
		k := cpuOnLatencies(b, cpus, "kernel")
		user, kernel = append(user, u.ns...), append(kernel, k.ns...)
		userCPU, kernelCPU = append(userCPU, float64(u.cpu)), append(kernelCPU, float64(k.cpu))
		for name, v := range u.steps {
			steps[name] = append(steps[name], v...)
		}
	}
	ratio := median(user) / median(kernel)
	lo, hi := ratioCI(user, kernel)
	w := os.Stderr
	fmt.Fprintf(w, "CPU_ON latency, µs (%d user, %d kernel samples):\n", len(user), len(kernel))
	fmt.Fprintf(w, "  %-16s %7s %7s %7s %7s %7s %7s %7s\n", "", "min", "p10", "p25", "median", "p75", "p90", "max")
	fmt.Fprintf(w, "  %-16s%s\n", "user", distribution(user))
	fmt.Fprintf(w, "  %-16s%s\n", "kernel", distribution(kernel))
	fmt.Fprintf(w, "mvm's CPU_ON path (user), µs:\n")
	for _, name := range cpuOnSteps {
		fmt.Fprintf(w, "  %-16s%s\n", name, distribution(steps[name]))
	}
	fmt.Fprintf(w, "mvm CPU time per run: user %.0f ms, kernel %.0f ms (medians)\n", median(userCPU)/1e6, median(kernelCPU)/1e6)
	verdict := "ok"
	if hi-lo > 0.3*ratio {
		verdict = "TOO NOISY TO JUDGE"
	}
	fmt.Fprintf(w, "user/kernel median %.3f, 95%% CI %.3f..%.3f: %s\n", ratio, lo, hi, verdict)
	b.ReportMetric(median(user)/1e3, "user-us")
	b.ReportMetric(quantile(user, 0.9)/1e3, "user-p90-us")
	b.ReportMetric(median(kernel)/1e3, "kernel-us")
	b.ReportMetric(quantile(kernel, 0.9)/1e3, "kernel-p90-us")
	b.ReportMetric(ratio, "user/kernel")
	b.ReportMetric(quantile(user, 0.9)/quantile(kernel, 0.9), "user/kernel-p90")
	b.ReportMetric(0, "ns/op")
}

var (
	smpStartRe = regexp.MustCompile(`(?m)^mvm-guest: smp start ([0-9.]+)`)
	smpDoneRe  = regexp.MustCompile(`(?m)^mvm-guest: smp done ([0-9.]+)`)
)

// overcommitAppend is what a 64-vCPU Linux guest needs on its command line
// to boot at all, most of the time, in the lab, where it is 32x
// overcommitted (2 emulated CPUs, shared with other labs): without it 14 of
// 15 boots livelocked, with it 4 of 20, with PSCI in mvm and in KVM alike
// (docs/boot-phases.md). isolcpus=domain keeps
// CPUs 1-63 out of the scheduler's load-balancing domains, whose
// remote-runqueue locking convoys behind vCPUs the host has descheduled;
// the other three keep soft-lockup and RCU-stall reports, which the
// overcommit provokes, off the emulated UART, where printing them with
// interrupts off makes things worse (kernel-parameters.txt has all four).
// Secondary bring-up (CPU_ON of every vCPU) is over before the scheduler
// builds its domains, so the knob leaves what the benchmarks time alone.
const overcommitAppend = "isolcpus=domain,1-63 nosoftlockup nowatchdog rcupdate.rcu_cpu_stall_suppress=1"

// bootAppend is the kernel command line the bring-up benchmarks use for a
// guest of cpus vCPUs.
func bootAppend(cpus int) string {
	if cpus >= 64 {
		return "quiet " + overcommitAppend
	}
	return "quiet"
}

// guestBoot is one boot of the Linux test guest to userspace, with the
// secondary bring-up the guest kernel timed: its dmesg timestamps from
// "smp: Bringing up secondary CPUs" to "smp: Brought up", which the test
// init prints. ok is false when the boot did not reach userspace in time
// (a hang); why says so in one line.
type guestBoot struct {
	bringUp, wall time.Duration
	ok            bool
	why           string
}

func bootGuest(b *testing.B, cpus int, mode, appendArgs string, timeout time.Duration) guestBoot {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, env(b, "MVM_BIN"), "run", "--kernel", env(b, "MVM_LINUX"), "--initrd", testInitrdB(b),
		"--cpus", strconv.Itoa(cpus), "--memory", "2G", "--psci", mode, "--append", appendArgs)
	start := time.Now()
	out, err := cmd.Output()
	g := guestBoot{wall: time.Since(start)}
	if err != nil {
		// Not the guest's console: a hung guest's lockup reports in the
		// lab's console would read as the lab kernel's own.
		g.why = fmt.Sprintf("%v after %v (timeout %v), %d soft lockup reports", err, g.wall.Round(time.Second), timeout,
			strings.Count(string(out), "soft lockup"))
		return g
	}
	s, e := smpStartRe.FindSubmatch(out), smpDoneRe.FindSubmatch(out)
	if s == nil || e == nil || !strings.Contains(string(out), "mvm-guest: poweroff") {
		g.why = "reached userspace without the test init's smp start/done and poweroff lines"
		return g
	}
	t0, _ := strconv.ParseFloat(string(s[1]), 64)
	t1, _ := strconv.ParseFloat(string(e[1]), 64)
	g.bringUp, g.ok = time.Duration((t1-t0)*1e9), true
	return g
}

// guestBringUp is bootGuest with the benchmarks' command line.
func guestBringUp(b *testing.B, cpus int, mode string) (d time.Duration, ok bool) {
	b.Helper()
	g := bootGuest(b, cpus, mode, bootAppend(cpus), 4*time.Minute)
	if !g.ok {
		b.Logf("psci=%s cpus=%d: %s", mode, cpus, g.why)
	}
	return g.bringUp, g.ok
}

// BenchmarkBoot64: the 64-vCPU Linux test guest boots to userspace several
// times in a row, with PSCI in mvm and in KVM: each iteration boots both
// (alternating which goes first), so make bench's -benchtime 2x (Go's
// one-iteration probe, then two) makes three boots in a row per mode. Every
// boot must power off from userspace within 4 minutes (a good one takes
// under 1.5 in the lab), else the benchmark fails; with other labs on the
// host it often does (about one boot in five livelocks, in either mode). It prints every boot:
// wall time and the guest-timed bring-up.
func BenchmarkBoot64(b *testing.B) {
	const cpus = 64
	failed := 0
	for i := 0; i < b.N; i++ {
		modes := []string{"user", "kernel"}
		if i%2 == 1 {
			modes = []string{"kernel", "user"}
		}
		for _, mode := range modes {
			g := bootGuest(b, cpus, mode, bootAppend(cpus), 4*time.Minute)
			if !g.ok {
				failed++
				fmt.Fprintf(os.Stderr, "boot64 N=%d #%d psci=%s: FAILED: %s\n", b.N, i+1, mode, g.why)
				continue
			}
			fmt.Fprintf(os.Stderr, "boot64 N=%d #%d psci=%s: userspace and power-off in %.1f s, bring-up %.0f ms\n",
				b.N, i+1, mode, g.wall.Seconds(), float64(g.bringUp)/1e6)
		}
	}
	b.ReportMetric(float64(failed), "failed-boots")
	b.ReportMetric(0, "ns/op")
	if failed > 0 {
		b.Fatalf("%d of %d boots of the %d-vCPU guest did not reach userspace", failed, 2*b.N, cpus)
	}
}

// BenchmarkBringUp: whole-boot secondary bring-up as the guest kernel sees
// it (dmesg timestamps, see guestBringUp) at 8, 16, 32 and 64 vCPUs, with
// PSCI in mvm (user) and in KVM (kernel); per size the two modes alternate
// which boots first. It prints every sample and reports per size the
// medians, min..max, user/kernel and its bootstrap 95% interval. Aim:
// user/kernel <= 1.0 at every size. With MVM_BIN_BASE (make bench
// BENCH_BASE=PATH) a third side, base, is PSCI in mvm run by that build,
// interleaved with the others (psciSides), reported as base/kernel and
// user/base.
func BenchmarkBringUp(b *testing.B) {
	for _, cpus := range []int{8, 16, 32, 64} {
		b.Run(fmt.Sprintf("cpus=%d", cpus), func(b *testing.B) {
			got := map[string][]float64{}
			hung := map[string]int{}
			for i := 0; i < b.N; i++ {
				for _, side := range psciSides(i) {
					side.run(func() {
						d, ok := guestBringUp(b, cpus, side.mode)
						if !ok {
							hung[side.name]++
							return
						}
						got[side.name] = append(got[side.name], float64(d))
					})
				}
			}
			names := []string{"user", "kernel"}
			if os.Getenv("MVM_BIN_BASE") != "" {
				names = append(names, "base")
			}
			for _, name := range names {
				fmt.Fprintf(os.Stderr, "bring-up cpus=%d psci=%s ms: %s (failed boots: %d)\n", cpus, name, msList(got[name]), hung[name])
			}
			u, k := got["user"], got["kernel"]
			if len(u) == 0 || len(k) == 0 {
				b.Fatalf("cpus=%d: no complete boot in one of the modes (user %d, kernel %d failed)", cpus, hung["user"], hung["kernel"])
			}
			// The bootstrap interval says whether the boots can tell the
			// modes apart at all: with PSCI in mvm each secondary's CPU_ON
			// costs some 0.1 ms more (BenchmarkCPUOn), a few ms of a
			// bring-up whose boot-to-boot spread is tens of ms or more.
			reportUserKernel(b, fmt.Sprintf("bring-up cpus=%d", cpus), u, k)
			if ba := got["base"]; len(ba) > 0 {
				for _, r := range []struct {
					name string
					a, b []float64
				}{{"base/kernel", ba, k}, {"user/base", u, ba}} {
					lo, hi := ratioCI(r.a, r.b)
					fmt.Fprintf(os.Stderr, "bring-up cpus=%d %s median %.3f, 95%% CI %.3f..%.3f; base: %d of %d within ±5%% of their median\n",
						cpus, r.name, median(r.a)/median(r.b), lo, hi, withinOfMedian(ba, 0.05), len(ba))
					b.ReportMetric(median(r.a)/median(r.b), r.name)
				}
				b.ReportMetric(median(ba)/1e6, "base-ms")
			}
			b.ReportMetric(float64(hung["user"]+hung["kernel"]+hung["base"]), "failed-boots")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// hotplugBenchCmd times, in the guest, six rounds of taking CPUs 1-3 of a
// 4-vCPU guest offline and online again (Linux's CPU_OFF, then CPU_ON of a
// vCPU that has run: the re-park path, vcpu.rearm), on /proc/uptime.
const hotplugBenchCmd = `t0=$(cut -d' ' -f1 /proc/uptime)
for r in 1 2 3 4 5 6; do
	for c in 1 2 3; do echo 0 > /sys/devices/system/cpu/cpu$c/online; done
	for c in 1 2 3; do echo 1 > /sys/devices/system/cpu/cpu$c/online; done
done
t1=$(cut -d' ' -f1 /proc/uptime)
echo "mvm-hotplug: online $(cat /sys/devices/system/cpu/online) from $t0 to $t1"`

var hotplugTimeRe = regexp.MustCompile(`mvm-hotplug: online (\S+) from ([0-9.]+) to ([0-9.]+)`)

// BenchmarkHotplug: Linux CPU hotplug through sysfs, six rounds of three
// CPUs off and on, timed by the guest (10 ms resolution, rounds of about
// 1.5 s in the lab), with PSCI in mvm and in KVM, alternating which goes
// first; three boots a side per iteration. It prints every sample and a
// bootstrap 95% interval of the user/kernel median ratio. Aim: <= 1.0.
func BenchmarkHotplug(b *testing.B) {
	initrd := initrdWithCmd(b, hotplugBenchCmd)
	got := map[string][]float64{}
	for i := 0; i < 3*b.N; i++ {
		modes := []string{"user", "kernel"}
		if i%2 == 1 {
			modes = []string{"kernel", "user"}
		}
		for _, mode := range modes {
			r := mvm(b, 4*time.Minute, "run", "--kernel", env(b, "MVM_LINUX"), "--initrd", initrd,
				"--cpus", "4", "--memory", "512M", "--psci", mode, "--append", "quiet")
			m := hotplugTimeRe.FindStringSubmatch(r.stdout)
			if r.code != 0 || m == nil || m[1] != "0-3" {
				b.Fatalf("psci=%s: exit %d, hotplug line %q\n%s\n%s", mode, r.code, m, r.stdout, r.stderr)
			}
			t0, _ := strconv.ParseFloat(m[2], 64)
			t1, _ := strconv.ParseFloat(m[3], 64)
			got[mode] = append(got[mode], (t1-t0)*1e9)
		}
	}
	for _, mode := range []string{"user", "kernel"} {
		fmt.Fprintf(os.Stderr, "hotplug psci=%s ms: %s\n", mode, msList(got[mode]))
	}
	reportUserKernel(b, "hotplug", got["user"], got["kernel"])
	b.ReportMetric(0, "ns/op")
}

// msList is samples in ns as a line of whole milliseconds.
func msList(v []float64) string {
	ms := make([]string, len(v))
	for i, x := range v {
		// Instruction-time bring-ups take a few ms: keep their decimals.
		if x < 100e6 {
			ms[i] = fmt.Sprintf("%.2f", x/1e6)
		} else {
			ms[i] = fmt.Sprintf("%.0f", x/1e6)
		}
	}
	return strings.Join(ms, " ")
}

// withinOfMedian counts the values of v within ±frac of v's median: how
// steady a measure repeats (the bring-up goal: 9 boots of 10 within 5%).
func withinOfMedian(v []float64, frac float64) int {
	m, n := median(v), 0
	for _, x := range v {
		if x >= m*(1-frac) && x <= m*(1+frac) {
			n++
		}
	}
	return n
}

// reportUserKernel prints label's user/kernel ratio of the medians of u
// and k (ns, PSCI in mvm and in KVM) with its bootstrap 95% interval, and
// reports the ratio, the interval and each side's median, min and max (ms).
func reportUserKernel(b *testing.B, label string, u, k []float64) {
	lo, hi := ratioCI(u, k)
	fmt.Fprintf(os.Stderr, "%s user/kernel median %.3f, 95%% CI %.3f..%.3f (%d and %d boots)\n",
		label, median(u)/median(k), lo, hi, len(u), len(k))
	for _, side := range []struct {
		name string
		v    []float64
	}{{"user", u}, {"kernel", k}} {
		n := withinOfMedian(side.v, 0.05)
		fmt.Fprintf(os.Stderr, "%s %s: %d of %d within ±5%% of their median\n", label, side.name, n, len(side.v))
		b.ReportMetric(float64(n)/float64(len(side.v)), side.name+"-steady")
		b.ReportMetric(median(side.v)/1e6, side.name+"-ms")
		b.ReportMetric(slices.Min(side.v)/1e6, side.name+"-min-ms")
		b.ReportMetric(slices.Max(side.v)/1e6, side.name+"-max-ms")
	}
	b.ReportMetric(median(u)/median(k), "user/kernel")
	b.ReportMetric(lo, "ci-lo")
	b.ReportMetric(hi, "ci-hi")
}

// BenchmarkProfileBreakdown: what the breakdown below the exception class,
// the latency histograms, the phases and the PC counts cost. An 8-vCPU
// Linux boot to power-off with --profile and with --profile --profile-plain
// (perf kvm stat's reasons only), interleaved; the ratio of the medians of
// the total, and the range of the per-pair ratios. Aim: <= 1.05.
//
// Then the profiler's memory: mvm's overhead (RSS minus resident guest
// RAM) after a profiled run of the counts payload with 10, 1000 and 4000
// reps (about 100 and 400 times the exits). The first step may grow while
// the fixed-size tables fill; bounded means the second step's ratio,
// longest/long, stays near 1 while the exits grow 4x.
func BenchmarkProfileBreakdown(b *testing.B) {
	var full, plain, pairs []float64
	for i := 0; i < b.N; i++ {
		out := filepath.Join(b.TempDir(), "profile.json")
		f := float64(bootLinux(b, 8, "512M", "--profile", "--profile-format", "json", "--profile-out", out).PhasesNS["total"])
		p := float64(bootLinux(b, 8, "512M", "--profile", "--profile-plain", "--profile-format", "json", "--profile-out", out).PhasesNS["total"])
		full, plain, pairs = append(full, f), append(plain, p), append(pairs, f/p)
	}
	b.ReportMetric(median(plain)/1e6, "plain-ms")
	b.ReportMetric(median(full)/median(plain), "breakdown/plain")
	b.ReportMetric(slices.Min(pairs), "pair-min")
	b.ReportMetric(slices.Max(pairs), "pair-max")

	overhead := func(reps uint64) (float64, uint64) {
		dir := b.TempDir()
		res := filepath.Join(dir, "result.json")
		r := mvm(b, 10*time.Minute, "run", "--kernel", countsPayload(b, reps), "--cpus", "2", "--profile",
			"--profile-format", "json", "--profile-out", filepath.Join(dir, "profile.json"), "--result-json", res)
		if r.code != 0 {
			b.Fatalf("counts %d reps: exit %d\n%s", reps, r.code, r.stderr)
		}
		s := readJSON[runSummary](b, res)
		rep := readJSON[struct {
			Rows []struct {
				Source, VCPU string
				Count        uint64
			} `json:"rows"`
		}](b, filepath.Join(dir, "profile.json"))
		var exits uint64
		for _, row := range rep.Rows {
			if row.Source == "tracepoint" && row.VCPU == "total" {
				exits += row.Count
			}
		}
		return float64(s.Memory.Overhead), exits
	}
	short, shortExits := overhead(10)
	long, longExits := overhead(1000)
	longest, longestExits := overhead(4000)
	b.ReportMetric(short/(1<<20), "short-overhead-MiB")
	b.ReportMetric(long/short, "long/short-overhead")
	b.ReportMetric(float64(longExits)/float64(max(shortExits, 1)), "long/short-exits")
	b.ReportMetric(longest/long, "longest/long-overhead")
	b.ReportMetric(float64(longestExits)/float64(max(longExits, 1)), "longest/long-exits")
	b.ReportMetric(0, "ns/op")
}
