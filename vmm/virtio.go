package vmm

import (
	"fmt"
	"net"
	"strings"

	"github.com/mvm-dev/mvm/internal/fdt"
)

// The virtio-mmio window (docs/devices.md): devices sit 4 KiB apart from
// VirtioBase in the order disks, networks, entropy, shares — hype's mmio.NewBus
// layout — each with its own edge-triggered SPI.
const (
	VirtioSlotSize = 0x1000
	// VirtioMax is how many devices the window holds: 32 slots of 4 KiB
	// (0xd000_0000 - 0xd001_ffff) and SPIs 16..47 (INTIDs 48..79).
	VirtioMax      = 32
	VirtioSPIFirst = 16
)

// Disk is one --disk: a raw image file for a virtio-blk device.
type Disk struct {
	Path     string
	ReadOnly bool
}

// NetDevice is one --net: a virtio-net device on an existing tap.
type NetDevice struct {
	Tap string
	MAC net.HardwareAddr // nil: a default derived from the tap name and index
}

// ParseDisk parses a --disk value: PATH or PATH,ro.
func ParseDisk(spec string) (Disk, error) {
	path, opts, _ := strings.Cut(spec, ",")
	if path == "" {
		return Disk{}, fmt.Errorf("--disk %q: give an image path, e.g. --disk root.img or --disk data.img,ro", spec)
	}
	d := Disk{Path: path}
	for _, o := range strings.Split(opts, ",") {
		switch o {
		case "":
		case "ro":
			d.ReadOnly = true
		case "rw":
			d.ReadOnly = false
		default:
			return Disk{}, fmt.Errorf("--disk %q: unknown option %q (the only options are ro and rw)", spec, o)
		}
	}
	return d, nil
}

// ParseNet parses a --net value: tap=NAME[,mac=MAC].
func ParseNet(spec string) (NetDevice, error) {
	var n NetDevice
	for _, kv := range strings.Split(spec, ",") {
		k, v, ok := strings.Cut(kv, "=")
		switch {
		case !ok:
			return n, fmt.Errorf("--net %q: %q is not KEY=VALUE (use tap=NAME[,mac=MAC])", spec, kv)
		case k == "tap":
			if v == "" || len(v) > 15 || strings.ContainsAny(v, "/ \t") {
				return n, fmt.Errorf("--net %q: tap name %q must be 1 to 15 characters without '/' or spaces", spec, v)
			}
			n.Tap = v
		case k == "mac":
			mac, err := net.ParseMAC(v)
			if err != nil || len(mac) != 6 {
				return n, fmt.Errorf("--net %q: bad MAC %q (use six hex bytes, e.g. 02:00:00:00:00:01)", spec, v)
			}
			if mac[0]&1 != 0 {
				return n, fmt.Errorf("--net %q: MAC %s is a multicast address; a NIC needs a unicast one (even first byte)", spec, v)
			}
			n.MAC = mac
		default:
			return n, fmt.Errorf("--net %q: unknown key %q (use tap=NAME[,mac=MAC])", spec, k)
		}
	}
	if n.Tap == "" {
		return n, fmt.Errorf("--net %q: no tap given (use tap=NAME[,mac=MAC])", spec)
	}
	return n, nil
}

// virtioCount is the number of virtio devices the configuration asks for.
func (c *Config) virtioCount() int {
	n := len(c.Disks) + len(c.Nets) + len(c.Shares)
	if c.RNG {
		n++
	}
	if len(c.Ports) > 0 {
		n++
	}
	return n
}

// validateVirtio checks the virtio devices' part of the configuration.
func (c *Config) validateVirtio() error {
	if n := c.virtioCount(); n > VirtioMax {
		return fmt.Errorf("%d virtio devices (--disk, --net, --share and the rng) are more than the %d the device window holds", n, VirtioMax)
	}
	seen := map[string]bool{}
	for _, n := range c.Nets {
		if seen[n.Tap] {
			return fmt.Errorf("--net: tap %s is given twice", n.Tap)
		}
		seen[n.Tap] = true
	}
	return c.validateShares()
}

// VirtioNode is a virtio-mmio transport ("virtio,mmio" binding). Its
// interrupt is edge triggered: mvm signals it through an irqfd.
type VirtioNode struct {
	Base, Size uint64
	SPI        uint32 // INTID - 32
}

// Node is the device-tree node of the i'th transport (bindings/virtio/
// mmio.yaml). dma-coherent (Devicetree spec v0.4 2.3.10): guest RAM is
// ordinary cacheable memory to the VMM.
func (v VirtioNode) Node(i int) DeviceNode {
	return DeviceNode{
		What: fmt.Sprintf("virtio-mmio device %d", i),
		Name: fmt.Sprintf("virtio_mmio@%x", v.Base),
		MMIO: Region{v.Base, v.Size},
		SPIs: []uint32{v.SPI},
		Props: func(b *fdt.Builder, _ uint32) {
			b.PropString("compatible", "virtio,mmio")
			b.PropU64s("reg", v.Base, v.Size)
			b.PropCells("interrupts", dtIRQTypeSPI, v.SPI, dtIRQEdgeRising)
			b.PropEmpty("dma-coherent")
		},
	}
}
