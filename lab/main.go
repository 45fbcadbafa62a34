// Command lab runs commands on real arm64 KVM from an x86_64 (or any) host:
// it packs the given files with busybox into an initramfs, boots Debian's
// arm64 kernel under qemu-system-aarch64 with EL2 emulated (so the emulated
// Linux has a working /dev/kvm), runs a script there, streams the console
// and exits with the script's status. DESIGN.md section 4 explains why.
//
//	go run ./lab -kernel .cache/lab/vmlinuz -busybox .cache/lab/busybox \
//	    -add out/arm64/mvm=/lab/mvm -run '/lab/mvm caps'
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/mvm-dev/mvm/guest"
)

// statusPrefix starts the line /init prints with the script's exit status.
const statusPrefix = "MVM-LAB-EXIT: "

// Files the script leaves in $LAB_OUT come back over the console, each as
// fileBegin NAME, its gzip compressed and base64 encoded, fileEnd (the lab
// machine has no other channel to the host). See outFiles.
const (
	fileBegin = "MVM-LAB-FILE: "
	fileEnd   = "MVM-LAB-FILE-END"
	guestOut  = "/tmp/lab-out"
)

type addList []string

func (a *addList) String() string     { return strings.Join(*a, ",") }
func (a *addList) Set(s string) error { *a = append(*a, s); return nil }

func main() {
	var (
		kernel  = flag.String("kernel", ".cache/lab/vmlinuz", "arm64 Linux Image for the lab machine (with KVM)")
		busybox = flag.String("busybox", ".cache/lab/busybox", "static arm64 busybox")
		run     = flag.String("run", "", "shell commands to run in the lab (required)")
		timeout = flag.Duration("timeout", 15*time.Minute, "give up after this long")
		cpus    = flag.Int("smp", 2, "emulated CPUs of the lab machine")
		mem     = flag.String("m", "3072", "memory of the lab machine (QEMU -m)")
		clock   = flag.String("time", "wall", "the lab's clock: wall (multi-threaded TCG, the host's wall clock: end-to-end figures, ±10-20% between runs) or insn (QEMU's instruction counting, -icount shift=0,align=off,sleep=off: one ns per executed guest instruction, so a path's cost is its instruction count and repeats to ~1% under any host load)")
		cpu     = flag.String("cpu", defaultCPU, "QEMU CPU model of the lab machine; e.g. neoverse-n1 for a host without FEAT_S2FWB (KVM then unmaps the whole guest on every KVM_ARM_VCPU_INIT of a vCPU that has run)")
		qemu    = flag.String("qemu", "qemu-system-aarch64", "QEMU binary")
		keep    = flag.String("initrd-out", "", "also write the lab initramfs here")
		out     = flag.String("out", "", "bring the files the script writes to $LAB_OUT ("+guestOut+") back into this host directory")
		files   addList
		cpios   addList
	)
	flag.Var(&files, "add", "HOST=GUEST: put a host file into the lab's filesystem (repeatable)")
	flag.Var(&cpios, "cpio", "FILE: also unpack this uncompressed newc cpio archive into the lab's root, e.g. .cache/lab/qemu.cpio from lab/fetch-qemu.sh (repeatable)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: lab [flags] -run 'commands'\n\n%s\n\nflags:\n", strings.Split(usageText, "\n\n")[0])
		flag.PrintDefaults()
	}
	flag.Parse()
	if *run == "" {
		fmt.Fprintln(os.Stderr, "lab: nothing to run: pass -run 'commands'")
		os.Exit(2)
	}
	accel, ok := labClocks[*clock]
	if !ok {
		fmt.Fprintf(os.Stderr, "lab: -time %q: want wall or insn\n", *clock)
		os.Exit(2)
	}
	code, err := lab(*kernel, *busybox, *run, files, cpios, *timeout, *cpus, *mem, *cpu, *qemu, *keep, *out, *clock, accel)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lab:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

