// Package bpfagg aggregates the kvm tracepoints in the kernel: BPF
// programs (github.com/cilium/ebpf, built at run time with its asm
// package, so neither cgo nor clang is needed) on kvm_exit, kvm_entry and
// the arm64 detail events keep, for the threads of one process, per
// (thread, boot phase, reason, breakdown key) the count and the guest time
// (the thread's kvm_entry -> this kvm_exit) and handle time (this kvm_exit
// -> its next kvm_entry) as sum, count, min and max, and VM-wide per
// (reason, key) log-linear histograms of both in exits/hist's bucket
// layout, in BPF maps. Nothing is copied out per event; the maps are read
// when a report or a metrics scrape wants them, into the exit model of
// package exits, as the perf path's aggregate (exits/tracepoint) is; the
// programs take the broken-down exception classes and the boot phase
// order from that package too (Arm64BreakdownClasses, PhaseStarts). Raw
// tracepoint programs read the tracepoints' arguments; where those are
// refused, perf tracepoint programs read the same fields at their tracefs
// offsets. The counts and
// breakdown keys are the perf path's; the times come from
// bpf_ktime_get_ns when a program runs, not from perf samples'
// timestamps, so they are close to the perf path's, not equal.
package bpfagg
