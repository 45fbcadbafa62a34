// Package source decides, for mvm run --profile (exits/profile) and mvm
// profile (exits/attach) alike, which readers fill an exit profile's
// model: whether the kvm_exit tracepoints are counted in the kernel by
// BPF programs (exits/bpfagg) or read from perf ring buffers
// (exits/tracepoint), or both, from the tracepoint path asked for (Via),
// whether guest code needs every exit's PC, and whether the kernel
// allowed BPF (Plan); it opens the BPF counters (OpenBPF) and turns KVM
// stats file snapshots into the report's stat rows (AddStats).
package source
