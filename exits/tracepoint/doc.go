// Package tracepoint is the tracepoint source of mvm's exit profile: it reads
// kernel tracepoints (kvm:kvm_entry, kvm:kvm_exit) of chosen threads through
// perf_event_open, the way `perf kvm stat record` does, pairs entries and
// exits per thread (Aggregator, pure Go, testable anywhere) into the exit
// model of package exits, which merges, orders and names what it finds.
//
// Event ids and field offsets come from tracefs
// (<tracefs>/events/<system>/<event>/format), never from compiled-in
// structure layouts, because they differ between architectures and kernel
// versions (arm64's kvm_exit has ret/esr_ec/vcpu_pc, x86's
// exit_reason/guest_rip/isa/...).
//
// Files: format.go (tracefs format files), probe.go (can tracepoints be
// used here, and why not), ring.go (perf ring buffer records), session.go
// (perf_event_open per thread), profiler.go (the kvm_entry/kvm_exit
// profiler), aggregate.go (pairing and per-reason numbers), breakdown.go
// (detail events to breakdown keys, histograms, phase bounds).
package tracepoint
