package vmm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// kernelFormats is what --kernel accepts, for the error that meets a file
// that is none of them.
const kernelFormats = "an arm64 Image, a gzip'd or zstd'd Image (Image.gz, Image.zst), an EFI zboot vmlinuz with a gzip or zstd payload, a kernel build tree, or a flat binary"

// Kernel formats (Kernel.Format).
const (
	FormatImage     = "Image"
	FormatBinary    = "flat binary"
	FormatImageGzip = "Image.gz"
	FormatImageZstd = "Image.zst"
	FormatZbootGzip = "EFI zboot (gzip)"
	FormatZbootZstd = "EFI zboot (zstd)"
)

// MaxKernelSize bounds a compressed kernel's decompressed size, whatever
// --memory allows: a distribution arm64 Image is 30-70 MiB, a debug build
// a few hundred. It is what stops a decompression bomb; the guest RAM
// (the kernel must fit in it) is the other bound.
const MaxKernelSize = 1 << 30

// The EFI zboot header, Linux drivers/firmware/efi/libstub/zboot-header.S
// (v6.1+; Documentation/arch/arm64/booting.rst does not describe it). A
// PE/COFF executable whose EFI stub decompresses the payload, an Image,
// itself; mvm reads the payload directly:
//
//	@0   "MZ" and 2 bytes   MS-DOS header magic
//	@4   "zimg"             image type
//	@8   le32               payload offset from the start of the file
//	@12  le32               payload size (without the 4-byte size trailer
//	                        the *_with_size methods append: Makefile.zboot's
//	                        zboot-size-len)
//	@16  2 x le32           reserved
//	@24  NUL-padded string  compression: "gzip", "zstd22" (or "zstd"
//	                        since v6.13), "lzma", "lzo", "lz4", "xzkern"
//	@56  le32               LINUX_PE_MAGIC (not the Image's "ARM\x64")
const (
	zbootTypeOff  = 4
	zbootOffOff   = 8
	zbootSizeOff  = 12
	zbootCompOff  = 24
	zbootCompEnd  = 56
	zbootHeaderSz = 64
)

// compression names the compressor whose magic d starts with, or "". The
// magics are those of the compressors a kernel build offers
// (scripts/Makefile.lib: cmd_gzip, cmd_zstd22, cmd_xzkern, cmd_lzo,
// cmd_lz4, cmd_bzip2). gzip: RFC 1952 2.3.1; zstd: RFC 8878 3.1.1; xz:
// the .xz file format 2.1.1.1; bzip2 "BZh"; lzop's 9-byte magic; lz4's
// legacy frame (what `lz4 -l` writes for the kernel) and its current
// frame. Raw lzma has no magic and is not recognised.
func compression(d []byte) string {
	for _, c := range [...]struct{ name, magic string }{
		{"gzip", "\x1f\x8b"},
		{"zstd", "\x28\xb5\x2f\xfd"},
		{"xz", "\xfd7zXZ\x00"},
		{"bzip2", "BZh"},
		{"lzo", "\x89LZO\x00\r\n\x1a\n"},
		{"lz4", "\x02\x21\x4c\x18"},
		{"lz4", "\x04\x22\x4d\x18"},
	} {
		if bytes.HasPrefix(d, []byte(c.magic)) {
			return c.name
		}
	}
	return ""
}

// zbootHeader is the part of an EFI zboot header mvm uses.
type zbootHeader struct {
	payloadOff, payloadSize uint64
	comp                    string // as the header names it
}

// isZboot reports whether d starts with an EFI zboot header.
func isZboot(d []byte) bool {
	return len(d) >= zbootHeaderSz && bytes.HasPrefix(d, []byte("MZ")) && string(d[zbootTypeOff:zbootTypeOff+4]) == "zimg"
}

