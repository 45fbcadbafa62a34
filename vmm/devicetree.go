package vmm

import (
	"fmt"
	"sort"
	"strings"

	"github.com/mvm-dev/mvm/internal/fdt"
	"github.com/mvm-dev/mvm/psci"
)

// DeviceTree describes the guest platform that the flattened device tree
// tells the kernel about. It is plain data, filled from the memory map and
// the vCPUs' MPIDR_EL1 values, so that the tree can be built and checked
// without KVM.
type DeviceTree struct {
	// RAM is the guest memory, one or more non-overlapping regions, all
	// listed in the reg of one /memory node.
	RAM []Region
	// CPUs holds each vCPU's MPIDR_EL1 affinity (Aff3<<32 | Aff2<<16 |
	// Aff1<<8 | Aff0), indexed by vCPU id. It becomes the reg of the cpu
	// nodes, which Linux matches against MPIDR_EL1 to find its boot CPU and
	// passes to PSCI CPU_ON, so it must be read back from KVM, not guessed.
	CPUs []uint64
	// PSCIMethod is the conduit the guest uses for PSCI calls: "hvc" (what
	// a KVM guest at EL1 uses) or "smc". Empty means "hvc".
	PSCIMethod string
	// GICDist is the GICv3 distributor frame (64 KiB); GICRedist is the
	// redistributor region, 128 KiB (RD_base + SGI_base frames) per vCPU.
	GICDist, GICRedist Region
	// UART is the 16550-compatible console; a zero Size means none, and
	// then /chosen has no stdout-path.
	UART UARTNode
	// VirtioMMIO are virtio-mmio transports, in the order their nodes
	// appear in the tree.
	VirtioMMIO []VirtioNode
	// RTC is the PL031 real-time clock; a zero Size means none.
	RTC RTCNode
	// PMU adds the arm,armv8-pmuv3 node: every vCPU has KVM's PMUv3 with
	// its overflow interrupt on INTID 23 (PPI 7).
	PMU bool
	// BootArgs is the kernel command line (/chosen bootargs).
	BootArgs string
	// InitrdStart and InitrdEnd bound the initrd in guest-physical memory,
	// end exclusive as Linux reads linux,initrd-end. Both zero means no
	// initrd.
	InitrdStart, InitrdEnd uint64
}

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

// RTCNode is an Arm PL031 real-time clock, an AMBA PrimeCell: Linux's AMBA
// bus reads its id registers only once it can enable the clock named
// apb_pclk, so the tree also holds a fixed-clock node for it.
type RTCNode struct {
	Base, Size uint64
	SPI        uint32 // INTID - 32; level triggered
}

// VirtioNode is a virtio-mmio transport ("virtio,mmio" binding). Its
// interrupt is edge triggered: mvm signals it through an irqfd.
type VirtioNode struct {
	Base, Size uint64
	SPI        uint32 // INTID - 32
}

