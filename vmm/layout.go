package vmm

import (
	"fmt"
)

// The guest-physical memory map (docs/memory-map.md). Devices sit below
// 1 GiB; RAM starts at 1 GiB so that guests of up to 2 GiB lie in
// [1 GiB, 3 GiB) as bare-metal test suites for QEMU's virt machine assume;
// more RAM continues at 4 GiB. hype's virtio-mmio bus places its devices at
// 0xd000_0000, between the two RAM regions.
const (
	GICDistBase   = 0x0800_0000
	GICDistSize   = 0x1_0000 // 64 KiB, fixed by GICv3 (arm-vgic-v3.rst)
	UARTBase      = 0x0900_0000
	UARTSize      = 0x1000
	MarkerBase    = 0x0901_0000
	MarkerSize    = 0x1000
	RTCBase       = 0x0902_0000 // PL031
	RTCSize       = 0x1000      // one PrimeCell: ids at 0xFE0-0xFFC
	GICRedistBase = 0x1000_0000
	GICRedistSize = 0x2_0000 // per vCPU: RD_base + SGI_base frames, 128 KiB, fixed by GICv3
	VirtioBase    = 0xd000_0000

	RAMBase     = 0x4000_0000
	LowRAMMax   = 0x8000_0000 // [1 GiB, 3 GiB)
	HighRAMBase = 0x1_0000_0000
	// MaxMemory keeps RAM within the default 40-bit IPA space.
	MaxMemory = 1<<40 - HighRAMBase

	PageSize = 0x1_0000 // 64 KiB: right for 4K, 16K and 64K page guests

	// Interrupts. SPI numbers are INTID-32 (GICv3 spec, 2.2).
	UARTSPI = 1 // INTID 33
	RTCSPI  = 2 // INTID 34
	// PMUIntID is the PMU overflow interrupt, PPI 7: the same INTID on
	// every vCPU, as KVM_ARM_VCPU_PMU_V3_IRQ wants for a PPI (vcpu.rst 1.1).
	PMUIntID = 23
	NrIRQs   = 128
	SPIFirst = 32
)

// UARTClockHz is the ns16550a's input clock, from which its driver divides
// the baud rate: the classic 1.8432 MHz crystal, what the device tree says.
const UARTClockHz = 1843200

// Region is a guest-physical address range.
type Region struct {
	Base, Size uint64
}

// End is the first address past r.
func (r Region) End() uint64 { return r.Base + r.Size }

// RAMRegions splits size bytes of RAM into the low and (when needed) high
// RAM regions.
func RAMRegions(size uint64) []Region {
	if size <= LowRAMMax {
		return []Region{{RAMBase, size}}
	}
	return []Region{{RAMBase, LowRAMMax}, {HighRAMBase, size - LowRAMMax}}
}

// Placement is where the loader puts the boot images in guest memory.
type Placement struct {
	Kernel Region // bytes reserved for the kernel (image_size for an Image)
	Entry  uint64
	DTB    Region
	Initrd Region // zero Size when there is no initrd
}

const (
	align2M = 2 << 20
	// dtbMax is the largest DTB arm64 Linux accepts (booting.rst, "2.
	// Setup the device tree": must not exceed 2 megabytes).
	dtbMax = 2 << 20
)

func alignDown(v, a uint64) uint64 { return v &^ (a - 1) }
func alignUp(v, a uint64) uint64   { return (v + a - 1) &^ (a - 1) }

// Place lays out a kernel needing kernelSize bytes at kernelOffset from the
// base of RAM, an initrd of initrdSize bytes and the DTB in the first RAM
// region: kernel at the bottom, DTB in the top 2 MiB-aligned 2 MiB, the
// initrd just below it. It fails when they do not fit.
func Place(ram Region, kernelOffset, kernelSize, initrdSize uint64) (Placement, error) {
	var p Placement
	if kernelOffset > ram.Size || kernelSize > ram.Size-kernelOffset {
		return p, fmt.Errorf("memory of %s is too small for the kernel (%s): give more --memory",
			FormatSize(ram.Size), sizeMiB(kernelSize))
	}
	p.Kernel = Region{ram.Base + kernelOffset, kernelSize}
	p.Entry = p.Kernel.Base
	dtb := alignDown(ram.End()-dtbMax, align2M)
	if dtb < ram.Base || p.Kernel.End() > dtb {
		return p, fmt.Errorf("memory of %s is too small for the kernel (%s) and the device tree: give more --memory",
			FormatSize(ram.Size), sizeMiB(kernelSize))
	}
	p.DTB = Region{dtb, dtbMax}
	if initrdSize > 0 {
		if initrdSize > dtb-ram.Base {
			return p, fmt.Errorf("the initrd (%s) is larger than the guest's memory allows (%s): give more --memory",
				sizeMiB(initrdSize), FormatSize(ram.Size))
		}
		start := alignDown(dtb-initrdSize, PageSize)
		if start < alignUp(p.Kernel.End(), PageSize) {
			return p, fmt.Errorf("memory of %s is too small for the kernel (%s) plus the initrd (%s): give more --memory",
				FormatSize(ram.Size), sizeMiB(kernelSize), sizeMiB(initrdSize))
		}
		p.Initrd = Region{start, initrdSize}
	}
	return p, nil
}

func sizeMiB(v uint64) string {
	return fmt.Sprintf("%.1f MiB", float64(v)/(1<<20))
}