const usageText = `Runs commands on real arm64 KVM inside an emulated arm64 machine (QEMU with EL2).`

// initScript is the lab machine's /init: mount what mvm and its tests need,
// run the script, print its status for the host and power off.
const initScript = `#!/bin/busybox sh
/bin/busybox mkdir -p /bin /sbin /usr/bin /usr/sbin /proc /sys /dev /tmp
/bin/busybox --install -s
# The initramfs (rootfs) cannot be left by pivot_root(2), which
# virtiofsd's namespace sandbox uses, and a process chrooted below it may
# not make a user namespace, which an unprivileged virtiofsd does. So the
# lab runs on a bind of it moved over /, as switch_root would: the same
# files, on a root mount that has a parent, like a real host's.
if [ -z "$LAB_ROOT_MOVED" ]; then
	mkdir -p /newroot && mount --rbind / /newroot && cd /newroot && mount --move . / && \
		exec chroot . env LAB_ROOT_MOVED=1 /init
	echo "lab: could not move the root; going on in the initramfs"
fi
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
mkdir -p /dev/pts /tmp /sys/kernel/tracing
mount -t tmpfs tmp /tmp
mount -t devpts devpts /dev/pts
mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up
# tun (for the virtio-net tests' tap) is a module of the lab kernel.
[ -f /lab/modules/tun.ko ] && insmod /lab/modules/tun.ko
export PATH=/lab:/bin:/sbin:/usr/bin:/usr/sbin HOME=/tmp TMPDIR=/tmp LAB_OUT=` + guestOut + `
export MVM_LAB_TIME=$(cat /lab/clock)
mkdir -p $LAB_OUT
cd /lab
echo "lab: $(uname -r), $(nproc) CPUs, kvm: $(ls /dev/kvm 2>&1), clock: $MVM_LAB_TIME"
sh /lab/script
rc=$?
if [ -e /lab/want-out ]; then
	for f in $LAB_OUT/*; do
		[ -f "$f" ] || continue
		echo "` + fileBegin + `${f##*/}"
		gzip -c "$f" | base64
		echo "` + fileEnd + `"
	done
fi
echo "` + statusPrefix + `$rc"
sync
poweroff -f
`

// labClocks maps -time to the QEMU options that give the lab that clock.
//
// insn: single-threaded TCG with instruction counting (QEMU's -icount,
// docs/system/qemu-manpage "icount"): the virtual clock advances 2^shift ns
// per executed guest instruction, align=off never slows the guest to the
// host's clock, sleep=off skips idle time instead of sleeping through it.
// The generic timer, CNTVCT_EL0, Go's monotonic clock and /proc/uptime in
// the lab then all count instructions. icount rules out multi-threaded TCG,
// so every lab CPU runs round-robin on one host thread and shares the one
// counter: parallel work on two lab CPUs is measured serialized
// (DESIGN.md section 8).
var labClocks = map[string][]string{
	"wall": {"-accel", "tcg,thread=multi"},
	"insn": {"-accel", "tcg,thread=single", "-icount", "shift=0,align=off,sleep=off"},
}

