// Package exits is mvm's exit accounting. It knows nothing about file
// descriptors or system calls, so everything in it tests on any machine:
//
//   - Namer: the names of KVM's kvm:kvm_exit tracepoint reasons, per
//     architecture (arm64 exception types and ESR_ELx exception classes; x86
//     VMX basic exit reasons and SVM exit codes).
//   - Schema and Recorder: counting and timing the exits that reach
//     userspace (KVM_RUN returns) on each vCPU's hot path, allocation free
//     and lock free.
//   - StatsLayout and StatsSnapshot: a generic parser of the KVM binary
//     statistics file (KVM_GET_STATS_FD) read through an io.ReaderAt.
//   - TraceAggregator: pairing kvm_entry/kvm_exit tracepoint samples per
//     thread the way `perf kvm stat` does and aggregating them per vCPU and
//     reason.
//   - Report: the end-of-run profile as a perf-kvm-stat-like table or JSON.
//   - Collector: a Prometheus collector reading all of the above at scrape
//     time.
//
// The system-call halves live in internal/kvmstat (the stats fd) and
// internal/tracepoint (perf_event_open on the tracepoints).
package exits
