package vmm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
)

// imageHeaderBytes builds a synthetic 64-byte arm64 Image header.
func imageHeaderBytes(textOffset, imageSize, flags uint64) []byte {
	b := make([]byte, 64)
	le := binary.LittleEndian
	le.PutUint32(b[0:], 0x91005a4d) // "MZ" + add x13, x18, #0x16, as EFI-stub kernels start
	le.PutUint32(b[4:], 0x14000400) // b +0x1000
	le.PutUint64(b[8:], textOffset)
	le.PutUint64(b[16:], imageSize)
	le.PutUint64(b[24:], flags)
	le.PutUint32(b[56:], 0x644d5241)
	le.PutUint32(b[60:], 0x40)
	return b
}

func parseBytes(b []byte) (ImageHeader, error) {
	return ParseImage(bytes.NewReader(b), int64(len(b)))
}

func TestParseImageSynthetic(t *testing.T) {
	const mib = 1 << 20
	hdr := imageHeaderBytes(0, 40*mib, 0xa)
	if !IsImage(hdr) {
		t.Fatal("IsImage(valid header) = false")
	}
	file := append(hdr, make([]byte, 30*mib-64)...)
	h, err := parseBytes(file)
	if err != nil {
		t.Fatalf("ParseImage: %v", err)
	}
	if h.TextOffset != 0 || h.ImageSize != 40*mib || h.Flags != 0xa || h.PEOffset != 0x40 {
		t.Errorf("header = %+v", h)
	}
	if h.BigEndian() || h.PageSize() != 4096 || !h.PlaceAnywhere() || !h.HasEFIStub() {
		t.Errorf("flags decode: be=%v page=%d anywhere=%v efi=%v", h.BigEndian(), h.PageSize(), h.PlaceAnywhere(), h.HasEFIStub())
	}
	if got := h.LoadAddr(0x4000_0000); got != 0x4000_0000 {
		t.Errorf("LoadAddr(1 GiB) = %#x", got)
	}
	if got := h.LoadSize(uint64(len(file))); got != 40*mib {
		t.Errorf("LoadSize = %d, want image_size", got)
	}
	// A file longer than image_size (e.g. an appended signature) is
	// copied whole, so it needs its full length.
	if got := h.LoadSize(50 * mib); got != 50*mib {
		t.Errorf("LoadSize(larger file) = %d", got)
	}

	h2, err := parseBytes(imageHeaderBytes(0x80000, 20*mib, 0x4))
	if err != nil {
		t.Fatal(err)
	}
	if h2.PageSize() != 16384 || h2.PlaceAnywhere() {
		t.Errorf("flags 0x4: page %d anywhere %v", h2.PageSize(), h2.PlaceAnywhere())
	}
	// The base rounds up to 2 MiB, then text_offset is added.
	if got := h2.LoadAddr(0x4010_0000); got != 0x4020_0000+0x80000 {
		t.Errorf("LoadAddr(unaligned base) = %#x", got)
	}
	for flags, want := range map[uint64]uint64{0: 0, 2: 4096, 4: 16384, 6: 65536, 0xf0: 0} {
		h, err := parseBytes(imageHeaderBytes(0, mib, flags))
		if err != nil {
			t.Fatalf("flags %#x: %v", flags, err)
		}
		if h.PageSize() != want {
			t.Errorf("flags %#x: PageSize %d, want %d", flags, h.PageSize(), want)
		}
	}
}