func lab(kernel, busybox, script string, files, cpios []string, timeout time.Duration, cpus int, mem, cpu, qemu, keep, out, clock string, accel []string) (int, error) {
	for _, f := range []string{kernel, busybox} {
		if _, err := os.Stat(f); err != nil {
			return 1, fmt.Errorf("%v (run 'make lab-fetch' to download the lab kernel and busybox)", err)
		}
	}
	qpath, err := exec.LookPath(qemu)
	if err != nil {
		return 1, fmt.Errorf("%s not found: install Debian's qemu-system-arm package (make lab-deps does)", qemu)
	}

	ird := guest.NewInitramfs()
	if err := ird.AddHostFile("bin/busybox", busybox); err != nil {
		return 1, err
	}
	ird.AddFile("init", []byte(initScript), 0o755)
	// The lab's clock, for the benchmarks to say which one they measured
	// with (MVM_LAB_TIME in the script's environment).
	ird.AddFile("lab/clock", []byte(clock+"\n"), 0o644)
	ird.AddFile("lab/script", []byte(script+"\n"), 0o755)
	if out != "" {
		if err := os.MkdirAll(out, 0o755); err != nil {
			return 1, fmt.Errorf("-out: %w", err)
		}
		ird.AddFile("lab/want-out", nil, 0o644)
	}
	for _, f := range files {
		host, dst, ok := strings.Cut(f, "=")
		if !ok {
			return 1, fmt.Errorf("-add %q: want HOST=GUEST", f)
		}
		if err := ird.AddHostFile(dst, host); err != nil {
			return 1, err
		}
	}
	blob, err := ird.Gzip()
	if err != nil {
		return 1, fmt.Errorf("build lab initramfs: %w", err)
	}
	if blob, err = prependArchives(cpios, blob); err != nil {
		return 1, err
	}
	dir, err := os.MkdirTemp("", "mvm-lab-")
	if err != nil {
		return 1, err
	}
	defer os.RemoveAll(dir)
	initrd := filepath.Join(dir, "initrd.gz")
	if err := os.WriteFile(initrd, blob, 0o644); err != nil {
		return 1, err
	}
	if keep != "" {
		if err := os.WriteFile(keep, blob, 0o644); err != nil {
			return 1, err
		}
	}

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, timeout)
	defer cancelT()
	for attempt := 1; ; attempt++ {
		code, err := boot(ctx, qpath, kernel, initrd, cpus, mem, cpu, accel, timeout, out)
		if !errors.Is(err, errLockup) || attempt > retries {
			return code, err
		}
		fmt.Fprintf(os.Stderr, "lab: %v; starting the lab again (attempt %d of %d)\n", err, attempt+1, retries+1)
	}
}

// prependArchives puts prebuilt uncompressed cpio archives in front of the
// lab's gzipped one: Linux unpacks concatenated archives in order
// (Documentation/driver-api/early-userspace/buffer-format.rst), and an
// uncompressed archive must start 4-byte aligned, which the front always is
// and newc archives keep (their trailer pads to 512 bytes). Unpacking an
// uncompressed archive costs the emulated lab machine only a copy, where
// gzip would cost it seconds of emulated inflate.
func prependArchives(cpios []string, blob []byte) ([]byte, error) {
	if len(cpios) == 0 {
		return blob, nil
	}
	var out []byte
	for _, c := range cpios {
		b, err := os.ReadFile(c)
		if err != nil {
			return nil, fmt.Errorf("-cpio: %w (lab/fetch-qemu.sh builds .cache/lab/qemu.cpio)", err)
		}
		if !bytes.HasPrefix(b, []byte("070701")) || len(b)%4 != 0 {
			return nil, fmt.Errorf("-cpio %s: not an uncompressed newc cpio archive padded to 4 bytes", c)
		}
		out = append(out, b...)
	}
	return append(out, blob...), nil
}

// errLockup marks a lab kernel that stopped working under the tests: it
// reported a hard lockup (an emulation fault of QEMU's TCG with nested KVM,
// seen a few times in a hundred boots) or oopsed. The oops seen is a NULL
// dereference in perf_ctx_sched_task_cb while an mvm vCPU thread with
// per-thread tracepoint events sleeps in futex_wait: a bug of the lab's
// 6.12 kernel (no userspace program may crash a kernel), a few times in a
// hundred profiled runs. Either way the lab machine never recovers and no
// test result is left to read.
var errLockup = errors.New("the lab kernel locked up or oopsed (a fault of the emulated lab machine's kernel, not a test result)")