// Constants of the tree, from the bindings the nodes follow.
const (
	// dtGICPhandle is the phandle of the only interrupt controller, the
	// target of the root's interrupt-parent (Devicetree spec v0.4 2.3.3,
	// 2.4.1).
	dtGICPhandle = 1
	// dtAPBClockPhandle is the fixed clock the PL031 names as apb_pclk.
	dtAPBClockPhandle = 2
	// dtAPBClockHz is that clock's rate. The PL031 counts seconds from
	// its own 1 Hz input; Linux only needs the bus clock to exist.
	dtAPBClockHz = 24_000_000
	// dtPMUPPI is the PMU overflow interrupt as a PPI number (INTID - 16):
	// the INTID mvm gives KVM_ARM_VCPU_PMU_V3_IRQ.
	dtPMUPPI = PMUIntID - 16
	// Interrupt specifier cells of the arm,gic-v3 binding: type (0 SPI,
	// 1 PPI), number within the type, flags. Flags bits [3:0] are the
	// Linux IRQ_TYPE_* trigger; bits [15:8] are a CPU mask that only
	// GICv2 uses, so GICv3 PPIs carry the trigger alone.
	dtIRQTypeSPI    = 0
	dtIRQTypePPI    = 1
	dtIRQEdgeRising = 1
	dtIRQLevelHigh  = 4
	// dtMaxSPI is the largest SPI number: INTIDs 32..1019 are SPIs.
	dtMaxSPI = 1019 - 32
	// dtPrimeCellSize is the smallest PrimeCell region: Linux reads the
	// ids in its last 32 bytes (amba_read_periphid), at 0xFE0 for 4 KiB.
	dtPrimeCellSize = 0x1000
	// dtGICAlign: KVM wants both GIC bases 64 KiB aligned
	// (arm-vgic-v3.rst, KVM_VGIC_V3_ADDR_TYPE_DIST/REDIST).
	dtGICAlign = 0x1_0000
	// dtMaxCmdline is arm64's COMMAND_LINE_SIZE (2048) minus the NUL:
	// Linux silently truncates longer bootargs.
	dtMaxCmdline = 2047
)

