// Package vmm builds and runs one virtual machine: the guest memory map,
// guest RAM, the in-kernel vGICv3, the MMIO device bus, the device tree,
// kernel/initrd loading, the vCPUs, PSCI service and the VM's lifecycle
// (power-off, reset, reboot, stop on a signal). The memory map is described
// in docs/memory-map.md.
//
// What each vCPU exit means (device MMIO, PSCI calls, system events, and
// the counters of a misbehaving guest) is decided by the VM's exitCore
// (exitcore.go), which is fed an exit record and answers with an action;
// it needs no KVM, so it is tested with synthetic exits on any Linux host.
package vmm
