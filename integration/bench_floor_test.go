//go:build linux && arm64

package integration

import (
	"os"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/mvm-dev/mvm/exits/tracepoint"
	"golang.org/x/sys/unix"
)

// BenchmarkProfileFloor measures what the BPF path cannot go below: empty
// raw tracepoint programs (return 0) on the events mvm's BPF counters
// attach to, on an unprofiled boot, against plain boots of the same run
// (interleaved, as BenchmarkProfileOverhead; docs/profile.md, "The
// floor"). Variants: empty programs on all six events (kvm_exit,
// kvm_entry and the four arm64 detail events), on kvm_exit and kvm_entry
// only, the full BPF profile (--profile --profile-via bpf, every source)
// and the profile without tracepoints (and with MVM_BIN_BASE, bpf-base:
// the bpf variant run by that binary).
func BenchmarkProfileFloor(b *testing.B) {
	out := filepath.Join(b.TempDir(), "profile.json")
	prof := []string{"--profile", "--profile-format", "json", "--profile-out", out}
	all := bpfEvents
	vs := []benchVariant{
		{name: "empty6", around: func() func() { return attachEmpty(b, all...) }},
		{name: "empty2", around: func() func() { return attachEmpty(b, all[:2]...) }},
	}
	vs = append(vs, baseVariant(b, "bpf-base", append([]string{"--profile-via", "bpf"}, prof...))...)
	vs = append(vs,
		benchVariant{name: "bpf", args: append([]string{"--profile-via", "bpf"}, prof...)},
		benchVariant{name: "profile-no-trace", args: append([]string{"--profile-sources", "userspace,kvm_stats"}, prof...)},
	)
	interleaved(b, func(args ...string) float64 { return float64(bootLinux(b, 8, "512M", args...).PhasesNS["total"]) }, vs...)
}

// bpfEvents are the events exits/bpfagg attaches to on arm64: kvm_exit,
// kvm_entry, then the detail events.
var bpfEvents = []string{"kvm_exit", "kvm_entry", "kvm_wfx_arm64", "kvm_hvc_arm64", "kvm_handle_sys_reg", "kvm_guest_fault"}

// sysregExits is SYSREG_COUNT in guest/payloads/sysregs.s.
const sysregExits = 50000

// BenchmarkExitFloor is BenchmarkProfileFloor's per-exit view: the
// sysregs payload's trapped register reads (kvm_exit, kvm_handle_sys_reg,
// kvm_entry each, as the boot's commonest exit) timed from the first
// KVM_RUN to the VM's exit (the BPF programs' loading is before it), plain
// and under each variant, interleaved. Reported per variant: the ratio
// against plain (ratio of medians, the median and min..max of the rounds'
// ratios); one exit takes plain-ms / 50,000 (about 20 µs in the lab), so a
// ratio r adds (r - 1) times that per exit. With MVM_BIN_BASE, bpf-base
// is the bpf variant run by that binary.
func BenchmarkExitFloor(b *testing.B) {
	prof := []string{"--profile", "--profile-format", "json", "--profile-out", filepath.Join(b.TempDir(), "profile.json")}
	vs := []benchVariant{
		{name: "empty2", around: func() func() { return attachEmpty(b, bpfEvents[:2]...) }},
		{name: "empty3", around: func() func() { return attachEmpty(b, "kvm_exit", "kvm_entry", "kvm_handle_sys_reg") }},
		{name: "empty6", around: func() func() { return attachEmpty(b, bpfEvents...) }},
		{name: "clock2", around: func() func() { return attachProg(b, clockProg, bpfEvents[:2]...) }},
	}
	vs = append(vs, baseVariant(b, "bpf-base", append([]string{"--profile-via", "bpf"}, prof...))...)
	vs = append(vs,
		benchVariant{name: "bpf", args: append([]string{"--profile-via", "bpf"}, prof...)},
		benchVariant{name: "bpf-plain", args: append([]string{"--profile-via", "bpf", "--profile-plain"}, prof...)},
		benchVariant{name: "no-trace", args: append([]string{"--profile-sources", "userspace,kvm_stats"}, prof...)},
	)
	interleaved(b, func(args ...string) float64 { return sysregsRun(b, args...) }, vs...)
}

