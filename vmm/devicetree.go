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
	// Devices are the nodes each device writes for itself (UARTNode.Node,
	// PL011Node.Node, RTCNode.Node, PMUNode, VirtioNode.Node), in the
	// order they appear in the tree, after the GIC and the timer. At most
	// one is the Console, which /chosen's stdout-path names; with none
	// there is no stdout-path.
	Devices []DeviceNode
	// BootArgs is the kernel command line (/chosen bootargs).
	BootArgs string
	// InitrdStart and InitrdEnd bound the initrd in guest-physical memory,
	// end exclusive as Linux reads linux,initrd-end. Both zero means no
	// initrd.
	InitrdStart, InitrdEnd uint64
}

// DeviceNode is one device's part of the device tree, made by that
// device's own node function and placed in DeviceTree.Devices by the
// board (boardTree): what the device claims, which Build checks against
// the rest of the platform, and how it writes its node. Adding a device
// to the tree is a new node function and one line in the board; Build
// does not change.
type DeviceNode struct {
	// What names the device in Build's errors ("UART", "RTC", ...).
	What string
	// Name is the node's name under the root, e.g. "uart@9000000".
	Name string
	// MMIO is the guest-physical range the device claims; the zero
	// Region means none (the PMU has no registers of its own), a Base
	// with a zero Size is an error.
	MMIO Region
	// SPIs are its shared peripheral interrupts, as INTID - 32.
	SPIs []uint32
	// Console makes /chosen's stdout-path name this node.
	Console bool
	// Clock, if set, is a fixed clock the node refers to: Build writes
	// the clock's node before this one, once however many devices share
	// it, and gives its phandle to Props.
	Clock *FixedClock
	// Check validates what only the device knows; nil checks nothing.
	Check func() error
	// Props writes the node's properties (Build opens and closes the
	// node); clock is the phandle of Clock, 0 without one.
	Props func(b *fdt.Builder, clock uint32)
}

// FixedClock is a clock node of the fixed-clock binding
// (bindings/clock/fixed-clock.yaml), named Node under the root.
type FixedClock struct {
	Node       string
	Hz         uint32
	OutputName string
}

// Constants of the tree, from the bindings the nodes follow.
const (
	// dtGICPhandle is the phandle of the only interrupt controller, the
	// target of the root's interrupt-parent (Devicetree spec v0.4 2.3.3,
	// 2.4.1).
	dtGICPhandle = 1
	// dtAPBClockHz is the rate of the fixed clock the PrimeCells (PL031,
	// PL011) name as apb_pclk, and the PL011's uartclk too, as on QEMU's
	// virt machine. The PL031 counts seconds from its own 1 Hz input;
	// the PL011 driver divides this clock for its baud rate.
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
// (enable-method "psci"), /psci, the GICv3 and the architected timer; then
// the nodes the devices write for themselves (Devices), with the clocks
// they refer to.
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
	for _, dev := range d.Devices {
		if dev.Console {
			b.PropString("stdout-path", "/"+dev.Name)
		}
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

	// Each device's own node, in the board's order. Clock phandles
	// follow the GIC's, in the order the clocks are first asked for.
	clocks := map[string]uint32{}
	for _, dev := range d.Devices {
		var clock uint32
		if c := dev.Clock; c != nil {
			ph, ok := clocks[c.Node]
			if !ok {
				ph = dtGICPhandle + 1 + uint32(len(clocks))
				clocks[c.Node] = ph
				b.BeginNode(c.Node)
				b.PropString("compatible", "fixed-clock")
				b.PropU32("#clock-cells", 0)
				b.PropU32("clock-frequency", c.Hz)
				b.PropString("clock-output-names", c.OutputName)
				b.PropU32("phandle", ph)
				b.EndNode()
			}
			clock = ph
		}
		b.BeginNode(dev.Name)
		dev.Props(b, clock)
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
	consoles := 0
	clocks := map[string]FixedClock{}
	clockUser := map[string]string{}
	for _, dev := range d.Devices {
		if c := dev.Clock; c != nil {
			if prev, ok := clocks[c.Node]; ok && prev != *c {
				return fmt.Errorf("%s and %s describe the clock %s differently (%+v, %+v)", clockUser[c.Node], dev.What, c.Node, prev, *c)
			}
			clocks[c.Node], clockUser[c.Node] = *c, dev.What
		}
		if dev.Props == nil || dev.Name == "" {
			return fmt.Errorf("%s has no node to write", dev.What)
		}
		if dev.Check != nil {
			if err := dev.Check(); err != nil {
				return err
			}
		}
		if dev.MMIO != (Region{}) {
			if err := addRange(dev.What, dev.MMIO); err != nil {
				return err
			}
		}
		for _, spi := range dev.SPIs {
			if err := addSPI(dev.What, spi); err != nil {
				return err
			}
		}
		if dev.Console {
			consoles++
		}
	}
	if consoles > 1 {
		return fmt.Errorf("%d devices are the console; /chosen's stdout-path names one", consoles)
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
