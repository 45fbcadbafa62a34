package devices

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// stubDevice is a named device that does nothing.
type stubDevice struct{ name string }

func (d *stubDevice) Name() string               { return d.name }
func (d *stubDevice) Read(off uint64, b []byte)  {}
func (d *stubDevice) Write(off uint64, b []byte) {}

func TestBusAddRejectsBadRanges(t *testing.T) {
	const base, size = 0x1000, 0x100 // existing device at [0x1000, 0x1100)
	tests := []struct {
		name       string
		base, size uint64
		ok         bool
	}{
		{"same range", base, size, false},
		{"overlaps the start", base - 0x10, 0x20, false},
		{"overlaps the end", base + size - 1, 0x10, false},
		{"inside", base + 0x10, 0x10, false},
		{"contains", base - 0x10, size + 0x20, false},
		{"first byte only", base, 1, false},
		{"last byte only", base + size - 1, 1, false},
		{"zero size inside", base + 0x10, 0, false},
		{"zero size elsewhere", 0x9000, 0, false},
		{"wraps past 2^64", math.MaxUint64 - 0xf, 0x20, false},
		{"adjacent below", base - 0x100, 0x100, true},
		{"adjacent above", base + size, 0x100, true},
		{"far away", 0x10_0000, 0x1000, true},
		{"one byte just below", base - 1, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b Bus
			if err := b.Add(base, size, &stubDevice{"first"}); err != nil {
				t.Fatalf("Add(first): %v", err)
			}
			err := b.Add(tt.base, tt.size, &stubDevice{"second"})
			if tt.ok && err != nil {
				t.Errorf("Add(%#x, %#x) = %v, want success", tt.base, tt.size, err)
			}
			if !tt.ok {
				if err == nil {
					t.Errorf("Add(%#x, %#x) succeeded, want an error", tt.base, tt.size)
				} else if !strings.Contains(err.Error(), "second") {
					t.Errorf("error %q does not name the device being added", err)
				}
				if got := len(b.Devices()); got != 1 {
					t.Errorf("after a failed Add the bus has %d devices, want 1", got)
				}
			}
		})
	}
}

func TestBusFindEdges(t *testing.T) {
	// Added out of address order, with two of them adjacent.
	layout := []struct {
		base, size uint64
		dev        *stubDevice
	}{
		{0x0900_0000, 0x1000, &stubDevice{"uart"}},
		{0x0800_0000, 0x1_0000, &stubDevice{"gicd"}},
		{0x0901_0000, 0x1000, &stubDevice{"marker"}},
		{0x0901_1000, 0x10, &stubDevice{"adjacent"}},
		{0, 1, &stubDevice{"at zero"}},
	}
	var b Bus
	for _, l := range layout {
		if err := b.Add(l.base, l.size, l.dev); err != nil {
			t.Fatalf("Add(%s): %v", l.dev.name, err)
		}
	}
	owner := func(addr uint64) Device {
		for _, l := range layout {
			if addr >= l.base && addr-l.base < l.size {
				return l.dev
			}
		}
		return nil
	}
	for _, l := range layout {
		for _, probe := range []struct {
			addr uint64
			what string
		}{
			{l.base, "first byte"},
			{l.base + l.size - 1, "last byte"},
			{l.base + l.size/2, "middle"},
			{l.base - 1, "byte below"},
			{l.base + l.size, "byte above"},
		} {
			if probe.addr == math.MaxUint64 && probe.what == "byte below" {
				continue // below zero does not exist
			}
			dev, off := b.Find(probe.addr)
			want := owner(probe.addr)
			t.Run(fmt.Sprintf("%s/%s", l.dev.name, probe.what), func(t *testing.T) {
				if want == nil {
					if dev != nil {
						t.Errorf("Find(%#x) = %s, want nil", probe.addr, dev.Name())
					}
					return
				}
				if dev != want {
					t.Fatalf("Find(%#x) = %v, want %s", probe.addr, dev, want.Name())
				}
				var base uint64
				for _, l2 := range layout {
					if l2.dev == want {
						base = l2.base
					}
				}
				if off != probe.addr-base {
					t.Errorf("Find(%#x) offset = %#x, want %#x", probe.addr, off, probe.addr-base)
				}
			})
		}
	}
	if dev, _ := b.Find(math.MaxUint64); dev != nil {
		t.Errorf("Find(max) = %s, want nil", dev.Name())
	}
}

func TestBusFindEmpty(t *testing.T) {
	var b Bus
	for _, a := range []uint64{0, 0x0900_0000, math.MaxUint64} {
		if dev, _ := b.Find(a); dev != nil {
			t.Errorf("empty bus: Find(%#x) = %s", a, dev.Name())
		}
	}
}

func TestBusDevicesInAddressOrder(t *testing.T) {
	var b Bus
	bases := []uint64{0x5000, 0x1000, 0x9000, 0x3000}
	for _, base := range bases {
		if err := b.Add(base, 0x1000, &stubDevice{fmt.Sprintf("%#x", base)}); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	for _, d := range b.Devices() {
		names = append(names, d.Name())
	}
	if got, want := strings.Join(names, " "), "0x1000 0x3000 0x5000 0x9000"; got != want {
		t.Errorf("Devices() = %s, want %s", got, want)
	}
}

// TestBusLookupAgreesWithScan places random disjoint ranges (with gaps,
// adjacent ones, and sizes from 1 byte up) and checks Lookup against a
// linear scan for addresses at, around and between every edge.
func TestBusLookupAgreesWithScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 200; round++ {
		var b Bus
		type placed struct {
			base, size uint64
			dev        Device
		}
		var all []placed
		at := uint64(rng.IntN(0x1000))
		for n := rng.IntN(12); n > 0; n-- {
			size := uint64(1 + rng.IntN(0x2000))
			d := &stubDevice{name: fmt.Sprint("dev", len(all))}
			if err := b.Add(at, size, d); err != nil {
				t.Fatal(err)
			}
			all = append(all, placed{at, size, d})
			at += size + uint64(rng.IntN(3))*uint64(rng.IntN(0x100)) // sometimes adjacent
		}
		scan := func(addr uint64) (Device, uint64) {
			for _, p := range all {
				if addr >= p.base && addr-p.base < p.size {
					return p.dev, addr - p.base
				}
			}
			return nil, 0
		}
		var probes []uint64
		for _, p := range all {
			for _, a := range []uint64{p.base - 1, p.base, p.base + 1, p.base + p.size/2, p.base + p.size - 1, p.base + p.size} {
				probes = append(probes, a)
			}
		}
		probes = append(probes, 0, math.MaxUint64, at+0x10000)
		devs := b.Devices()
		for _, a := range probes {
			wantDev, wantOff := scan(a)
			dev, off, idx := b.Lookup(a)
			if dev != wantDev || (dev != nil && off != wantOff) {
				t.Fatalf("round %d: Lookup(%#x) = %v+%#x, a scan finds %v+%#x", round, a, dev, off, wantDev, wantOff)
			}
			if dev == nil && idx != -1 || dev != nil && (idx < 0 || idx >= len(devs) || devs[idx] != dev) {
				t.Fatalf("round %d: Lookup(%#x) index %d does not name %v in Devices()", round, a, idx, dev)
			}
		}
	}
}
