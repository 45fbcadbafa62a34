//go:build linux && arm64

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Benchmarks of mvm against QEMU -accel kvm on the same kernel, initramfs
// and (for virtio-blk) the same raw file, in the same run: issue 20's last
// two goals. Both VMMs run inside the lab (QEMU from .cache/lab/qemu.cpio),
// so in the instruction-time lab (make bench-insn) every figure counts
// executed instructions, the guest's clock included. Each iteration is
// qemuRounds rounds, so that -benchtime 1x (Go's probe run alone) already
// gives a spread: a round boots every variant once.
const qemuRounds = 3

// statsDelta is the sum over a profile's vCPUs of KVM stats names (the
// stats fd's deltas over the run, as mvm run --profile and mvm profile
// report them).
func statsDelta(b *testing.B, path string, names ...string) uint64 {
	b.Helper()
	p := readJSON[profileJSON](b, path)
	var n uint64
	found := false
	for _, s := range p.KVMStats {
		if s.VCPU == "total" {
			continue
		}
		for _, name := range names {
			if s.Name == name {
				n += s.Delta
				found = true
			}
		}
	}
	if !found {
		b.Fatalf("%s: no KVM stats %v per vCPU", path, names)
	}
	return n
}

// blkLoad is what one guest of BenchmarkBlkQEMU measured, and the MMIO
// exits of its boot (KVM's stats fd: mmio_exit_user went to the VMM,
// mmio_exit_kernel were handled in KVM, e.g. an ioeventfd notify).
type blkLoad struct {
	seq, rand      float64
	user, kernel   uint64
	wall           time.Duration
	stdout, stderr string
}

// blkGuestCmd is the guest's load: the disk read sequentially in 1 MiB
// O_DIRECT requests, then benchRandOps random 4 KiB O_DIRECT reads, both
// timed by the guest's clock (loadTool). With blkbench.idle=1 on the
// command line the guest boots the same way and reads nothing: the idle
// boot whose exits are subtracted.
var blkGuestCmd = fmt.Sprintf(`
if grep -q blkbench.idle=1 /proc/cmdline; then exit 0; fi
i=0
while [ ! -b /dev/vda ] && [ $i -lt 50 ]; do usleep 100000; i=$((i + 1)); done
export MVM_GUEST_TOOL
MVM_GUEST_TOOL=seq /bin/tool /dev/vda 1
MVM_GUEST_TOOL=rand /bin/tool /dev/vda 1 %d
`, benchRandOps)

