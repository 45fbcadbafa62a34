package vmm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"github.com/mvm-dev/mvm/internal/fdt/fdttest"
	"strings"
	"testing"

	"github.com/mvm-dev/mvm/internal/fdt"
)

// testDeviceTree is a 4-vCPU platform whose MPIDRs use every affinity
// level, with two RAM regions, a UART, two virtio-mmio devices and an
// initrd.
func testDeviceTree() DeviceTree {
	return DeviceTree{
		RAM:        []Region{{0x4000_0000, 2 << 30}, {0x1_0000_0000, 1 << 30}},
		CPUs:       []uint64{0x0, 0x1, 0x1_0100, 0x2_0000_0003},
		PSCIMethod: "hvc",
		GICDist:    Region{0x0800_0000, 0x1_0000},
		GICRedist:  Region{0x1000_0000, 4 * 0x2_0000},
		Devices: []DeviceNode{
			testUART().Node(),
			VirtioNode{Base: 0xd000_0000, Size: 0x1000, SPI: 5}.Node(0),
			VirtioNode{Base: 0xd000_1000, Size: 0x1000, SPI: 6}.Node(1),
		},
		BootArgs:    "console=ttyS0 earlycon quiet",
		InitrdStart: 0x4800_0000,
		InitrdEnd:   0x4812_3457,
	}
}

// testUART is testDeviceTree's UART, Devices[0].
func testUART() UARTNode { return UARTNode{Base: 0x0900_0000, Size: 0x1000, SPI: 1} }

// Value encoders for the expectations.
func cellsOf(v ...uint32) []byte {
	var b []byte
	for _, c := range v {
		b = binary.BigEndian.AppendUint32(b, c)
	}
	return b
}

func u64sOf(v ...uint64) []byte {
	var b []byte
	for _, c := range v {
		b = binary.BigEndian.AppendUint64(b, c)
	}
	return b
}

func strsOf(ss ...string) []byte {
	var b []byte
	for _, s := range ss {
		b = append(append(b, s...), 0)
	}
	return b
}

