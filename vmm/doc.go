// Package vmm builds and runs one virtual machine: the guest memory map,
// guest RAM, the in-kernel vGICv3, the MMIO device bus, the device tree,
// kernel/initrd loading, the vCPUs, PSCI service and the VM's lifecycle
// (power-off, reset, reboot, stop on a signal). The memory map is described
// in docs/memory-map.md.
package vmm