// blkRun boots one guest of BenchmarkBlkQEMU with mvm or QEMU and returns
// what it measured; idle boots read nothing.
func blkRun(b *testing.B, vmm, disk, initrd string, idle bool) blkLoad {
	b.Helper()
	// The kernel's crypto self-tests (RSA and ECDSA signature checks,
	// testmgr) run in the background after init starts, for about
	// 0.5 s of instruction time: without noCryptoTests they overlap
	// the reads by a different amount under each VMM (the faster
	// boot starts reading sooner, and its guest is busy meanwhile),
	// docs/devices.md.
	appendArgs := "quiet " + noCryptoTests
	if idle {
		appendArgs += " blkbench.idle=1"
	}
	prof := filepath.Join(b.TempDir(), "profile.json")
	var c *exec.Cmd
	switch vmm {
	case "mvm", "mvm-base":
		bin := env(b, "MVM_BIN")
		if vmm == "mvm-base" {
			bin = env(b, "MVM_BIN_BASE")
		}
		c = exec.Command(bin, "run", "--kernel", env(b, "MVM_LINUX"), "--initrd", initrd,
			"--memory", "512M", "--append", appendArgs, "--disk", disk+",ro", "--rng=false",
			"--profile", "--profile-sources", "kvm_stats", "--profile-format", "json", "--profile-out", prof)
	case "qemu":
		// Like for like with mvm's --disk: virtio-mmio in its modern
		// (version 2) layout, one request queue of 256 entries, the host's
		// page cache under the image (cache=writeback: mvm's preadv on a
		// file opened without O_DIRECT), read-only.
		q := append(qemuBase(b, 1, "512", initrd, "console=ttyAMA0 panic=-1 "+appendArgs),
			"-global", "virtio-mmio.force-legacy=false",
			"-drive", "file="+disk+",if=none,id=vd0,format=raw,readonly=on,cache=writeback",
			"-device", "virtio-blk-device,drive=vd0,queue-size=256,num-queues=1")
		args := append([]string{"profile", "--sources", "kvm_stats", "--format", "json", "--out", prof, "--"}, q...)
		c = exec.Command(env(b, "MVM_BIN"), args...)
	}
	if cpu := os.Getenv("MVM_BENCH_PIN_CPU"); cpu != "" {
		// Every thread of the VMM (QEMU's too, a child of mvm profile)
		// on one lab CPU: the placement of the vCPU and I/O threads, which
		// the lab's scheduler otherwise picks anew per boot, is then the
		// same in every boot (docs/devices.md).
		c = exec.Command(env(b, "MVM_BUSYBOX"), append([]string{"taskset", "-c", cpu}, c.Args...)...)
	}
	var out, errb strings.Builder
	c.Stdout, c.Stderr = &out, &errb
	start := time.Now()
	err := c.Run()
	l := blkLoad{wall: time.Since(start), stdout: out.String(), stderr: errb.String()}
	if err != nil || !strings.Contains(l.stdout, "mvm-guest: poweroff") {
		b.Fatalf("%s (idle %v): %v\nstdout:\n%s\nstderr:\n%s", vmm, idle, err, l.stdout, l.stderr)
	}
	l.user = statsDelta(b, prof, "mmio_exit_user")
	l.kernel = statsDelta(b, prof, "mmio_exit_kernel")
	if !idle {
		l.seq = toolValue(b, l.stdout, "seq")
		l.rand = toolValue(b, l.stdout, "rand")
	}
	return l
}