// parseZboot reads the zboot header at the start of d and checks that the
// payload it describes lies inside a file of fileSize bytes.
func parseZboot(d []byte, fileSize uint64) (zbootHeader, error) {
	le := binary.LittleEndian
	h := zbootHeader{
		payloadOff:  uint64(le.Uint32(d[zbootOffOff:])),
		payloadSize: uint64(le.Uint32(d[zbootSizeOff:])),
	}
	name := d[zbootCompOff:zbootCompEnd]
	if i := bytes.IndexByte(name, 0); i >= 0 {
		name = name[:i]
	}
	for _, c := range name {
		if c < 0x20 || c > 0x7e {
			return h, errors.New("its compression type at offset 24 is not a name")
		}
	}
	h.comp = string(name)
	switch {
	case h.payloadOff < zbootHeaderSz:
		return h, fmt.Errorf("its payload offset %#x points into the header", h.payloadOff)
	case h.payloadSize == 0:
		return h, errors.New("its payload is empty")
	case h.payloadOff+h.payloadSize > fileSize:
		return h, fmt.Errorf("its %d-byte payload at %#x runs past the end of the %d-byte file: the file is truncated", h.payloadSize, h.payloadOff, fileSize)
	}
	return h, nil
}

// zbootCompression maps a zboot compression type to the decompressor mvm
// has for it, or "" for one it has not: the kernel's Makefile.zboot names
// zstd "zstd22" (v6.1-v6.12) or "zstd".
func zbootCompression(comp string) string {
	switch comp {
	case "gzip":
		return "gzip"
	case "zstd", "zstd22":
		return "zstd"
	}
	return ""
}

// readerAt gives random access to the whole kernel file: the bytes already
// in memory for an in-memory BootFile, else the file itself.
func (f BootFile) readerAt() (io.ReaderAt, func(), error) {
	if f.Size == 0 {
		return bytes.NewReader(f.Data), func() {}, nil
	}
	fh, err := os.Open(f.Path)
	if err != nil {
		return nil, nil, err
	}
	return fh, func() { fh.Close() }, nil
}

// unpackKernel decompresses the comp-compressed stream r (gzip or zstd)
// of kernel file path, which must hold an arm64 Image of at most limit
// bytes, and parses the Image. what says where the stream was found
// (for errors).
func unpackKernel(path, what, comp string, r io.Reader, limit uint64) ([]byte, ImageHeader, error) {
	var dec io.Reader
	switch comp {
	case "gzip":
		// klauspost/compress's inflate (already linked for zstd), not
		// compress/gzip's: 161 against 105 MB/s on the lab's Image.gz
		// (x86-64 host, 5 runs), the whole of an Image.gz boot's extra
		// setup time.
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, ImageHeader{}, fmt.Errorf("kernel %s: %s: %w", path, what, streamError(err))
		}
		// A zboot payload may be followed by padding; one member is
		// the kernel.
		zr.Multistream(false)
		dec = zr
	case "zstd":
		// One goroutine, and a window (the history the decoder keeps)
		// no larger than the kernel may be: zstd's encoder makes it at
		// most the input rounded up to a power of two, and a frame that
		// declares more is refused before it allocates. 8 MiB at least:
		// RFC 8878 3.1.1.1.2 asks every decoder to support that much.
		window := min(max(nextPow2(limit), 8<<20), zstd.MaxWindowSize)
		zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxMemory(window), zstd.WithDecoderMaxWindow(window))
		if err != nil {
			return nil, ImageHeader{}, fmt.Errorf("kernel %s: zstd decoder: %w", path, err)
		}
		defer zr.Close()
		dec = zr
	default:
		return nil, ImageHeader{}, fmt.Errorf("kernel %s: no %s decompressor", path, comp)
	}

	// Not io.ReadFull: it reports a clean end of a short stream and a
	// truncated one alike (io.ErrUnexpectedEOF).
	var hdr [64]byte
	for n, idle := 0, 0; n < len(hdr); {
		m, err := dec.Read(hdr[n:])
		n += m
		if m > 0 {
			idle = 0
		} else if idle++; idle > 100 && err == nil {
			err = io.ErrNoProgress // a decoder that never returns data
		}
		if err == io.EOF && n < len(hdr) {
			return nil, ImageHeader{}, fmt.Errorf("kernel %s: %s decompresses to just %d of the 64 header bytes an arm64 Image starts with; --kernel takes %s", path, what, n, kernelFormats)
		}
		if err != nil && err != io.EOF {
			return nil, ImageHeader{}, fmt.Errorf("kernel %s: %s: %w", path, what, streamError(err))
		}
	}
	h, err := ParseImage(bytes.NewReader(hdr[:]), int64(len(hdr)))
	if errors.Is(err, ErrNotImage) {
		return nil, h, fmt.Errorf("kernel %s: %s holds no arm64 Image (no \"ARM\\x64\" magic at offset 56 of the decompressed data); --kernel takes %s", path, what, kernelFormats)
	}
	if err != nil {
		return nil, h, fmt.Errorf("kernel %s: %w", path, err)
	}
	var buf bytes.Buffer
	// image_size (BSS included) is at least the Image file: one
	// allocation for a well-formed kernel, never more than limit.
	buf.Grow(int(min(max(h.ImageSize, 1<<20), limit)))
	buf.Write(hdr[:])
	// One byte past the limit tells "too large" from "exactly the limit".
	room := int64(1)
	if limit > uint64(len(hdr)) {
		room += int64(limit) - int64(len(hdr))
	}
	n, err := buf.ReadFrom(io.LimitReader(dec, room))
	if err != nil {
		return nil, h, fmt.Errorf("kernel %s: %s: %w", path, what, streamError(err))
	}
	if uint64(n)+uint64(len(hdr)) > limit {
		return nil, h, fmt.Errorf("kernel %s: %s decompresses to more than %s, more than the guest RAM or mvm's %s limit for a kernel (a decompression bomb, or not a kernel)", path, what, FormatSize(limit), FormatSize(MaxKernelSize))
	}
	return buf.Bytes(), h, nil
}

