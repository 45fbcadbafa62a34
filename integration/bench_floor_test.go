//go:build linux && arm64

package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
)

// BenchmarkProfileFloor measures what the BPF path cannot go below: empty
// raw tracepoint programs (return 0) on the events mvm's BPF counters
// attach to, on an unprofiled boot, against plain boots of the same run
// (interleaved, as BenchmarkProfileOverhead; docs/profile.md, "The
// floor"). Variants: empty programs on all six events (kvm_exit,
// kvm_entry and the four arm64 detail events), on kvm_exit and kvm_entry
// only, the full BPF profile (--profile --profile-via bpf, every source)
// and the profile without tracepoints.
func BenchmarkProfileFloor(b *testing.B) {
	out := filepath.Join(b.TempDir(), "profile.json")
	prof := []string{"--profile", "--profile-format", "json", "--profile-out", out}
	all := bpfEvents
	interleaved(b, func(args ...string) float64 { return float64(bootLinux(b, 8, "512M", args...).PhasesNS["total"]) },
		benchVariant{name: "empty6", around: func() func() { return attachEmpty(b, all...) }},
		benchVariant{name: "empty2", around: func() func() { return attachEmpty(b, all[:2]...) }},
		benchVariant{name: "bpf", args: append([]string{"--profile-via", "bpf"}, prof...)},
		benchVariant{name: "profile-no-trace", args: append([]string{"--profile-sources", "userspace,kvm_stats"}, prof...)},
	)
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
// against plain (median, min..max of the rounds) and the nanoseconds it
// adds per exit (from the medians).
func BenchmarkExitFloor(b *testing.B) {
	prof := []string{"--profile", "--profile-format", "json", "--profile-out", filepath.Join(b.TempDir(), "profile.json")}
	interleaved(b, func(args ...string) float64 {
		out := filepath.Join(b.TempDir(), "result.json")
		r := mvm(b, 2*time.Minute, append([]string{"run", "--kernel", payload(b, "sysregs.bin"), "--result-json", out}, args...)...)
		if r.code != 0 {
			b.Fatalf("exit status %d\n%s", r.code, r.stderr)
		}
		var s runSummary
		data, err := os.ReadFile(out)
		if err == nil {
			err = json.Unmarshal(data, &s)
		}
		if err != nil {
			b.Fatal(err)
		}
		return float64(s.PhasesNS["total"] - s.PhasesNS["vmm_setup"])
	},
		benchVariant{name: "empty2", around: func() func() { return attachEmpty(b, bpfEvents[:2]...) }},
		benchVariant{name: "empty3", around: func() func() { return attachEmpty(b, "kvm_exit", "kvm_entry", "kvm_handle_sys_reg") }},
		benchVariant{name: "empty6", around: func() func() { return attachEmpty(b, bpfEvents...) }},
		benchVariant{name: "bpf", args: append([]string{"--profile-via", "bpf"}, prof...)},
		benchVariant{name: "bpf-plain", args: append([]string{"--profile-via", "bpf", "--profile-plain"}, prof...)},
		benchVariant{name: "no-trace", args: append([]string{"--profile-sources", "userspace,kvm_stats"}, prof...)},
	)
}

// attachEmpty attaches a raw tracepoint program that only returns 0 to
// each event, for every thread of the host, and returns what detaches
// them.
func attachEmpty(b *testing.B, events ...string) func() {
	b.Helper()
	var closers []func() error
	undo := func() {
		for _, c := range closers {
			c()
		}
	}
	for _, ev := range events {
		p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "mvm_empty", Type: ebpf.RawTracepoint, License: "GPL",
			Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}})
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