// BenchmarkBlkQEMU: virtio-blk, mvm's --disk against QEMU's
// virtio-blk-device on the same raw 64 MiB file (read-only, the host's page
// cache under both), the same guest kernel and initramfs, 1 vCPU, 512 MiB.
// In each round the guest reads the disk sequentially in 1 MiB O_DIRECT
// requests and with benchRandOps random 4 KiB O_DIRECT reads, timed by its
// own clock, once under each VMM; each VMM also boots the same guest once
// idle (no reads). Exits per MiB read: the loaded boot's MMIO exits (KVM's
// stats fd, mmio_exit_user + mmio_exit_kernel, summed over vCPUs; QEMU's
// through mvm profile --sources kvm_stats) minus the idle boot's, over the
// MiB read. Reported: each VMM's medians, mvm/QEMU per round (median,
// min..max) and the exits per MiB, split into user and kernel. With
// MVM_BIN_BASE (make bench BENCH_BASE=PATH) another mvm build, e.g. main's,
// runs too, as mvm-base: an A/B of two builds beside QEMU in one run.
// With MVM_BENCH_HALT_POLL_NS (make bench HALT_POLL_NS=N) the lab's KVM
// halt-polls at most that long for every VMM of the run (haltPoll); with
// MVM_BENCH_PIN_CPU (make bench PIN_CPU=N) every VMM runs pinned to that
// one CPU (busybox taskset, MVM_BUSYBOX).
func BenchmarkBlkQEMU(b *testing.B) {
	haltPoll(b)
	if cpu := os.Getenv("MVM_BENCH_PIN_CPU"); cpu != "" {
		if _, err := strconv.Atoi(cpu); err != nil {
			b.Fatalf("MVM_BENCH_PIN_CPU=%q: want one CPU number", cpu)
		}
		fmt.Printf("%s: every VMM pinned to CPU %s (MVM_BENCH_PIN_CPU)\n", b.Name(), cpu)
	}
	dir := b.TempDir()
	disk := randomFile(b, dir, "disk.img", benchDiskSize)
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	initrd := virtioInitrdWith(b, map[string]string{"bin/tool": self}, blkGuestCmd)
	read := float64(benchDiskSize+benchRandOps*4096) / (1 << 20)

	v := map[string][]float64{}
	add := func(k string, x float64) { v[k] = append(v[k], x) }
	rounds := qemuRounds * b.N
	for i := 0; i < rounds; i++ {
		order := []string{"mvm", "qemu"}
		if os.Getenv("MVM_BIN_BASE") != "" {
			order = append(order, "mvm-base")
		}
		// Rotate the order, so that any drift over the run hits all alike.
		order = append(order[i%len(order):], order[:i%len(order)]...)
		got := map[string]blkLoad{}
		for _, vmm := range order {
			l := blkRun(b, vmm, disk, initrd, false)
			idle := blkRun(b, vmm, disk, initrd, true)
			got[vmm] = l
			user := float64(l.user) - float64(idle.user)
			kernel := float64(l.kernel) - float64(idle.kernel)
			add(vmm+"-seq-MB/s", l.seq)
			add(vmm+"-rand4k-IOPS", l.rand)
			add(vmm+"-exits/MiB", (user+kernel)/read)
			add(vmm+"-user-exits/MiB", user/read)
			add(vmm+"-kernel-exits/MiB", kernel/read)
			fmt.Printf("%s round %d/%d %s: seq %.2f MB/s, rand4k %.0f IOPS, mmio exits loaded user %d kernel %d, idle user %d kernel %d, %.1f per MiB; wall %.1f s + idle %.1f s\n",
				b.Name(), i+1, rounds, vmm, l.seq, l.rand, l.user, l.kernel, idle.user, idle.kernel, (user+kernel)/read,
				l.wall.Seconds(), idle.wall.Seconds())
		}
		add("seq-mvm/qemu", got["mvm"].seq/got["qemu"].seq)
		add("rand4k-mvm/qemu", got["mvm"].rand/got["qemu"].rand)
		if base, ok := got["mvm-base"]; ok {
			add("seq-mvm/mvm-base", got["mvm"].seq/base.seq)
			add("rand4k-mvm/mvm-base", got["mvm"].rand/base.rand)
		}
	}
	keys := []string{"mvm-seq-MB/s", "qemu-seq-MB/s", "seq-mvm/qemu", "mvm-rand4k-IOPS", "qemu-rand4k-IOPS", "rand4k-mvm/qemu",
		"mvm-exits/MiB", "qemu-exits/MiB", "mvm-user-exits/MiB", "qemu-user-exits/MiB", "mvm-kernel-exits/MiB", "qemu-kernel-exits/MiB"}
	if os.Getenv("MVM_BIN_BASE") != "" {
		keys = append(keys, "mvm-base-seq-MB/s", "mvm-base-rand4k-IOPS", "seq-mvm/mvm-base", "rand4k-mvm/mvm-base", "mvm-base-exits/MiB")
	}
	for _, k := range keys {
		b.ReportMetric(median(v[k]), k)
		fmt.Fprintf(os.Stderr, "blk vs qemu %s: median %.4g, min..max %s (n=%d)\n", k, median(v[k]), spread(v[k]), len(v[k]))
	}
	b.ReportMetric(0, "ns/op")
}

// haltPollParam is KVM's global halt-polling limit: how long a vCPU that
// waits (WFI) spins for a wake-up before it sleeps
// (Documentation/virt/kvm/halt-polling.rst); VMs that did not set their
// own (KVM_CAP_HALT_POLL, which neither mvm nor QEMU does) read it at
// every halt.
const haltPollParam = "/sys/module/kvm/parameters/halt_poll_ns"

