package devices

import (
	"fmt"
	"sort"
)

// Device is an MMIO device. Offsets are relative to the device's base.
// Read fills data (1, 2, 4 or 8 bytes); both are called from vCPU threads
// concurrently, so devices lock for themselves.
type Device interface {
	Name() string
	Read(off uint64, data []byte)
	Write(off uint64, data []byte)
}

// Bus routes guest-physical addresses to devices.
type Bus struct {
	ranges []busRange // sorted by base, non-overlapping
}

type busRange struct {
	base, size uint64
	dev        Device
}

// Add places dev at [base, base+size).
func (b *Bus) Add(base, size uint64, dev Device) error {
	if size == 0 || base+size < base {
		return fmt.Errorf("device %s: bad range %#x+%#x", dev.Name(), base, size)
	}
	for _, r := range b.ranges {
		if base < r.base+r.size && r.base < base+size {
			return fmt.Errorf("device %s at %#x+%#x overlaps %s at %#x+%#x", dev.Name(), base, size, r.dev.Name(), r.base, r.size)
		}
	}
	b.ranges = append(b.ranges, busRange{base, size, dev})
	sort.Slice(b.ranges, func(i, j int) bool { return b.ranges[i].base < b.ranges[j].base })
	return nil
}

// Find returns the device at addr and the offset into it, or nil.
func (b *Bus) Find(addr uint64) (Device, uint64) {
	d, off, _ := b.Lookup(addr)
	return d, off
}

// Lookup is Find that also returns the device's index in Devices(), so
// callers can keep per-device data in a slice.
//
// It is on every MMIO exit's path: the binary search is written out rather
// than sort.Search's, whose predicate is a closure called at each step.
func (b *Bus) Lookup(addr uint64) (Device, uint64, int) {
	r := b.ranges
	// The first range that ends above addr (ranges are sorted and
	// disjoint, so their ends are sorted too).
	lo, hi := 0, len(r)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if r[mid].base+r[mid].size > addr {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	if lo < len(r) && addr >= r[lo].base {
		return r[lo].dev, addr - r[lo].base, lo
	}
	return nil, 0, -1
}

// Devices lists the devices in address order.
func (b *Bus) Devices() []Device {
	out := make([]Device, len(b.ranges))
	for i, r := range b.ranges {
		out[i] = r.dev
	}
	return out
}

// Range is where a device sits in the guest-physical address space.
type Range struct {
	Name       string
	Base, Size uint64
}

// Ranges lists the devices' ranges in Devices() order.
func (b *Bus) Ranges() []Range {
	out := make([]Range, len(b.ranges))
	for i, r := range b.ranges {
		out[i] = Range{Name: r.dev.Name(), Base: r.base, Size: r.size}
	}
	return out
}
