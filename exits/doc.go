// Package exits is the roof of mvm's exit profile and holds what every part
// of it shares: the names of KVM's kvm_exit reasons per architecture (Namer:
// arm64 exception types and ESR_ELx exception classes; x86 VMX and SVM exit
// codes) and the report model (Report, Row, StatRow, SourceStatus) with its
// JSON form, which mvm run --result-json embeds and mvm bench decodes.
//
// One package per source lives below it, each turning its numbers into
// report rows:
//
//   - exits/userspace: the exits that reach the VMM (KVM_RUN returns),
//     counted per vCPU on the hot path, allocation and lock free.
//   - exits/kvmstat: KVM's binary statistics (KVM_GET_STATS_FD).
//   - exits/tracepoint: the kvm tracepoints through perf_event_open,
//     paired and aggregated per vCPU and reason as perf kvm stat does.
//
// exits/profile runs the optional sources for one VM and assembles the
// report; exits/render draws it as tables; exits/metrics exports the live
// numbers to Prometheus. This package and the pure parts of the others
// (parsers, aggregation, rows) make no system calls, so they test anywhere;
// the file descriptor work sits in *_linux.go files of the source packages.
// docs/profile.md describes the layout and every field.
package exits