// sysregsRun runs the sysregs payload (50,000 trapped register reads)
// under mvm run with args and returns the time from its first KVM_RUN to
// the VM's exit (total less vmm_setup), in ns.
func sysregsRun(b *testing.B, args ...string) float64 {
	out := filepath.Join(b.TempDir(), "result.json")
	r := mvm(b, 2*time.Minute, append([]string{"run", "--kernel", payload(b, "sysregs.bin"), "--result-json", out}, args...)...)
	if r.code != 0 {
		b.Fatalf("exit status %d\n%s", r.code, r.stderr)
	}
	s := readJSON[runSummary](b, out)
	return float64(s.PhasesNS["total"] - s.PhasesNS["vmm_setup"])
}

// baseVariant is the variant args run by the mvm binary named by
// MVM_BIN_BASE (another build, e.g. main's, for an A/B comparison of a
// change in one run), if that is set.
func baseVariant(b *testing.B, name string, args []string) []benchVariant {
	base := os.Getenv("MVM_BIN_BASE")
	if base == "" {
		return nil
	}
	return []benchVariant{{name: name, args: args, around: func() func() {
		bin := os.Getenv("MVM_BIN")
		os.Setenv("MVM_BIN", base)
		return func() { os.Setenv("MVM_BIN", bin) }
	}}}
}

// emptyProg only returns. clockProg reads what any program timing a
// thread's exits needs, the thread id and the clock, and returns.
var (
	emptyProg = asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}
	clockProg = asm.Instructions{asm.FnGetCurrentPidTgid.Call(), asm.FnKtimeGetNs.Call(), asm.Mov.Imm(asm.R0, 0), asm.Return()}
)

// attachEmpty attaches emptyProg to each event.
func attachEmpty(b *testing.B, events ...string) func() {
	b.Helper()
	return attachProg(b, emptyProg, events...)
}

// attachProg attaches a raw tracepoint program of insns to each event, for
// every thread of the host, and returns what detaches them.
func attachProg(b *testing.B, insns asm.Instructions, events ...string) func() {
	b.Helper()
	var closers []func() error
	undo := func() {
		for _, c := range closers {
			c()
		}
	}
	for _, ev := range events {
		p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "mvm_empty", Type: ebpf.RawTracepoint, License: "GPL",
			Instructions: insns})
		if err != nil {
			undo()
			b.Fatalf("load an empty program for %s: %v", ev, err)
		}
		closers = append(closers, p.Close)
		l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: ev, Program: p})
		if err != nil {
			undo()
			b.Fatalf("attach an empty program to %s: %v", ev, err)
		}
		closers = append([]func() error{l.Close}, closers...)
	}
	return undo
}

// holdEvents opens a disabled perf tracepoint event on each kvm event (the
// cheaper attach docs/profile.md measured for --profile=light and did not
// keep): the tracepoint keeps perf's probe registered, which returns at
// once, on every exit. It returns what closes them.
func holdEvents(b *testing.B, events ...string) func() {
	b.Helper()
	var fds []int
	undo := func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
	tracefs, err := tracepoint.ProbeEnv(tracepoint.SystemEnv(false))
	if err != nil {
		b.Fatalf("tracefs: %v", err)
	}
	for _, ev := range events {
		f, err := tracepoint.ReadFormat(tracefs, "kvm", ev)
		if err != nil {
			undo()
			b.Fatalf("tracepoint kvm:%s: %v", ev, err)
		}
		attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_TRACEPOINT, Config: f.ID, Bits: unix.PerfBitDisabled}
		attr.Size = uint32(unsafe.Sizeof(attr))
		fd, err := unix.PerfEventOpen(&attr, 0, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
		if err != nil {
			undo()
			b.Fatalf("perf_event_open kvm:%s: %v", ev, err)
		}
		fds = append(fds, fd)
	}
	return undo
}
