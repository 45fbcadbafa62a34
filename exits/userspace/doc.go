// Package userspace is the userspace source of mvm's exit profile: it
// counts and times, per vCPU, the exits that reach the VMM (each KVM_RUN
// return), classified by kind (KVM_EXIT_* reason: MMIO, HYPERCALL,
// SYSTEM_EVENT, INTR, ...) and by a sub-key the VMM registers up front
// (the device, the PSCI function, the system event type). A Schema fixes
// the keys; each vCPU's Recorder is then a flat array of atomic counters
// and log2 latency histograms that its own thread writes without locks and
// without allocating, while a metrics scrape or the final report reads it
// (Snapshot). Rows turns snapshots into rows of the report model in
// package exits. It issues no ioctls.
package userspace
