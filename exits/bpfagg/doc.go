// Package bpfagg counts kvm_exit and kvm_entry in the kernel: BPF programs
// attached to the two tracepoints (github.com/cilium/ebpf, built at run
// time with its asm package, so neither cgo nor clang is needed) keep
// one counter per (thread, exit code, sub-code) and one entry counter per
// thread in BPF hash maps, for the threads of one process. Nothing is
// copied out per event; the maps are read when a report or a metrics
// scrape wants them. The counts are those of the perf_event path
// (exits/tracepoint): the same tracepoints and fields, read at the same
// offsets from tracefs. Times (guest, handle) and histograms are not
// aggregated here yet: the perf_event path has them.
package bpfagg