// Build validates the description and returns the DTB. The tree has the
// nodes Linux's generic arm64 "virt" platform needs: the root
// (compatible "linux,dummy-virt", 2 address and 2 size cells, interrupt
// parent the GIC), /chosen, /memory, /cpus with one cpu node per vCPU
// (enable-method "psci"), /psci, the GICv3, the architected timer, the PMU
// (when asked), the UART, the PL031 RTC with its clock and the virtio-mmio
// transports.
func (d *DeviceTree) Build() ([]byte, error) {
	if d == nil {
		return nil, fmt.Errorf("device tree: no description (nil *DeviceTree)")
	}
	if err := d.validate(); err != nil {
		return nil, fmt.Errorf("device tree: %w", err)
	}
	method := d.PSCIMethod
	if method == "" {
		method = "hvc"
	}
	b := fdt.NewBuilder()
	if d.CPUs[0] <= 0xffff_ffff {
		b.SetBootCPU(uint32(d.CPUs[0]))
	}

	b.BeginNode("")
	b.PropString("compatible", "linux,dummy-virt")
	b.PropU32("#address-cells", 2)
	b.PropU32("#size-cells", 2)
	b.PropU32("interrupt-parent", dtGICPhandle)

	// /chosen (Devicetree spec v0.4 3.6). The initrd bounds are Linux's
	// linux,initrd-start/-end, written as 64-bit values.
	b.BeginNode("chosen")
	if d.BootArgs != "" {
		b.PropString("bootargs", d.BootArgs)
	}
	if d.UART.Size != 0 {
		b.PropString("stdout-path", dtUARTPath(d.UART))
	}
	if d.InitrdStart != 0 || d.InitrdEnd != 0 {
		b.PropU64("linux,initrd-start", d.InitrdStart)
		b.PropU64("linux,initrd-end", d.InitrdEnd)
	}
	b.EndNode()

	// /memory (3.4): one node whose reg lists every region.
	b.BeginNode(fmt.Sprintf("memory@%x", d.RAM[0].Base))
	b.PropString("device_type", "memory")
	reg := make([]uint64, 0, 2*len(d.RAM))
	for _, r := range d.RAM {
		reg = append(reg, r.Base, r.Size)
	}
	b.PropU64s("reg", reg...)
	b.EndNode()

	// /cpus (3.7, 3.8). Two address cells hold any MPIDR affinity,
	// including Aff3; no size cells. The unit address is the reg value,
	// as 2.2.1 requires, so vCPU 16 (Aff1 = 1) is cpu@100.
	b.BeginNode("cpus")
	b.PropU32("#address-cells", 2)
	b.PropU32("#size-cells", 0)
	for _, mpidr := range d.CPUs {
		b.BeginNode(fmt.Sprintf("cpu@%x", mpidr))
		b.PropString("device_type", "cpu")
		b.PropString("compatible", "arm,arm-v8")
		b.PropU64("reg", mpidr)
		b.PropString("enable-method", "psci")
		b.EndNode()
	}
	b.EndNode()

	// /psci (Linux bindings/arm/psci.yaml): PSCI 1.0 with the 0.2
	// fallback, so the kernel takes function IDs from the standard.
	b.BeginNode("psci")
	b.PropStrings("compatible", "arm,psci-1.0", "arm,psci-0.2")
	b.PropString("method", method)
	b.EndNode()

	// The GICv3 (bindings/interrupt-controller/arm,gic-v3.yaml): reg is
	// the distributor then the one redistributor region. #address-cells,
	// #size-cells and an empty ranges are what the binding asks of a GIC
	// node that could hold ITS children.
	b.BeginNode(fmt.Sprintf("intc@%x", d.GICDist.Base))
	b.PropString("compatible", "arm,gic-v3")
	b.PropU32("#interrupt-cells", 3)
	b.PropU32("#address-cells", 2)
	b.PropU32("#size-cells", 2)
	b.PropEmpty("ranges")
	b.PropEmpty("interrupt-controller")
	b.PropU64s("reg", d.GICDist.Base, d.GICDist.Size, d.GICRedist.Base, d.GICRedist.Size)
	b.PropU32("phandle", dtGICPhandle)
	b.EndNode()

	// The architected timer (bindings/timer/arm,arch_timer.yaml): PPIs in
	// the order secure phys (INTID 29), non-secure phys (30), virtual (27),
	// hyp (26), each as PPI number = INTID - 16, level high. always-on:
	// the timer keeps counting in every idle state KVM gives the guest.
	b.BeginNode("timer")
	b.PropString("compatible", "arm,armv8-timer")
	b.PropCells("interrupts",
		dtIRQTypePPI, 13, dtIRQLevelHigh,
		dtIRQTypePPI, 14, dtIRQLevelHigh,
		dtIRQTypePPI, 11, dtIRQLevelHigh,
		dtIRQTypePPI, 10, dtIRQLevelHigh)
	b.PropEmpty("always-on")
	b.EndNode()

	// The UART (Devicetree spec v0.4 4.2.2, Linux bindings/serial/
	// 8250.yaml). ns16550a needs no clocks node: clock-frequency is
	// enough for Linux's of_serial driver.
	if u := d.UART; u.Size != 0 {
		clock := u.ClockHz
		if clock == 0 {
			clock = UARTClockHz
		}
		b.BeginNode(strings.TrimPrefix(dtUARTPath(u), "/"))
		b.PropString("compatible", "ns16550a")
		b.PropU64s("reg", u.Base, u.Size)
		b.PropCells("interrupts", dtIRQTypeSPI, u.SPI, dtIRQLevelHigh)
		b.PropU32("clock-frequency", clock)
		b.PropU32("reg-shift", 0)
		b.PropU32("reg-io-width", 1)
		b.EndNode()
	}

	// The PMU (bindings/arm/pmu.yaml): one PPI for all CPUs, level high.
	if d.PMU {
		b.BeginNode("pmu")
		b.PropString("compatible", "arm,armv8-pmuv3")
		b.PropCells("interrupts", dtIRQTypePPI, dtPMUPPI, dtIRQLevelHigh)
		b.EndNode()
	}

	// The PL031 (bindings/rtc/arm,pl031.yaml, an arm,primecell device)
	// and its APB clock (bindings/clock/fixed-clock.yaml). Without the
	// clock Linux never reads the PrimeCell ids and the RTC never probes.
	if r := d.RTC; r.Size != 0 {
		b.BeginNode("apb-pclk")
		b.PropString("compatible", "fixed-clock")
		b.PropU32("#clock-cells", 0)
		b.PropU32("clock-frequency", dtAPBClockHz)
		b.PropString("clock-output-names", "clk24mhz")
		b.PropU32("phandle", dtAPBClockPhandle)
		b.EndNode()
		b.BeginNode(fmt.Sprintf("rtc@%x", r.Base))
		b.PropStrings("compatible", "arm,pl031", "arm,primecell")
		b.PropU64s("reg", r.Base, r.Size)
		b.PropCells("interrupts", dtIRQTypeSPI, r.SPI, dtIRQLevelHigh)
		b.PropU32("clocks", dtAPBClockPhandle)
		b.PropString("clock-names", "apb_pclk")
		b.EndNode()
	}

	// virtio-mmio transports (bindings/virtio/mmio.yaml). dma-coherent
	// (spec 2.3.10): guest RAM is ordinary cacheable memory to the VMM.
	for _, v := range d.VirtioMMIO {
		b.BeginNode(fmt.Sprintf("virtio_mmio@%x", v.Base))
		b.PropString("compatible", "virtio,mmio")
		b.PropU64s("reg", v.Base, v.Size)
		b.PropCells("interrupts", dtIRQTypeSPI, v.SPI, dtIRQEdgeRising)
		b.PropEmpty("dma-coherent")
		b.EndNode()
	}

	b.EndNode()
	blob, err := b.Finish()
	if err != nil {
		return nil, fmt.Errorf("device tree: %w", err)
	}
	if len(blob) > dtbMax {
		return nil, fmt.Errorf("device tree: blob is %d bytes, more than the 2 MiB arm64 Linux accepts (booting.rst section 2)", len(blob))
	}
	return blob, nil
}