// streamError turns a decompressor's error into words: a truncated stream
// and a failed checksum are the usual ones.
func streamError(err error) error {
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("the compressed data ends early: the file is truncated")
	case errors.Is(err, gzip.ErrChecksum), errors.Is(err, zstd.ErrCRCMismatch):
		return errors.New("the compressed data fails its checksum: the file is corrupt")
	case errors.Is(err, zstd.ErrWindowSizeExceeded), errors.Is(err, zstd.ErrDecoderSizeExceeded):
		return fmt.Errorf("its zstd frame declares a window larger than a kernel that fits in the guest RAM needs (a decompression bomb, or not a kernel): %w", err)
	}
	return fmt.Errorf("corrupt compressed data: %w", err)
}

// resolveKernelPath turns --kernel into the kernel file to read: path
// itself, or for a kernel build tree (a directory) the Image in it. tree
// is the build tree's absolute path, or "".
func resolveKernelPath(path string) (file, tree string, err error) {
	st, err := os.Stat(path)
	if err != nil || !st.IsDir() {
		return path, "", nil // readBootFile says what is wrong with it
	}
	// Where a build tree has its arm64 kernel (arch/arm64/Makefile:
	// `make Image`, `make Image.gz`), in order of preference.
	for _, rel := range [...]string{"arch/arm64/boot/Image", "arch/arm64/boot/Image.gz"} {
		p := filepath.Join(path, filepath.FromSlash(rel))
		fst, err := os.Stat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return "", "", fmt.Errorf("kernel build tree %s: %w", path, err)
		case fst.IsDir():
			continue
		}
		if tree, err = filepath.Abs(path); err != nil {
			return "", "", fmt.Errorf("kernel build tree %s: %w", path, err)
		}
		return p, tree, nil
	}
	return "", "", fmt.Errorf("kernel %s is a directory without arch/arm64/boot/Image or Image.gz: build the kernel in it (make ARCH=arm64 Image) or pass a kernel file; --kernel takes %s", path, kernelFormats)
}

// nextPow2 is the least power of two at least n (n > 0).
func nextPow2(n uint64) uint64 {
	p := uint64(1)
	for p < n {
		p <<= 1
	}
	return p
}
