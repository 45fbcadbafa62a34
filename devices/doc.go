// Package devices holds the MMIO devices mvm emulates in userspace (the
// 8250/16550 UART, the PL011 UART, the PL031 real-time clock and the
// boot-marker device) and the bus that routes a vCPU's MMIO exit to one of
// them. Devices know nothing of KVM: they raise interrupts through a
// callback the VMM gives them.
package devices
