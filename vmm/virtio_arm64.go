//go:build linux && arm64

package vmm

import (
	"errors"
	"fmt"

	"github.com/mvm-dev/mvm/devices"
	"github.com/mvm-dev/mvm/devices/virtio"
	"github.com/mvm-dev/mvm/internal/kvm"
)

// virtioSlot is one virtio device of the VM: the device, then (once the VM
// exists) its transport and interrupt.
type virtioSlot struct {
	dev   virtio.Device
	tr    *virtio.Transport
	irq   *virtio.Event // irqfd; nil when the host has none (KVM_IRQ_LINE then)
	base  uint64
	spi   uint32
	kicks int // queues whose notify KVM handles through an ioeventfd
}

// ramView gives devices guest RAM.
type ramView struct{ g *guestRAM }

func (r ramView) Slice(addr, size uint64) ([]byte, bool) {
	b, err := r.g.slice(addr, size)
	return b, err == nil
}

// openVirtio opens the devices' host side (disk images, taps) before
// anything else, so a bad --disk or --net fails first and alone.
func (m *VM) openVirtio() error {
	add := func(d virtio.Device) {
		i := len(m.virtio)
		m.virtio = append(m.virtio, &virtioSlot{dev: d, base: VirtioBase + uint64(i)*VirtioSlotSize, spi: uint32(VirtioSPIFirst + i)})
	}
	for i, d := range m.cfg.Disks {
		b, err := virtio.OpenDisk(fmt.Sprintf("virtio-blk%d", i), d.Path, d.ReadOnly)
		if err != nil {
			return fmt.Errorf("--disk: %w", err)
		}
		add(b)
	}
	for i, n := range m.cfg.Nets {
		mac := n.MAC
		if mac == nil {
			mac = virtio.DefaultMAC(n.Tap, i)
		}
		d, err := virtio.OpenTap(fmt.Sprintf("virtio-net%d", i), n.Tap, mac)
		if err != nil {
			return fmt.Errorf("--net: %w", err)
		}
		add(d)
	}
	if m.cfg.RNG {
		add(virtio.NewRNG())
	}
	for i, sh := range m.cfg.Shares {
		fs, err := virtio.StartFS(virtio.FSOptions{
			Name: fmt.Sprintf("virtio-fs%d", i), Tag: sh.Tag, Dir: sh.HostDir, ReadOnly: sh.ReadOnly,
			Virtiofsd: m.cfg.virtiofsd(), Sandbox: m.shareSandbox,
		}, m.log)
		if err != nil {
			return fmt.Errorf("--share %s: %w", sh.HostDir, err)
		}
		add(fs)
	}
	if len(m.cfg.Ports) > 0 {
		var ports []virtio.ConsolePort
		for _, p := range m.cfg.Ports {
			ports = append(ports, virtio.ConsolePort{Name: p.Name, In: p.In, Out: p.Out})
		}
		con, err := virtio.NewConsole("virtio-console0", ports)
		if err != nil {
			return err
		}
		add(con)
	}
	return nil
}

// SharedRegions gives vhost-user backends guest RAM (a memfd when the VM
// has shares; none otherwise).
func (r ramView) SharedRegions() []virtio.SharedRegion {
	g := r.g
	if g.memfd < 0 {
		return nil
	}
	var out []virtio.SharedRegion
	for i, reg := range g.regions {
		out = append(out, virtio.SharedRegion{GuestAddr: reg.Base, Size: reg.Size,
			UserAddr: uint64(uintptrOf(g.mem[i])), Fd: g.memfd, Offset: g.offsets[i]})
	}
	return out
}

