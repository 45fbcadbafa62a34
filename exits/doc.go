// Package exits is the roof of mvm's exit profile and its model. It holds
// what every part of the profile shares: the names of KVM's kvm_exit
// reasons per architecture (Namer: arm64 exception types and ESR_ELx
// exception classes; x86 VMX and SVM exit codes), the report (Report,
// Row, StatRow, SourceStatus) with its JSON form, which mvm run
// --result-json embeds and mvm bench decodes, and the exit model the
// kvm_exit readers fill: per-vCPU numbers (ReasonStats, RowStats,
// VCPUStats) and how they merge (GroupByVCPU, Total), order and become
// report rows with percentiles (TraceRows, Report.AddTrace); which
// exception classes are broken down and how a breakdown key is named
// (Arm64BreakdownClasses, Layout.KeyName); and the boot phases an exit
// falls in (PhaseBounds, PhaseStarts, PhaseReport). The BPF programs of
// exits/bpfagg compile their exception classes and phase order from here.
//
// The readers live below it, each turning what it reads into the model:
//
//   - exits/userspace: the exits that reach the VMM (KVM_RUN returns),
//     counted per vCPU on the hot path, allocation and lock free.
//   - exits/kvmstat: KVM's binary statistics (KVM_GET_STATS_FD).
//   - exits/tracepoint: the kvm tracepoints through perf_event_open,
//     paired per thread as perf kvm stat does.
//   - exits/bpfagg: the same tracepoints counted in the kernel by BPF
//     programs.
//
// exits/source decides which readers a profile uses; exits/profile runs
// them for one of mvm's VMs and exits/attach for another VMM's;
// exits/sampling estimates the per-reason table of mvm run
// --profile=light from windows of the BPF counters scaled by the stats
// fd's exact exits;
// exits/render draws the report as tables; exits/metrics exports the live
// numbers to Prometheus. This package and the pure parts of the others
// (parsers, aggregation, rows) make no system calls, so they test
// anywhere; the file descriptor work sits in *_linux.go files of the
// reader packages. docs/profile.md describes the layout and every field.
package exits
