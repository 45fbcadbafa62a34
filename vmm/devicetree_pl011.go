package vmm

import (
	"fmt"

	"github.com/mvm-dev/mvm/internal/fdt"
)

// PL011Node is an Arm PL011 UART, an AMBA PrimeCell, as the console
// (--serial pl011). Linux names it ttyAMA0.
type PL011Node struct {
	Base, Size uint64
	SPI        uint32 // INTID - 32; level triggered
}

// Node is the PL011's device-tree node (Linux bindings/serial/
// pl011.yaml, an arm,primecell device). Both of its clocks are the APB
// clock, as on QEMU's virt machine: uartclk is what the driver divides
// for the baud rate, apb_pclk what the AMBA bus needs before it reads
// the ids (without it the UART never probes).
func (p PL011Node) Node() DeviceNode {
	return DeviceNode{
		What:    "UART",
		Name:    fmt.Sprintf("serial@%x", p.Base),
		MMIO:    Region{p.Base, p.Size},
		SPIs:    []uint32{p.SPI},
		Console: true,
		Clock:   apbClock(),
		Check:   func() error { return checkPrimeCell("PL011", p.Size) },
		Props: func(b *fdt.Builder, clock uint32) {
			b.PropStrings("compatible", "arm,pl011", "arm,primecell")
			b.PropU64s("reg", p.Base, p.Size)
			b.PropCells("interrupts", dtIRQTypeSPI, p.SPI, dtIRQLevelHigh)
			b.PropCells("clocks", clock, clock)
			b.PropStrings("clock-names", "uartclk", "apb_pclk")
		},
	}
}
