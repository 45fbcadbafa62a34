// Package attach profiles a VM that another process runs — QEMU,
// Firecracker, Cloud Hypervisor, crosvm, kvmtool or another mvm — as
// mvm run --profile profiles its own: it finds the process's KVM objects
// (internal/kvmproc), reads the VMM's KVM stats files through copies of its
// descriptors, counts kvm_entry/kvm_exit of its vCPU threads (BPF counters
// or perf rings, as exits/source decides for mvm run --profile too), and
// builds the same exits.Report, live at every interval and at the end.
//
// Two ways in: Run with Config.PID attaches to a running process and
// detaches when done, leaving it running; with Config.Command it starts a
// command stopped at exec, opens inherited per-CPU tracepoint events that
// follow every thread it will create, lets it run and profiles it to its
// end, as perf kvm stat record does.
package attach