// attachVirtio puts each device on the bus behind a virtio-mmio transport,
// its interrupt on an irqfd and its queue notifications on ioeventfds,
// where KVM has them.
func (m *VM) attachVirtio() error {
	irqfd := kvm.CheckExtension(m.vm, kvm.CapIRQFD) > 0
	ioeventfd := kvm.CheckExtension(m.vm, kvm.CapIOEventFD) > 0
	for _, s := range m.virtio {
		raise, err := m.virtioIRQ(s, irqfd)
		if err != nil {
			return err
		}
		tr, err := virtio.NewTransport(s.dev, ramView{m.ram}, raise, m.log)
		if err != nil {
			return fmt.Errorf("%s: %w", s.dev.Name(), err)
		}
		s.tr = tr
		if ioeventfd {
			for q, k := range tr.Kicks() {
				if err := kvm.IOEventFD(m.vm.Fd(), s.base+virtio.QueueNotifyOffset, 4, uint64(q), k.Fd()); err != nil {
					m.log.Debug("KVM_IOEVENTFD failed; queue notifications exit to userspace", "device", s.dev.Name(), "err", err)
					break
				}
				s.kicks++
			}
		}
		if err := m.bus.Add(s.base, VirtioSlotSize, tr); err != nil {
			return err
		}
	}
	return nil
}

// virtioIRQ returns the function that raises s's edge-triggered SPI: a
// write to an irqfd (api.rst KVM_IRQFD; on arm64 the GSI is the SPI
// number, INTID - 32), else a KVM_IRQ_LINE pulse.
func (m *VM) virtioIRQ(s *virtioSlot, irqfd bool) (func(), error) {
	if irqfd {
		ev, err := virtio.NewEvent()
		if err != nil {
			return nil, err
		}
		err = kvm.IRQFD(m.vm, int(ev.Fd()), s.spi)
		if err == nil {
			s.irq = ev
			return ev.Signal, nil
		}
		ev.Close()
		m.log.Debug("KVM_IRQFD failed; virtio interrupts use KVM_IRQ_LINE", "device", s.dev.Name(), "err", err)
	}
	intid := SPIFirst + s.spi
	return func() {
		err := kvm.IRQLine(m.vm, kvm.IRQTypeSPI, 0, intid, true)
		if err == nil {
			err = kvm.IRQLine(m.vm, kvm.IRQTypeSPI, 0, intid, false)
		}
		if err != nil {
			m.log.Warn("raise virtio interrupt", "err", err)
		}
	}, nil
}

// virtioNodes describes the devices for the device tree.
func (m *VM) virtioNodes() []VirtioNode {
	var out []VirtioNode
	for _, s := range m.virtio {
		out = append(out, VirtioNode{Base: s.base, Size: VirtioSlotSize, SPI: s.spi})
	}
	return out
}

// virtioRanges names the virtio-mmio slots for the exit profile's
// DABT_LOW breakdown.
func (m *VM) virtioRanges() []devices.Range {
	var out []devices.Range
	for _, s := range m.virtio {
		out = append(out, devices.Range{Name: s.dev.Name(), Base: s.base, Size: VirtioSlotSize})
	}
	return out
}

// resetVirtio returns every device to its power-on state (guest reboot).
func (m *VM) resetVirtio() {
	for _, s := range m.virtio {
		if s.tr != nil {
			s.tr.Reset()
		}
	}
}

// closeVirtio stops every device — workers finish the request at hand, a
// disk is synced (what the guest wrote is in the file however the run
// ended) — and releases them. It must run before guest RAM is unmapped.
func (m *VM) closeVirtio() error {
	var errs []error
	for _, s := range m.virtio {
		var err error
		if s.tr != nil {
			err = s.tr.Close()
		} else {
			err = s.dev.Close()
		}
		if err != nil {
			errs = append(errs, err)
		}
		if s.irq != nil {
			s.irq.Close()
		}
	}
	m.virtio = nil
	return errors.Join(errs...)
}

// virtioProblems counts driver errors over all devices.
func (m *VM) virtioProblems() uint64 {
	var n uint64
	for _, s := range m.virtio {
		if s.tr != nil {
			n += s.tr.Problems()
		}
	}
	return n
}