func TestDeviceTreeDTC(t *testing.T) {
	d := testDeviceTree()
	blob, err := d.Build()
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	got, warnings := fdttest.Decompile(t, blob)
	if warnings != "" {
		t.Errorf("dtc warns about the tree:\n%s", warnings)
	}

	want := map[string]map[string][]byte{
		"/": {
			"compatible":       strsOf("linux,dummy-virt"),
			"#address-cells":   cellsOf(2),
			"#size-cells":      cellsOf(2),
			"interrupt-parent": cellsOf(1),
		},
		"/chosen": {
			"bootargs":           strsOf("console=ttyS0 earlycon quiet"),
			"stdout-path":        strsOf("/uart@9000000"),
			"linux,initrd-start": u64sOf(0x4800_0000),
			"linux,initrd-end":   u64sOf(0x4812_3457),
		},
		"/memory@40000000": {
			"device_type": strsOf("memory"),
			"reg":         u64sOf(0x4000_0000, 2<<30, 0x1_0000_0000, 1<<30),
		},
		"/cpus": {
			"#address-cells": cellsOf(2),
			"#size-cells":    cellsOf(0),
		},
		"/psci": {
			"compatible": strsOf("arm,psci-1.0", "arm,psci-0.2"),
			"method":     strsOf("hvc"),
		},
		"/intc@8000000": {
			"compatible":           strsOf("arm,gic-v3"),
			"#interrupt-cells":     cellsOf(3),
			"#address-cells":       cellsOf(2),
			"#size-cells":          cellsOf(2),
			"ranges":               nil,
			"interrupt-controller": nil,
			"reg":                  u64sOf(0x0800_0000, 0x1_0000, 0x1000_0000, 0x8_0000),
			"phandle":              cellsOf(1),
		},
		"/timer": {
			"compatible": strsOf("arm,armv8-timer"),
			"interrupts": cellsOf(1, 13, 4, 1, 14, 4, 1, 11, 4, 1, 10, 4),
			"always-on":  nil,
		},
		"/uart@9000000": {
			"compatible":      strsOf("ns16550a"),
			"reg":             u64sOf(0x0900_0000, 0x1000),
			"interrupts":      cellsOf(0, 1, 4),
			"clock-frequency": cellsOf(1843200),
			"reg-shift":       cellsOf(0),
			"reg-io-width":    cellsOf(1),
		},
		"/virtio_mmio@d0000000": {
			"compatible":   strsOf("virtio,mmio"),
			"reg":          u64sOf(0xd000_0000, 0x1000),
			"interrupts":   cellsOf(0, 5, 1),
			"dma-coherent": nil,
		},
		"/virtio_mmio@d0001000": {
			"compatible":   strsOf("virtio,mmio"),
			"reg":          u64sOf(0xd000_1000, 0x1000),
			"interrupts":   cellsOf(0, 6, 1),
			"dma-coherent": nil,
		},
	}
	// One cpu node per vCPU: reg is the MPIDR affinity given, in two
	// cells, and the unit address repeats it.
	for _, mpidr := range d.CPUs {
		want[fmt.Sprintf("/cpus/cpu@%x", mpidr)] = map[string][]byte{
			"device_type":   strsOf("cpu"),
			"compatible":    strsOf("arm,arm-v8"),
			"reg":           cellsOf(uint32(mpidr>>32), uint32(mpidr)),
			"enable-method": strsOf("psci"),
		}
	}

	for path, props := range want {
		gp, ok := got[path]
		if !ok {
			t.Errorf("no node %s", path)
			continue
		}
		for name, v := range props {
			gv, ok := gp[name]
			if !ok {
				t.Errorf("%s: no property %s", path, name)
			} else if !bytes.Equal(gv, v) {
				t.Errorf("%s %s = % x, want % x", path, name, gv, v)
			}
		}
		for name := range gp {
			if _, ok := props[name]; !ok {
				t.Errorf("%s: unexpected property %s", path, name)
			}
		}
	}
	for path := range got {
		if _, ok := want[path]; !ok {
			t.Errorf("unexpected node %s", path)
		}
	}

	// phandle linkage: the root's interrupt-parent names the node that
	// is the interrupt controller, and stdout-path names the UART.
	parent := got["/"]["interrupt-parent"]
	var controllers []string
	for path, props := range got {
		if ph, ok := props["phandle"]; ok && bytes.Equal(ph, parent) {
			controllers = append(controllers, path)
		}
	}
	if len(controllers) != 1 || controllers[0] != "/intc@8000000" {
		t.Errorf("interrupt-parent %x resolves to %v, want the GIC", parent, controllers)
	} else if _, ok := got[controllers[0]]["interrupt-controller"]; !ok {
		t.Errorf("interrupt-parent target is not an interrupt-controller")
	}
	stdout := strings.TrimSuffix(string(got["/chosen"]["stdout-path"]), "\x00")
	if !bytes.Equal(got[stdout]["compatible"], strsOf("ns16550a")) {
		t.Errorf("stdout-path %q does not lead to the ns16550a UART", stdout)
	}

	tree, err := fdt.Parse(blob)
	if err != nil {
		t.Fatalf("fdt.Parse: %v", err)
	}
	if tree.Header.BootCPUIDPhys != 0 {
		t.Errorf("boot_cpuid_phys = %d, want vCPU 0's MPIDR", tree.Header.BootCPUIDPhys)
	}
	// Node order matters for cpus: Linux numbers CPUs in tree order.
	cpus := tree.Lookup("/cpus")
	for i, c := range cpus.Children {
		if r, err := c.Prop("reg").U64(); err != nil || r != d.CPUs[i] {
			t.Errorf("cpu node %d reg = %#x (%v), want vCPU %d's %#x", i, r, err, i, d.CPUs[i])
		}
	}
}

// kvmDefaultMPIDR is KVM's default affinity for a vCPU id: Aff0 = id & 0xf,
// Aff1 = (id >> 4) & 0xff, Aff2 = (id >> 12) & 0xff.
func kvmDefaultMPIDR(id int) uint64 {
	return uint64(id&0xf) | uint64((id>>4)&0xff)<<8 | uint64((id>>12)&0xff)<<16
}

