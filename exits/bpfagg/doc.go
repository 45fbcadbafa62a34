// Package bpfagg counts kvm_exit and kvm_entry in the kernel: BPF programs
// attached to the two tracepoints (github.com/cilium/ebpf, built at run
// time with its asm package, so neither cgo nor clang is needed) keep,
// for the threads of one process, per (thread, exit code, sub-code) the
// count and the guest time (the thread's kvm_entry -> this kvm_exit) and
// handle time (this kvm_exit -> its next kvm_entry) as sum, count, min and
// max, plus an entry count per thread, in BPF hash maps. Nothing is copied
// out per event; the maps are read when a report wants them. The counts
// are those of the perf_event path (exits/tracepoint): the same
// tracepoints and fields, read at the same offsets from tracefs; the times
// come from bpf_ktime_get_ns when the program runs, not from the perf
// sample's timestamp, so they are close to the perf path's, not equal.
// Histograms are not kept.
package bpfagg
