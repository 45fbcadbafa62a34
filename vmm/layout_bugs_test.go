package vmm

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"
)

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
