package vmm

import (
	"encoding/binary"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mvm-dev/mvm/runsummary"
)

const (
	tKiB = uint64(1) << 10
	tMiB = uint64(1) << 20
	tGiB = uint64(1) << 30
)

func TestRAMRegions(t *testing.T) {
	sizes := []uint64{MinMemory, 512 * tMiB, 2*tGiB - PageSize, 2 * tGiB, 2*tGiB + PageSize, 3 * tGiB, 64 * tGiB, MaxMemory}
	for _, size := range sizes {
		rs := RAMRegions(size)
		var total uint64
		for _, r := range rs {
			total += r.Size
			if r.Size == 0 {
				t.Errorf("RAMRegions(%s) has an empty region: %+v", FormatSize(size), rs)
			}
		}
		if total != size {
			t.Errorf("RAMRegions(%s) = %+v: %d bytes in all", FormatSize(size), rs, total)
		}
		if rs[0].Base != 1*tGiB {
			t.Errorf("RAMRegions(%s): RAM starts at %#x, want 1 GiB", FormatSize(size), rs[0].Base)
		}
		// Up to 2 GiB lies in [1 GiB, 3 GiB); the rest starts at 4 GiB.
		if size <= 2*tGiB {
			if len(rs) != 1 {
				t.Errorf("RAMRegions(%s) = %+v, want one region", FormatSize(size), rs)
			}
			continue
		}
		if len(rs) != 2 || rs[0].End() != 3*tGiB || rs[1].Base != 4*tGiB || rs[1].Size != size-2*tGiB {
			t.Errorf("RAMRegions(%s) = %+v, want [1G,3G) + %s at 4G", FormatSize(size), rs, FormatSize(size-2*tGiB))
		}
		if end := rs[len(rs)-1].End(); end > 1<<40 {
			t.Errorf("RAMRegions(%s) ends at %#x, beyond the 40-bit IPA space", FormatSize(size), end)
		}
	}
}

// RAM never overlaps a device window, whatever its size.
func TestRAMRegionsAvoidDevices(t *testing.T) {
	devs := map[string]Region{
		"GIC distributor":    {GICDistBase, GICDistSize},
		"UART":               {UARTBase, UARTSize},
		"marker":             {MarkerBase, MarkerSize},
		"RTC":                {RTCBase, RTCSize},
		"GIC redistributors": {GICRedistBase, runsummary.MaxCPUs * GICRedistSize},
		// hype's virtio-mmio bus: 4 KiB per device from 0xd000_0000.
		"virtio-mmio": {VirtioBase, 256 * 0x1000},
	}
	for _, size := range []uint64{MinMemory, 2 * tGiB, 2*tGiB + PageSize, MaxMemory} {
		for _, r := range RAMRegions(size) {
			for name, d := range devs {
				if r.Base < d.End() && d.Base < r.End() {
					t.Errorf("RAMRegions(%s): %+v overlaps the %s at %+v", FormatSize(size), r, name, d)
				}
			}
		}
	}
}

func inside(r, ram Region) bool {
	return r.Base >= ram.Base && r.Size <= ram.End()-r.Base
}

func overlap(a, b Region) bool {
	return a.Size != 0 && b.Size != 0 && a.Base < b.End() && b.Base < a.End()
}