func TestParseImageLegacy(t *testing.T) {
	// Before v3.17: image_size 0, text_offset 0x80000 in the kernel's byte
	// order, no flags. The size is unknown, so mvm reserves the file
	// rounded to 2 MiB plus a margin.
	h, err := parseBytes(imageHeaderBytes(0x80000, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if h.TextOffset != 0x80000 || h.PageSize() != 0 {
		t.Errorf("legacy header = %+v", h)
	}
	if got, want := h.LoadSize(5<<20+1), uint64(6<<20+32<<20); got != want {
		t.Errorf("legacy LoadSize = %#x, want %#x", got, want)
	}
	// Garbage in a legacy text_offset is overridden by the documented
	// value.
	if h, err := parseBytes(imageHeaderBytes(0x1234, 0, 0)); err != nil || h.TextOffset != 0x80000 {
		t.Errorf("legacy odd text_offset: %+v, %v", h, err)
	}
}

func TestParseImageErrors(t *testing.T) {
	cases := []struct {
		name     string
		data     []byte
		notImage bool
		want     string
	}{
		{"empty", nil, true, "shorter than the 64-byte"},
		{"short", imageHeaderBytes(0, 1, 0xa)[:63], true, "63 bytes"},
		{"no magic", make([]byte, 4096), true, `no "ARM\x64" magic at offset 56`},
		{"pe without magic", append([]byte("MZ"), make([]byte, 100)...), true, "magic"},
		{"big endian", imageHeaderBytes(0, 1<<20, 0xb), false, "big-endian"},
		{"big endian legacy", imageHeaderBytes(0x0000_0800_0000_0000, 0, 0), false, "big-endian"},
		// Found by FuzzParseImage: image_size 0 must not skip the flags check.
		{"big endian flag, no image_size", imageHeaderBytes(0x3030, 0, 0x3030303030303031), false, "flags bit 0"},
		{"text_offset unaligned", imageHeaderBytes(0x80001, 1<<20, 0xa), false, "text_offset 0x80001"},
		{"text_offset huge", imageHeaderBytes(2<<20, 1<<20, 0xa), false, "below 2 MiB"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseBytes(tc.data)
			if err == nil {
				t.Fatal("ParseImage succeeded")
			}
			if errors.Is(err, ErrNotImage) != tc.notImage {
				t.Errorf("errors.Is(err, ErrNotImage) = %v, want %v (err %q)", !tc.notImage, tc.notImage, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			if IsImage(tc.data) && tc.notImage {
				t.Errorf("IsImage true for data ParseImage calls not an Image")
			}
		})
	}
}

// failingReader fails every read, like a file that vanished.
type failingReader struct{}

func (failingReader) ReadAt([]byte, int64) (int, error) { return 0, io.ErrUnexpectedEOF }

func TestParseImageReadError(t *testing.T) {
	_, err := ParseImage(failingReader{}, 1<<20)
	if err == nil || errors.Is(err, ErrNotImage) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("read error = %v; want the wrapped I/O error, not ErrNotImage", err)
	}
	if _, err := ParseImage(nil, 64); err == nil || errors.Is(err, ErrNotImage) {
		t.Errorf("nil reader: %v", err)
	}
	// A size larger than the data also surfaces as a read error.
	_, err = ParseImage(bytes.NewReader(imageHeaderBytes(0, 1, 0xa)[:10]), 64)
	if err == nil || errors.Is(err, ErrNotImage) {
		t.Errorf("short reader: %v", err)
	}
}

// TestParseRealImage checks the Debian kernel the lab boots (make lab
// fetches it): an EFI-stub Image, text_offset 0, 4K pages, flags 0xa.
func TestParseRealImage(t *testing.T) {
	const path = "../.cache/lab/vmlinuz"
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		t.Skipf("%s not present (fetched by the lab setup)", path)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	h, err := ParseImage(f, st.Size())
	if err != nil {
		t.Fatalf("ParseImage(%s): %v", path, err)
	}
	t.Logf("%s: %d bytes, %+v", path, st.Size(), h)
	if h.TextOffset != 0 {
		t.Errorf("text_offset = %#x, want 0", h.TextOffset)
	}
	if h.PageSize() != 4096 {
		t.Errorf("page size = %d, want 4096", h.PageSize())
	}
	if h.Flags != 0xa || h.BigEndian() || !h.PlaceAnywhere() {
		t.Errorf("flags = %#x", h.Flags)
	}
	if !h.HasEFIStub() {
		t.Errorf("no MZ at offset 0")
	}
	if h.ImageSize <= uint64(st.Size()) {
		t.Errorf("image_size %d is not above the file size %d (BSS is not in the file)", h.ImageSize, st.Size())
	}
	if h.LoadSize(uint64(st.Size())) != h.ImageSize {
		t.Errorf("LoadSize = %d, want image_size %d", h.LoadSize(uint64(st.Size())), h.ImageSize)
	}
	hdr := make([]byte, 64)
	if _, err := f.ReadAt(hdr, 0); err != nil || !IsImage(hdr) {
		t.Errorf("IsImage(real header) false (%v)", err)
	}
}

// FuzzParseImage: no input may panic, a success must agree with IsImage,
// and the accessors must be safe on whatever was accepted.
func FuzzParseImage(f *testing.F) {
	f.Add(imageHeaderBytes(0, 1<<20, 0xa), int64(0))
	f.Add(imageHeaderBytes(0x80000, 0, 0), int64(0))
	f.Add(imageHeaderBytes(0, 1<<20, 0xb), int64(0))
	f.Add([]byte("MZ"), int64(70))
	f.Fuzz(func(t *testing.T, data []byte, extra int64) {
		size := int64(len(data)) + extra%128
		h, err := ParseImage(bytes.NewReader(data), size)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		if !IsImage(data) {
			t.Fatalf("ParseImage accepted data IsImage rejects")
		}
		if h.BigEndian() || h.TextOffset%4096 != 0 || h.TextOffset >= 2<<20 {
			t.Fatalf("accepted an unbootable header %+v", h)
		}
		_ = h.PageSize()
		_ = h.PlaceAnywhere()
		_ = h.HasEFIStub()
		if a := h.LoadAddr(0x4000_0000); a < 0x4000_0000 || a-0x4000_0000 != h.TextOffset {
			t.Fatalf("LoadAddr = %#x for text_offset %#x", a, h.TextOffset)
		}
		if h.LoadSize(uint64(len(data))) < uint64(len(data)) {
			t.Fatalf("LoadSize smaller than the file")
		}
	})
}