// labKernelFailed says whether a console line means the lab kernel is
// gone: Linux's hard-lockup detector or arm64's die() ("Internal error:
// Oops"), printed by the lab kernel itself, whose printk lines start with
// their "[  seconds]" stamp at the start of the line. A test's log that
// quotes a nested guest's console (go test indents it) is not the lab
// kernel's: a nested guest's lockup report there once restarted a whole
// lab-test run.
func labKernelFailed(line string) bool {
	if !strings.HasPrefix(line, "[") {
		return false
	}
	return strings.Contains(line, "Watchdog detected hard LOCKUP") || strings.Contains(line, "Internal error: Oops")
}

// defaultCPU is the lab machine's CPU model: max has EL2 and the newest
// features, and pauth-impdef=on makes it ~3.5x faster than plain max
// (QARMA pointer-auth emulation is slow).
const defaultCPU = "max,pauth-impdef=on"

// retries is how often a lab whose kernel failed is started again.
const retries = 1

// boot runs the lab machine once and returns the script's status.
func boot(ctx context.Context, qpath, kernel, initrd string, cpus int, mem, cpu string, accel []string, timeout time.Duration, out string) (int, error) {
	qemu := filepath.Base(qpath)
	// -nic none avoids QEMU's need for an EFI ROM we do not install.
	// cryptomgr.notests skips the lab kernel's self-tests of the crypto
	// algorithms it registers (Documentation/admin-guide/
	// kernel-parameters.txt): they test the emulated machine's kernel, not
	// mvm, and were a third of the Debian kernel's boot in the lab
	// (cmd/mvm/command.go's commandCmdline has it for the same reason).
	args := []string{
		"-machine", "virt,virtualization=on,gic-version=3",
		"-cpu", cpu,
		"-smp", fmt.Sprint(cpus), "-m", mem,
	}
	args = append(args, accel...)
	args = append(args,
		"-nic", "none", "-nographic", "-no-reboot",
		"-kernel", kernel, "-initrd", initrd,
		"-append", "console=ttyAMA0 panic=-1 quiet loglevel=4 cryptomgr.notests")
	cmd := exec.CommandContext(ctx, qpath, args...)
	cmd.Cancel = func() error { return cmd.Process.Kill() }
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 1, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 1, fmt.Errorf("start %s: %w", qemu, err)
	}

	status := -1
	lockedUp := false
	var tail []string
	files := &outFiles{dir: out}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if files.line(line) {
			continue
		}
		fmt.Println(line)
		if len(tail) == 40 {
			tail = tail[1:]
		}
		tail = append(tail, line)
		if i := strings.Index(line, statusPrefix); i >= 0 {
			fmt.Sscanf(line[i+len(statusPrefix):], "%d", &status)
		}
		if labKernelFailed(line) && status < 0 && !lockedUp {
			// Let the oops's own lines reach the console first.
			time.AfterFunc(2*time.Second, func() { cmd.Process.Kill() })
			lockedUp = true
		}
	}
	werr := cmd.Wait()
	elapsed := time.Since(start).Round(time.Second)
	switch {
	case lockedUp:
		return 1, errLockup
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return 1, fmt.Errorf("timed out after %v; the last console lines were:\n  %s", timeout, strings.Join(tail, "\n  "))
	case ctx.Err() != nil:
		return 130, errors.New("interrupted")
	case status < 0:
		msg := strings.TrimSpace(stderr.String())
		if msg == "" && werr != nil {
			msg = werr.Error()
		}
		if msg == "" {
			msg = "the lab machine stopped without reporting a status"
		}
		return 1, fmt.Errorf("%s failed after %v: %s; the last console lines were:\n  %s", qemu, elapsed, msg, strings.Join(tail, "\n  "))
	}
	if err := files.err(); err != nil {
		return 1, err
	}
	if len(files.got) > 0 {
		fmt.Fprintf(os.Stderr, "lab: brought back %s into %s\n", strings.Join(files.got, ", "), out)
	}
	fmt.Fprintf(os.Stderr, "lab: finished in %v with status %d\n", elapsed, status)
	return status, nil
}