// checkPlacement asserts what booting.rst and the memory map ask of a
// successful Place.
func checkPlacement(t *testing.T, ram Region, koff, ksize, isize uint64, p Placement) {
	t.Helper()
	what := func() string {
		return FormatSize(ram.Size) + " RAM, kernel " + FormatSize(ksize) + " at +" + FormatSize(koff) + ", initrd " + FormatSize(isize)
	}
	// The kernel at text_offset above the (2 MiB aligned) RAM base, and
	// entered at its first byte.
	if p.Kernel.Base != ram.Base+koff || p.Kernel.Size != ksize || p.Entry != p.Kernel.Base {
		t.Errorf("%s: kernel %+v entry %#x, want %#x+%#x entered at its start", what(), p.Kernel, p.Entry, ram.Base+koff, ksize)
	}
	// booting.rst: the DTB is at most 2 MiB and lies in a 2 MiB block of
	// its own; mvm puts it in the top 2 MiB-aligned block of RAM.
	if p.DTB.Base%(2*tMiB) != 0 || p.DTB.Size == 0 || p.DTB.Size > 2*tMiB {
		t.Errorf("%s: DTB %+v is not a 2 MiB-aligned region of at most 2 MiB", what(), p.DTB)
	}
	if !inside(p.DTB, ram) {
		t.Errorf("%s: DTB %+v outside RAM %+v", what(), p.DTB, ram)
	} else if ram.End()-p.DTB.Base >= 4*tMiB {
		t.Errorf("%s: DTB at %#x is not in the top 2 MiB block of RAM ending at %#x", what(), p.DTB.Base, ram.End())
	}
	if !inside(p.Kernel, ram) {
		t.Errorf("%s: kernel %+v outside RAM %+v", what(), p.Kernel, ram)
	}
	if overlap(p.Kernel, p.DTB) {
		t.Errorf("%s: kernel %+v overlaps DTB %+v", what(), p.Kernel, p.DTB)
	}
	if isize == 0 {
		if p.Initrd.Size != 0 {
			t.Errorf("%s: initrd %+v without an initrd", what(), p.Initrd)
		}
		return
	}
	if p.Initrd.Size != isize {
		t.Errorf("%s: initrd size %d, want %d", what(), p.Initrd.Size, isize)
	}
	if p.Initrd.Base%PageSize != 0 {
		t.Errorf("%s: initrd at %#x is not page aligned", what(), p.Initrd.Base)
	}
	if !inside(p.Initrd, ram) {
		t.Errorf("%s: initrd %+v outside RAM %+v", what(), p.Initrd, ram)
	}
	if overlap(p.Initrd, p.Kernel) || overlap(p.Initrd, p.DTB) {
		t.Errorf("%s: initrd %+v overlaps kernel %+v or DTB %+v", what(), p.Initrd, p.Kernel, p.DTB)
	}
	// Just below the DTB: less than a page of gap.
	if p.Initrd.End() > p.DTB.Base || p.DTB.Base-p.Initrd.End() >= PageSize {
		t.Errorf("%s: initrd %+v is not just below the DTB at %#x", what(), p.Initrd, p.DTB.Base)
	}
}

func TestPlace(t *testing.T) {
	tests := []struct {
		name             string
		mem, koff, ksize uint64
		isize            uint64
	}{
		{"payload", 512 * tMiB, 0, PageSize, 0},
		{"payload in the minimum memory", MinMemory, 0, PageSize, 0},
		{"Image at text_offset 0x80000", 512 * tMiB, 0x80000, 40 * tMiB, 0},
		{"Image with initrd", 1 * tGiB, 0, 48 * tMiB, 20*tMiB + 12345},
		{"tiny initrd", 256 * tMiB, 0x1000, 30 * tMiB, 1},
		{"page-sized initrd", 256 * tMiB, 0, 30 * tMiB, PageSize},
		{"low RAM full", 2 * tGiB, 0, 64 * tMiB, 100 * tMiB},
		{"high RAM too", 8 * tGiB, 0, 64 * tMiB, 300 * tMiB},
		{"kernel filling low RAM to the DTB", 64 * tMiB, 0, 60 * tMiB, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ram := RAMRegions(tt.mem)[0]
			p, err := Place(ram, tt.koff, tt.ksize, tt.isize)
			if err != nil {
				t.Fatalf("Place: %v", err)
			}
			checkPlacement(t, ram, tt.koff, tt.ksize, tt.isize, p)
		})
	}
}

func TestPlaceTooSmall(t *testing.T) {
	tests := []struct {
		name             string
		mem, koff, ksize uint64
		isize            uint64
		says             []string
	}{
		{"kernel larger than RAM", MinMemory, 0, 64 * tMiB, 0, []string{"--memory", "kernel"}},
		{"kernel reaching into the DTB", 64 * tMiB, 0, 63 * tMiB, 0, []string{"--memory", "kernel"}},
		{"text_offset pushes it over", 64 * tMiB, 0x1f_f000, 61 * tMiB, 0, []string{"--memory"}},
		{"kernel and initrd", 64 * tMiB, 0, 40 * tMiB, 30 * tMiB, []string{"--memory", "initrd"}},
		{"initrd alone exceeds RAM", 64 * tMiB, 0, PageSize, 100 * tMiB, []string{"--memory", "initrd"}},
		{"initrd equal to RAM", 64 * tMiB, 0, PageSize, 64 * tMiB, []string{"--memory", "initrd"}},
		{"initrd larger than all of low RAM", 4 * tGiB, 0, PageSize, 3 * tGiB, []string{"--memory", "initrd"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ram := RAMRegions(tt.mem)[0]
			p, err := Place(ram, tt.koff, tt.ksize, tt.isize)
			if err == nil {
				t.Fatalf("Place succeeded: %+v", p)
			}
			for _, s := range tt.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
			if !strings.Contains(err.Error(), "give more --memory") {
				t.Errorf("error %q does not say to give more --memory", err)
			}
		})
	}
}