func dtUARTPath(u UARTNode) string { return fmt.Sprintf("/uart@%x", u.Base) }

// dtRange is a named address range, for overlap checks.
type dtRange struct {
	what       string
	base, size uint64
}

// validate rejects descriptions that would build a tree Linux misreads or
// that contradicts itself. Each error is one sentence naming the field.
func (d *DeviceTree) validate() error {
	var ranges []dtRange
	addRange := func(what string, r Region) error {
		if r.Size == 0 {
			return fmt.Errorf("%s has zero size", what)
		}
		if r.Base+r.Size < r.Base {
			return fmt.Errorf("%s at %#x with size %#x wraps past the top of the address space", what, r.Base, r.Size)
		}
		ranges = append(ranges, dtRange{what, r.Base, r.Size})
		return nil
	}

	if len(d.RAM) == 0 {
		return fmt.Errorf("no RAM regions")
	}
	for i, r := range d.RAM {
		if err := addRange(fmt.Sprintf("RAM region %d", i), r); err != nil {
			return err
		}
		if r.Base%4096 != 0 || r.Size%4096 != 0 {
			return fmt.Errorf("RAM region %d (%#x, size %#x) is not 4 KiB aligned; the kernel would drop the partial pages", i, r.Base, r.Size)
		}
	}

	if len(d.CPUs) == 0 {
		return fmt.Errorf("no CPUs")
	}
	seen := make(map[uint64]int, len(d.CPUs))
	for i, m := range d.CPUs {
		// Linux rejects a cpu reg with bits outside the affinity fields
		// (MPIDR_HWID_BITMASK).
		if m&^psci.AffinityMask != 0 {
			return fmt.Errorf("vCPU %d has MPIDR %#x with bits outside the affinity fields (mask %#x); pass MPIDR_EL1 & %#x", i, m, psci.AffinityMask, psci.AffinityMask)
		}
		if j, dup := seen[m]; dup {
			return fmt.Errorf("vCPUs %d and %d have the same MPIDR affinity %#x", j, i, m)
		}
		seen[m] = i
	}

	switch d.PSCIMethod {
	case "", "hvc", "smc":
	default:
		return fmt.Errorf("PSCI method %q is neither \"hvc\" nor \"smc\"", d.PSCIMethod)
	}

	if d.GICDist.Size != GICDistSize {
		return fmt.Errorf("GIC distributor size is %#x, a GICv3 distributor is %#x (64 KiB)", d.GICDist.Size, GICDistSize)
	}
	if d.GICDist.Base%dtGICAlign != 0 || d.GICRedist.Base%dtGICAlign != 0 {
		return fmt.Errorf("GIC distributor (%#x) and redistributors (%#x) must be 64 KiB aligned", d.GICDist.Base, d.GICRedist.Base)
	}
	if need := uint64(len(d.CPUs)) * GICRedistSize; d.GICRedist.Size < need {
		return fmt.Errorf("GIC redistributor region is %#x bytes, %d vCPUs need %#x (128 KiB each)", d.GICRedist.Size, len(d.CPUs), need)
	}
	if err := addRange("GIC distributor", d.GICDist); err != nil {
		return err
	}
	if err := addRange("GIC redistributors", d.GICRedist); err != nil {
		return err
	}

	spis := map[uint32]string{}
	addSPI := func(what string, spi uint32) error {
		if spi > dtMaxSPI {
			return fmt.Errorf("%s SPI %d is out of range: SPI numbers are INTID - 32, 0..%d", what, spi, dtMaxSPI)
		}
		if other, dup := spis[spi]; dup {
			return fmt.Errorf("%s and %s share SPI %d", other, what, spi)
		}
		spis[spi] = what
		return nil
	}
	if d.UART.Size != 0 {
		if err := addRange("UART", Region{d.UART.Base, d.UART.Size}); err != nil {
			return err
		}
		if err := addSPI("UART", d.UART.SPI); err != nil {
			return err
		}
	}
	if d.RTC.Size != 0 {
		if d.RTC.Size < dtPrimeCellSize {
			return fmt.Errorf("RTC region is %#x bytes; a PrimeCell's id registers end at offset 0xfff, so it needs %#x", d.RTC.Size, dtPrimeCellSize)
		}
		if err := addRange("RTC", Region{d.RTC.Base, d.RTC.Size}); err != nil {
			return err
		}
		if err := addSPI("RTC", d.RTC.SPI); err != nil {
			return err
		}
	}
	for i, v := range d.VirtioMMIO {
		what := fmt.Sprintf("virtio-mmio device %d", i)
		if err := addRange(what, Region{v.Base, v.Size}); err != nil {
			return err
		}
		if err := addSPI(what, v.SPI); err != nil {
			return err
		}
	}

	sort.Slice(ranges, func(i, j int) bool { return ranges[i].base < ranges[j].base })
	for i := 1; i < len(ranges); i++ {
		p, c := ranges[i-1], ranges[i]
		if c.base < p.base+p.size {
			return fmt.Errorf("%s [%#x, %#x) overlaps %s [%#x, %#x)", c.what, c.base, c.base+c.size, p.what, p.base, p.base+p.size)
		}
	}

	if d.InitrdStart != 0 || d.InitrdEnd != 0 {
		if d.InitrdEnd <= d.InitrdStart {
			return fmt.Errorf("initrd end %#x is not above its start %#x (end is exclusive)", d.InitrdEnd, d.InitrdStart)
		}
		inRAM := false
		for _, r := range d.RAM {
			if d.InitrdStart >= r.Base && d.InitrdEnd <= r.Base+r.Size {
				inRAM = true
				break
			}
		}
		if !inRAM {
			return fmt.Errorf("initrd [%#x, %#x) does not lie inside one RAM region", d.InitrdStart, d.InitrdEnd)
		}
	}

	if strings.IndexByte(d.BootArgs, 0) >= 0 {
		return fmt.Errorf("boot arguments contain a NUL byte")
	}
	if len(d.BootArgs) > dtMaxCmdline {
		return fmt.Errorf("boot arguments are %d bytes; arm64 Linux keeps only the first %d (COMMAND_LINE_SIZE)", len(d.BootArgs), dtMaxCmdline)
	}
	return nil
}
