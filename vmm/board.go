package vmm

// boardTree describes mvm's platform for cfg to the device tree: the
// memory map of layout.go, the vCPUs' MPIDR_EL1 affinities as KVM reports
// them (indexed by vCPU id), the initrd's place in RAM (zero Size: none)
// and the virtio-mmio transports. It is plain data so that the tree of
// every configuration can be built and checked without KVM.
func boardTree(cfg *Config, mpidrs []uint64, initrd Region, virtio []VirtioNode) DeviceTree {
	dt := DeviceTree{
		RAM:        RAMRegions(cfg.Memory),
		CPUs:       mpidrs,
		PSCIMethod: "hvc",
		GICDist:    Region{GICDistBase, GICDistSize},
		GICRedist:  Region{GICRedistBase, GICRedistSize * uint64(len(mpidrs))},
		UART:       UARTNode{Base: UARTBase, Size: UARTSize, SPI: UARTSPI, ClockHz: UARTClockHz},
		RTC:        RTCNode{Base: RTCBase, Size: RTCSize, SPI: RTCSPI},
		PMU:        cfg.PMU,
		BootArgs:   cfg.Cmdline,
		VirtioMMIO: virtio,
	}
	if initrd.Size > 0 {
		dt.InitrdStart = initrd.Base
		dt.InitrdEnd = initrd.End()
	}
	return dt
}
