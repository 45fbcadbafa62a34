package vmm

// boardTree describes mvm's platform for cfg to the device tree: the
// memory map of layout.go, the vCPUs' MPIDR_EL1 affinities as KVM reports
// them (indexed by vCPU id), the initrd's place in RAM (zero Size: none)
// and the virtio-mmio transports. It is plain data so that the tree of
// every configuration can be built and checked without KVM. Each device
// contributes its own node, in this order: the console UART (the 16550,
// or the PL011 with --serial pl011), the PMU (--pmu), the PL031 RTC and
// the virtio-mmio transports.
func boardTree(cfg *Config, mpidrs []uint64, initrd Region, virtio []VirtioNode) DeviceTree {
	dt := DeviceTree{
		RAM:        RAMRegions(cfg.Memory),
		CPUs:       mpidrs,
		PSCIMethod: "hvc",
		GICDist:    Region{GICDistBase, GICDistSize},
		GICRedist:  Region{GICRedistBase, GICRedistSize * uint64(len(mpidrs))},
		BootArgs:   cfg.Cmdline,
	}
	if cfg.Serial == SerialPL011 {
		dt.Devices = append(dt.Devices, PL011Node{Base: UARTBase, Size: UARTSize, SPI: UARTSPI}.Node())
	} else {
		dt.Devices = append(dt.Devices, UARTNode{Base: UARTBase, Size: UARTSize, SPI: UARTSPI, ClockHz: UARTClockHz}.Node())
	}
	if cfg.PMU {
		dt.Devices = append(dt.Devices, PMUNode())
	}
	dt.Devices = append(dt.Devices, RTCNode{Base: RTCBase, Size: RTCSize, SPI: RTCSPI}.Node())
	for i, v := range virtio {
		dt.Devices = append(dt.Devices, v.Node(i))
	}
	if initrd.Size > 0 {
		dt.InitrdStart = initrd.Base
		dt.InitrdEnd = initrd.End()
	}
	return dt
}
