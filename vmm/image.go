package vmm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
)

// ErrNotImage is wrapped by ParseImage's error when the data has no arm64
// Image header at all. The caller may then treat the file as a flat binary;
// every other ParseImage error means "an Image, but one mvm cannot boot".
var ErrNotImage = errors.New("not an arm64 Image")

// The arm64 Image header, Linux Documentation/arch/arm64/booting.rst,
// section "4. Call the kernel image". All fields are little-endian since
// v3.17:
//
//	u32 code0        @0   executable code (or "MZ" of an EFI stub's PE header)
//	u32 code1        @4   executable code
//	u64 text_offset  @8   image load offset from a 2 MiB aligned base
//	u64 image_size   @16  effective image size, 0 before v3.17
//	u64 flags        @24  endianness, page size, physical placement
//	u64 res2..res4   @32  reserved
//	u32 magic        @56  0x644d5241, "ARM\x64"
//	u32 res5         @60  offset of the PE header for EFI
const (
	imageHeaderSize  = 64
	imageMagicOffset = 56
	imageMagic       = 0x644d5241
	// imageBaseAlign: the Image goes text_offset bytes above a 2 MiB
	// aligned base.
	imageBaseAlign = 2 << 20
	// imageLegacyTextOffset: "Where image_size is zero, text_offset can be
	// assumed to be 0x80000" (the field's endianness was unspecified).
	imageLegacyTextOffset = 0x80000
	// imageLegacySlack is what mvm reserves after a pre-v3.17 Image's file
	// contents, whose real footprint (BSS, initial page tables) is not
	// recorded: booting.rst only says to keep as much memory free after
	// the image as possible. Kernels of that era had a few MiB of BSS and
	// page tables, so 32 MiB beyond the 2 MiB-rounded file is generous.
	imageLegacySlack = 32 << 20
	// imageTextAlign: kernels with a non-zero TEXT_OFFSET required it to
	// be 4 KiB aligned (head.S refused to build otherwise), and even the
	// randomized offsets (ARM64_RANDOMIZE_TEXT_OFFSET) stayed below 2 MiB;
	// since v5.10 it is 0. Anything else is not a kernel mvm can place.
	imageTextAlign = 4096
)

// Flags bits (booting.rst, "The flags field").
const (
	imageFlagBigEndian     = 1 << 0
	imageFlagPageSizeShift = 1
	imageFlagPageSizeMask  = 3
	imageFlagPhysAnywhere  = 1 << 3
)

// ImageHeader is a validated arm64 Linux Image header.
type ImageHeader struct {
	Code0, Code1 uint32
	// TextOffset is where the Image goes above a 2 MiB aligned base. For
	// a pre-v3.17 Image (ImageSize 0) it is 0x80000 whatever the field
	// holds, as booting.rst says to assume.
	TextOffset uint64
	// ImageSize is the header's image_size: the bytes from the start of
	// the Image the kernel uses, BSS included. 0 for pre-v3.17 kernels.
	ImageSize uint64
	Flags     uint64
	// PEOffset is res5, the offset of the PE/COFF header when the Image
	// carries an EFI stub.
	PEOffset uint32
}

// IsImage reports whether hdr (the first bytes of a kernel file) starts
// with an arm64 Image header, i.e. has the "ARM\x64" magic at offset 56.
// It is the cheap test for choosing between an Image and a flat binary.
func IsImage(hdr []byte) bool {
	return len(hdr) >= imageHeaderSize &&
		binary.LittleEndian.Uint32(hdr[imageMagicOffset:]) == imageMagic
}

