package vmm

import (
	"fmt"

	"github.com/mvm-dev/mvm/internal/fdt"
)

// UARTNode is an ns16550a-compatible UART with byte-wide registers at
// consecutive addresses (reg-shift 0, reg-io-width 1).
type UARTNode struct {
	Base, Size uint64
	// SPI is the shared peripheral interrupt number, INTID - 32, as the
	// GIC binding's second interrupt cell wants it. The line is level
	// triggered.
	SPI uint32
	// ClockHz is the input clock that the driver divides down for the baud
	// rate; 0 means UARTClockHz.
	ClockHz uint32
}

// Node is the UART's device-tree node (Devicetree spec v0.4 4.2.2, Linux
// bindings/serial/8250.yaml), the console. ns16550a needs no clocks node:
// clock-frequency is enough for Linux's of_serial driver.
func (u UARTNode) Node() DeviceNode {
	clock := u.ClockHz
	if clock == 0 {
		clock = UARTClockHz
	}
	return DeviceNode{
		What:    "UART",
		Name:    fmt.Sprintf("uart@%x", u.Base),
		MMIO:    Region{u.Base, u.Size},
		SPIs:    []uint32{u.SPI},
		Console: true,
		Props: func(b *fdt.Builder, _ uint32) {
			b.PropString("compatible", "ns16550a")
			b.PropU64s("reg", u.Base, u.Size)
			b.PropCells("interrupts", dtIRQTypeSPI, u.SPI, dtIRQLevelHigh)
			b.PropU32("clock-frequency", clock)
			b.PropU32("reg-shift", 0)
			b.PropU32("reg-io-width", 1)
		},
	}
}