// haltPoll sets haltPollParam to MVM_BENCH_HALT_POLL_NS, if that is set,
// until the benchmark ends, and prints the value the run used. In the
// instruction-time lab a poll's spin counts as guest time and its length
// adapts to earlier waits, which scatters guest-timed I/O figures from
// boot to boot (docs/devices.md); 0 takes that out, for every VMM alike.
func haltPoll(b *testing.B) {
	b.Helper()
	set := os.Getenv("MVM_BENCH_HALT_POLL_NS")
	old, err := os.ReadFile(haltPollParam)
	if err != nil {
		if set != "" {
			b.Fatalf("MVM_BENCH_HALT_POLL_NS: %v", err)
		}
		fmt.Printf("%s: halt_poll_ns not readable (%v)\n", b.Name(), err)
		return
	}
	cur := strings.TrimSpace(string(old))
	if set == "" {
		fmt.Printf("%s: halt_poll_ns %s (KVM's setting, left as it is)\n", b.Name(), cur)
		return
	}
	if _, err := strconv.ParseUint(set, 10, 32); err != nil {
		b.Fatalf("MVM_BENCH_HALT_POLL_NS=%q: want a number of nanoseconds", set)
	}
	if err := os.WriteFile(haltPollParam, []byte(set), 0o644); err != nil {
		b.Fatalf("set KVM's halt polling: %v", err)
	}
	b.Cleanup(func() { os.WriteFile(haltPollParam, old, 0o644) })
	fmt.Printf("%s: halt_poll_ns %s for this run (MVM_BENCH_HALT_POLL_NS; KVM's setting was %s)\n", b.Name(), set, cur)
}

// bootVariant is one way BenchmarkBootQEMU boots the guest.
type bootVariant struct {
	name string
	// mvm's extra arguments; nil for QEMU.
	mvm []string
	// minCPUs: the variant boots only guests of at least this many vCPUs.
	minCPUs int
}