// ParseImage reads and validates the Image header from the size-byte file
// r. It returns an error wrapping ErrNotImage when there is no header, and
// a plain error when the header describes a kernel mvm cannot boot: a
// big-endian kernel (flags bit 0, or a byte-swapped text_offset in a
// pre-v3.17 header), or a text_offset that is not a 4 KiB
// aligned value below 2 MiB. Reserved flag bits are ignored, as later
// kernels may define them. The messages are one sentence without the file
// name, so callers prefix it.
func ParseImage(r io.ReaderAt, size int64) (ImageHeader, error) {
	if r == nil {
		return ImageHeader{}, errors.New("read arm64 Image header: no reader")
	}
	if size < imageHeaderSize {
		return ImageHeader{}, fmt.Errorf("%w: the file is %d bytes, shorter than the 64-byte Image header", ErrNotImage, max(size, 0))
	}
	var b [imageHeaderSize]byte
	if _, err := r.ReadAt(b[:], 0); err != nil {
		return ImageHeader{}, fmt.Errorf("read arm64 Image header: %w", err)
	}
	le := binary.LittleEndian
	if m := le.Uint32(b[imageMagicOffset:]); m != imageMagic {
		return ImageHeader{}, fmt.Errorf("%w: no \"ARM\\x64\" magic at offset 56 (found %#08x)", ErrNotImage, m)
	}
	h := ImageHeader{
		Code0:      le.Uint32(b[0:]),
		Code1:      le.Uint32(b[4:]),
		TextOffset: le.Uint64(b[8:]),
		ImageSize:  le.Uint64(b[16:]),
		Flags:      le.Uint64(b[24:]),
		PEOffset:   le.Uint32(b[60:]),
	}
	if h.BigEndian() {
		return ImageHeader{}, errors.New("the arm64 Image is a big-endian kernel (header flags bit 0 set); mvm boots only little-endian kernels")
	}
	if h.ImageSize == 0 {
		// Pre-v3.17: flags was a reserved zero field, and text_offset is
		// 0x80000 in the kernel's own byte order, so a big-endian kernel
		// shows as 0x80000 byte-swapped.
		if h.TextOffset == bits.ReverseBytes64(imageLegacyTextOffset) {
			return ImageHeader{}, errors.New("the arm64 Image is a big-endian kernel (pre-3.17 header with a big-endian text_offset); mvm boots only little-endian kernels")
		}
		h.TextOffset = imageLegacyTextOffset
		return h, nil
	}
	if h.TextOffset%imageTextAlign != 0 || h.TextOffset >= imageBaseAlign {
		return ImageHeader{}, fmt.Errorf("the arm64 Image has text_offset %#x; a kernel's is a 4 KiB aligned value below 2 MiB (0 since Linux 5.10)", h.TextOffset)
	}
	return h, nil
}

// BigEndian reports flags bit 0: the kernel was built big-endian.
func (h ImageHeader) BigEndian() bool { return h.Flags&imageFlagBigEndian != 0 }

// PageSize is the kernel's page size from flags bits 1-2: 4096, 16384 or
// 65536, or 0 when unspecified (always so before v3.17).
func (h ImageHeader) PageSize() uint64 {
	switch (h.Flags >> imageFlagPageSizeShift) & imageFlagPageSizeMask {
	case 1:
		return 4 << 10
	case 2:
		return 16 << 10
	case 3:
		return 64 << 10
	}
	return 0
}

// PlaceAnywhere reports flags bit 3. When set, the 2 MiB aligned base may
// be anywhere in physical memory; when clear, it should be as close as
// possible to the base of DRAM, because the kernel cannot reach memory
// below it through the linear map. mvm loads at the base of RAM either way.
func (h ImageHeader) PlaceAnywhere() bool { return h.Flags&imageFlagPhysAnywhere != 0 }

// HasEFIStub reports whether code0 starts with "MZ", the DOS/PE signature
// an Image built with an EFI stub carries (Debian's kernels do). mvm does
// not use the stub: code0/code1 still branch to the kernel's entry.
func (h ImageHeader) HasEFIStub() bool { return h.Code0&0xffff == 0x5a4d }

// LoadAddr is where the Image goes in RAM starting at ramBase: the first
// 2 MiB aligned address at or above ramBase, plus TextOffset. Entry is the
// Image's first byte.
func (h ImageHeader) LoadAddr(ramBase uint64) uint64 {
	base := ramBase
	if rem := ramBase % imageBaseAlign; rem != 0 {
		base += imageBaseAlign - rem
	}
	return base + h.TextOffset
}

// LoadSize is how many bytes from LoadAddr the kernel needs free, for an
// Image file of fileSize bytes. It is image_size ("at least image_size
// bytes from the start of the image must be free for use by the kernel"),
// or the file size when that is larger (bytes appended after the kernel,
// e.g. a signature, are still copied). A pre-v3.17 Image does not say: mvm
// reserves the file rounded up to 2 MiB plus 32 MiB.
func (h ImageHeader) LoadSize(fileSize uint64) uint64 {
	if h.ImageSize == 0 {
		n := fileSize
		if rem := n % imageBaseAlign; rem != 0 {
			n += imageBaseAlign - rem
		}
		return n + imageLegacySlack
	}
	return max(h.ImageSize, fileSize)
}
