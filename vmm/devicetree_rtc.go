package vmm

import (
	"fmt"

	"github.com/mvm-dev/mvm/internal/fdt"
)

// RTCNode is an Arm PL031 real-time clock, an AMBA PrimeCell: Linux's AMBA
// bus reads its id registers only once it can enable the clock named
// apb_pclk, so the tree also holds a fixed-clock node for it.
type RTCNode struct {
	Base, Size uint64
	SPI        uint32 // INTID - 32; level triggered
}

// apbClock is the fixed clock the PrimeCells name apb_pclk (bindings/
// arm/primecell.yaml). Without it Linux never reads a PrimeCell's ids
// and the device never probes, silently.
func apbClock() *FixedClock {
	return &FixedClock{Node: "apb-pclk", Hz: dtAPBClockHz, OutputName: "clk24mhz"}
}

// checkPrimeCell rejects a region that does not reach the PrimeCell id
// registers in the last 32 bytes of 4 KiB.
func checkPrimeCell(what string, size uint64) error {
	if size < dtPrimeCellSize {
		return fmt.Errorf("%s region is %#x bytes; a PrimeCell's id registers end at offset 0xfff, so it needs %#x", what, size, dtPrimeCellSize)
	}
	return nil
}

// Node is the PL031's device-tree node (bindings/rtc/arm,pl031.yaml, an
// arm,primecell device) with its APB clock.
func (r RTCNode) Node() DeviceNode {
	return DeviceNode{
		What:  "RTC",
		Name:  fmt.Sprintf("rtc@%x", r.Base),
		MMIO:  Region{r.Base, r.Size},
		SPIs:  []uint32{r.SPI},
		Clock: apbClock(),
		Check: func() error { return checkPrimeCell("RTC", r.Size) },
		Props: func(b *fdt.Builder, clock uint32) {
			b.PropStrings("compatible", "arm,pl031", "arm,primecell")
			b.PropU64s("reg", r.Base, r.Size)
			b.PropCells("interrupts", dtIRQTypeSPI, r.SPI, dtIRQLevelHigh)
			b.PropU32("clocks", clock)
			b.PropString("clock-names", "apb_pclk")
		},
	}
}