func TestDeviceTree512CPUs(t *testing.T) {
	const n = 512
	d := testDeviceTree()
	d.CPUs = nil
	for i := 0; i < n; i++ {
		d.CPUs = append(d.CPUs, kvmDefaultMPIDR(i))
	}
	d.GICRedist = Region{0x1000_0000, n * 0x2_0000}
	blob, err := d.Build()
	if err != nil {
		t.Fatalf("Build with %d CPUs: %v", n, err)
	}
	if len(blob) > 2<<20 {
		t.Errorf("blob is %d bytes, over arm64's 2 MiB limit", len(blob))
	}
	tree, err := fdt.Parse(blob)
	if err != nil {
		t.Fatal(err)
	}
	cpus := tree.Lookup("/cpus").Children
	if len(cpus) != n {
		t.Fatalf("%d cpu nodes, want %d", len(cpus), n)
	}
	for i, c := range cpus {
		r, err := c.Prop("reg").U64()
		if err != nil || r != d.CPUs[i] || c.Name != fmt.Sprintf("cpu@%x", d.CPUs[i]) {
			t.Fatalf("cpu %d: %s reg %#x (%v), want MPIDR %#x", i, c.Name, r, err, d.CPUs[i])
		}
	}
	if got := tree.Lookup("/cpus/cpu@1f0f"); got == nil {
		t.Errorf("vCPU 511 (Aff1 0x1f, Aff0 0xf) has no node cpu@1f0f")
	}
	if _, warnings := fdttest.Decompile(t, blob); warnings != "" {
		t.Errorf("dtc warns about the 512-CPU tree:\n%s", warnings)
	}
}

func TestDeviceTreeOptionalParts(t *testing.T) {
	d := testDeviceTree()
	d.Devices = nil
	d.InitrdStart, d.InitrdEnd = 0, 0
	d.BootArgs = ""
	d.PSCIMethod = ""
	d.RAM = d.RAM[:1]
	blob, err := d.Build()
	if err != nil {
		t.Fatal(err)
	}
	tree, err := fdt.Parse(blob)
	if err != nil {
		t.Fatal(err)
	}
	chosen := tree.Lookup("/chosen")
	if chosen == nil || len(chosen.Props) != 0 {
		t.Errorf("/chosen = %+v, want an empty node", chosen)
	}
	if m, _ := tree.Lookup("/psci").Prop("method").Str(); m != "hvc" {
		t.Errorf("default PSCI method %q", m)
	}
	for _, c := range tree.Root.Children {
		if strings.HasPrefix(c.Name, "uart") || strings.HasPrefix(c.Name, "virtio") {
			t.Errorf("unexpected node %s", c.Name)
		}
	}

	d = testDeviceTree()
	u := testUART()
	u.ClockHz = 24_000_000
	d.Devices[0] = u.Node()
	d.PSCIMethod = "smc"
	blob, err = d.Build()
	if err != nil {
		t.Fatal(err)
	}
	tree, err = fdt.Parse(blob)
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := tree.Lookup("/uart@9000000").Prop("clock-frequency").U32(); c != 24_000_000 {
		t.Errorf("clock-frequency = %d", c)
	}
	if m, _ := tree.Lookup("/psci").Prop("method").Str(); m != "smc" {
		t.Errorf("PSCI method %q", m)
	}
}