// BenchmarkBootQEMU: the Linux test guest (its busybox init prints its
// lines and powers off) booted to power-off by QEMU -accel kvm and by mvm,
// at 1 and 4 vCPUs, 256 MiB, the same kernel and initramfs, timed from
// outside: the VMM process's start to its exit. QEMU's command line is
// "console=ttyAMA0 quiet panic=-1" on its PL011. mvm boots three ways:
//
//	mvm          its defaults: the 16550 console with earlycon
//	             (console=ttyS0 earlycon=uart8250,mmio,... quiet panic=-1)
//	mvm-8250     the 16550 without earlycon (earlycon's polled writes
//	             are MMIO exits QEMU's boot does not make)
//	mvm-pl011    --serial pl011 and QEMU's command line exactly
//	mvm-pl011-kvmpsci  the same with --psci kernel (4 vCPUs only; with
//	             one there is no CPU_ON)
//
// PSCI is mvm's default (in mvm where the SMCCC filter exists) except in
// the last variant, and KVM's under QEMU. Each round boots every variant,
// in an order that rotates; reported
// per vCPU count: each variant / QEMU (median of the per-round ratios,
// min..max), QEMU's and each variant's median time, and mvm's vmm_setup
// and kernel_to_user phases (--result-json).
func BenchmarkBootQEMU(b *testing.B) {
	initrd := testInitrdB(b)
	all := []bootVariant{
		{name: "qemu"},
		{name: "mvm", mvm: []string{"--append", "quiet panic=-1"}},
		{name: "mvm-8250", mvm: []string{"--cmdline", "console=ttyS0 quiet panic=-1"}},
		{name: "mvm-pl011", mvm: []string{"--serial", "pl011", "--cmdline", "console=ttyAMA0 quiet panic=-1"}},
		{name: "mvm-pl011-kvmpsci", mvm: []string{"--serial", "pl011", "--cmdline", "console=ttyAMA0 quiet panic=-1", "--psci", "kernel"}, minCPUs: 2},
	}
	for _, cpus := range []int{1, 4} {
		variants := slices.DeleteFunc(slices.Clone(all), func(v bootVariant) bool { return cpus < v.minCPUs })
		b.Run(fmt.Sprintf("cpus=%d", cpus), func(b *testing.B) {
			times := map[string][]float64{}
			ratios := map[string][]float64{}
			phases := map[string][]float64{}
			rounds := qemuRounds * b.N
			for i := 0; i < rounds; i++ {
				round := map[string]float64{}
				for k := range variants {
					bv := variants[(k+i)%len(variants)]
					d, ph := bootOnce(b, bv, cpus, initrd)
					round[bv.name] = d
					times[bv.name] = append(times[bv.name], d)
					for p, ns := range ph {
						phases[bv.name+" "+p] = append(phases[bv.name+" "+p], float64(ns))
					}
				}
				line := fmt.Sprintf("%s round %d/%d: qemu %.1f ms", b.Name(), i+1, rounds, round["qemu"]/1e6)
				for _, bv := range variants[1:] {
					r := round[bv.name] / round["qemu"]
					ratios[bv.name] = append(ratios[bv.name], r)
					line += fmt.Sprintf(", %s %.1f ms (%.3f; vmm_setup %.1f ms, kernel_to_user %.1f ms)", bv.name, round[bv.name]/1e6, r,
						phases[bv.name+" vmm_setup"][i]/1e6, phases[bv.name+" kernel_to_user"][i]/1e6)
				}
				fmt.Println(line)
			}
			b.ReportMetric(median(times["qemu"])/1e6, "qemu-ms")
			for _, bv := range variants[1:] {
				b.ReportMetric(median(ratios[bv.name]), bv.name+"/qemu")
				b.ReportMetric(median(times[bv.name])/1e6, bv.name+"-ms")
				for _, p := range []string{"vmm_setup", "kernel_to_user"} {
					b.ReportMetric(median(phases[bv.name+" "+p])/1e6, bv.name+"-"+p+"-ms")
				}
				fmt.Fprintf(os.Stderr, "boot vs qemu cpus=%d %s/qemu: median %.3f, min..max %s (n=%d); %s ms %s, qemu ms %s\n",
					cpus, bv.name, median(ratios[bv.name]), spread(ratios[bv.name]), len(ratios[bv.name]),
					bv.name, msList(times[bv.name]), msList(times["qemu"]))
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

// bootOnce boots the guest once as bv says and returns the VMM process's
// start-to-exit time in ns and, for mvm, its phases.
func bootOnce(b *testing.B, bv bootVariant, cpus int, initrd string) (float64, map[string]int64) {
	b.Helper()
	var c *exec.Cmd
	res := filepath.Join(b.TempDir(), "result.json")
	if bv.mvm == nil {
		q := qemuBase(b, cpus, "256", initrd, qemuConsoleCmdline)
		c = exec.Command(q[0], q[1:]...)
	} else {
		args := append([]string{"run", "--kernel", env(b, "MVM_LINUX"), "--initrd", initrd,
			"--cpus", strconv.Itoa(cpus), "--memory", "256M", "--result-json", res}, bv.mvm...)
		c = exec.Command(env(b, "MVM_BIN"), args...)
	}
	start := time.Now()
	out, err := c.CombinedOutput()
	d := float64(time.Since(start))
	if err != nil || !strings.Contains(string(out), "mvm-guest: poweroff") {
		b.Fatalf("%s cpus=%d: %v\n%s", bv.name, cpus, err, out)
	}
	if bv.mvm == nil {
		return d, nil
	}
	s := readJSON[runSummary](b, res)
	return d, map[string]int64{"vmm_setup": s.PhasesNS["vmm_setup"], "kernel_to_user": s.PhasesNS["kernel_to_user"]}
}