// Whenever Place succeeds the regions are inside RAM and disjoint, and
// whenever everything fits with room to spare it succeeds.
func TestPlaceProperty(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	var ok, failed int
	for i := 0; i < 20000; i++ {
		mem := MinMemory + uint64(r.Int63n(int64(4*tGiB)))&^(PageSize-1)
		if r.Intn(10) == 0 {
			mem = MinMemory + uint64(r.Int63n(int64(MaxMemory-MinMemory)))&^(PageSize-1)
		}
		ram := RAMRegions(mem)[0]
		koff := uint64(r.Intn(512)) * 4096 // 4 KiB aligned, below 2 MiB
		if r.Intn(3) == 0 {
			koff = 0
		}
		scale := ram.Size * 2
		ksize := uint64(r.Int63n(int64(scale))) + 1
		if r.Intn(2) == 0 {
			ksize = uint64(r.Int63n(int64(64*tMiB))) + 1
		}
		var isize uint64
		switch r.Intn(3) {
		case 1:
			isize = uint64(r.Int63n(int64(scale))) + 1
		case 2:
			isize = uint64(r.Int63n(int64(64*tMiB))) + 1
		}
		p, err := Place(ram, koff, ksize, isize)
		if err != nil {
			failed++
			need := alignUp(koff+ksize, PageSize) + alignUp(isize, PageSize) + PageSize + 4*tMiB
			if need <= ram.Size {
				t.Errorf("Place(%+v, %#x, %#x, %#x) failed though %d bytes suffice: %v", ram, koff, ksize, isize, need, err)
			}
			if !strings.Contains(err.Error(), "--memory") {
				t.Errorf("error %q does not mention --memory", err)
			}
			continue
		}
		ok++
		checkPlacement(t, ram, koff, ksize, isize, p)
		if t.Failed() {
			t.Fatalf("stopping after the first bad placement")
		}
	}
	if ok < 2000 || failed < 2000 {
		t.Errorf("property test saw %d successes and %d failures: the generator is off", ok, failed)
	}
}

// A kernel size that wraps the end address past 2^64 must not pass as
// fitting. ParseImage does not bound image_size, so an Image header can
// ask for this.
func TestPlaceKernelSizeOverflow(t *testing.T) {
	ram := RAMRegions(64 << 20)[0]
	for _, ksize := range []uint64{math.MaxUint64 - ram.Base + 1, math.MaxUint64 - ram.Base + 1 + 4096, math.MaxUint64} {
		if p, err := Place(ram, 0, ksize, 0); err == nil {
			t.Errorf("Place(64M RAM, kernel %#x bytes) succeeded: %+v", ksize, p)
		}
		if p, err := Place(ram, 0, ksize, 1<<20); err == nil {
			t.Errorf("Place(64M RAM, kernel %#x bytes, 1M initrd) succeeded: %+v", ksize, p)
		}
	}
}

// The same through prepare: an Image whose header claims an image_size
// that wraps the address space is accepted and "placed".
func TestPrepareImageSizeOverflow(t *testing.T) {
	hdr := make([]byte, 4096)
	le := binary.LittleEndian
	le.PutUint32(hdr[0:], 0x14000000)                // b .
	le.PutUint64(hdr[8:], 0)                         // text_offset
	le.PutUint64(hdr[16:], math.MaxUint64-RAMBase+1) // image_size: wraps to 0 at RAMBase
	le.PutUint64(hdr[24:], 0x2)                      // LE, 4K pages
	le.PutUint32(hdr[56:], 0x644d5241)
	k := filepath.Join(t.TempDir(), "Image")
	if err := os.WriteFile(k, hdr, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := validConfig()
	cfg.Kernel = k
	cfg.Memory = 64 << 20
	if p, err := prepare(cfg); err == nil {
		t.Errorf("prepare accepted an Image with image_size %#x in 64M: kernel placed at %+v", le.Uint64(hdr[16:]), p.place.Kernel)
	}
}