func TestDeviceTreeValidation(t *testing.T) {
	var nilTree *DeviceTree
	if _, err := nilTree.Build(); err == nil {
		t.Errorf("nil *DeviceTree built")
	}
	cases := []struct {
		name   string
		mutate func(d *DeviceTree)
		want   string
	}{
		{"no RAM", func(d *DeviceTree) { d.RAM = nil }, "no RAM"},
		{"zero RAM", func(d *DeviceTree) { d.RAM[1].Size = 0 }, "RAM region 1 has zero size"},
		{"RAM wraps", func(d *DeviceTree) { d.RAM[1] = Region{0xffff_ffff_ffff_0000, 0x2_0000} }, "wraps"},
		{"RAM unaligned", func(d *DeviceTree) { d.RAM[0].Size = 0x1234 }, "4 KiB aligned"},
		{"RAM overlap", func(d *DeviceTree) { d.RAM[1].Base = 0x8000_0000 }, "overlaps"},
		{"no CPUs", func(d *DeviceTree) { d.CPUs = nil }, "no CPUs"},
		{"MPIDR bits", func(d *DeviceTree) { d.CPUs[1] = 0x8000_0001 }, "outside the affinity"},
		{"dup MPIDR", func(d *DeviceTree) { d.CPUs[3] = 1 }, "vCPUs 1 and 3"},
		{"PSCI method", func(d *DeviceTree) { d.PSCIMethod = "svc" }, "PSCI method"},
		{"dist size", func(d *DeviceTree) { d.GICDist.Size = 0x2_0000 }, "distributor size"},
		{"gic align", func(d *DeviceTree) { d.GICRedist.Base += 0x1000 }, "64 KiB aligned"},
		{"redist small", func(d *DeviceTree) { d.GICRedist.Size = 3 * 0x2_0000 }, "4 vCPUs need 0x80000"},
		{"gic in RAM", func(d *DeviceTree) { d.GICRedist.Base = 0x4000_0000 }, "overlaps"},
		{"uart over gic", func(d *DeviceTree) { d.Devices[0] = UARTNode{Base: 0x0800_8000, Size: 0x1000, SPI: 1}.Node() }, "overlaps GIC distributor"},
		{"virtio overlap", func(d *DeviceTree) { d.Devices[2] = VirtioNode{Base: 0xd000_0800, Size: 0x1000, SPI: 6}.Node(1) }, "overlaps virtio-mmio device 0"},
		{"virtio zero", func(d *DeviceTree) { d.Devices[1] = VirtioNode{Base: 0xd000_0000, SPI: 5}.Node(0) }, "virtio-mmio device 0 has zero size"},
		{"SPI range", func(d *DeviceTree) { d.Devices[0] = UARTNode{Base: 0x0900_0000, Size: 0x1000, SPI: 988}.Node() }, "out of range"},
		{"SPI shared", func(d *DeviceTree) { d.Devices[2] = VirtioNode{Base: 0xd000_1000, Size: 0x1000, SPI: 1}.Node(1) }, "UART and virtio-mmio device 1 share SPI 1"},
		{"initrd reversed", func(d *DeviceTree) { d.InitrdStart, d.InitrdEnd = d.InitrdEnd, d.InitrdStart }, "not above its start"},
		{"initrd empty", func(d *DeviceTree) { d.InitrdEnd = d.InitrdStart }, "not above its start"},
		{"initrd end only", func(d *DeviceTree) { d.InitrdStart = 0 }, "inside one RAM region"},
		{"initrd outside", func(d *DeviceTree) { d.InitrdStart, d.InitrdEnd = 0x3000_0000, 0x3001_0000 }, "inside one RAM region"},
		{"initrd straddles", func(d *DeviceTree) { d.InitrdStart, d.InitrdEnd = 0xbfff_0000, 0x1_0001_0000 }, "inside one RAM region"},
		{"two consoles", func(d *DeviceTree) {
			d.Devices = append(d.Devices, PL011Node{Base: 0x0903_0000, Size: 0x1000, SPI: 9}.Node())
		}, "2 devices are the console"},
		{"clock disagrees", func(d *DeviceTree) {
			r := RTCNode{Base: 0x0902_0000, Size: 0x1000, SPI: 2}.Node()
			p := PL011Node{Base: 0x0903_0000, Size: 0x1000, SPI: 9}.Node()
			p.Console = false
			p.Clock = &FixedClock{Node: r.Clock.Node, Hz: 1_000_000, OutputName: "other"}
			d.Devices = append(d.Devices, r, p)
		}, "RTC and UART describe the clock apb-pclk differently"},
		{"node without props", func(d *DeviceTree) { d.Devices = append(d.Devices, DeviceNode{What: "widget", Name: "widget"}) }, "widget has no node"},
		{"bootargs NUL", func(d *DeviceTree) { d.BootArgs = "a\x00b" }, "NUL"},
		{"bootargs long", func(d *DeviceTree) { d.BootArgs = strings.Repeat("x", 2048) }, "COMMAND_LINE_SIZE"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := testDeviceTree()
			tc.mutate(&d)
			blob, err := d.Build()
			if err == nil {
				t.Fatalf("Build succeeded (%d bytes)", len(blob))
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "device tree: ") {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}
