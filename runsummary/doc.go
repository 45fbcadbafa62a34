// Package runsummary is the record of one mvm run as it leaves the VMM:
// the JSON that mvm run --result-json writes and mvm bench and mvm report
// read (Summary), the names in it (exit kinds, PSCI modes, boot phases and
// the moments they run between) and the configuration values those
// commands check alike before a VM exists (vCPU count, memory size, PSCI
// mode).
//
// It is the one thing vmm, bench, report and cmd/mvm share about a run, so
// it imports nothing of the VM runtime (vmm, vcpu, devices, internal/kvm)
// and makes no system call beyond describing the host: reading a result
// file does not pull in KVM. docs/boot-phases.md describes the fields.
package runsummary
