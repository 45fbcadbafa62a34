package vmm

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/mvm-dev/mvm/guest"
)

// zstdCompressed is data as one zstd frame.
func zstdCompressed(t testing.TB, data []byte) []byte {
	var buf bytes.Buffer
	zw, err := zstd.NewWriter(&buf, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	zw.Write(data)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// zbootImage is payload in a synthetic EFI zboot image.
func zbootImage(payload []byte, comp string, trailer int) []byte {
	return guest.Zboot(payload, comp, trailer)
}

// withSizeTrailer is what the kernel's *_with_size compressors write: the
// stream, then the uncompressed size as le32.
func withSizeTrailer(stream []byte, size int) []byte {
	return binary.LittleEndian.AppendUint32(append([]byte(nil), stream...), uint32(size))
}

func TestParseKernelCompressed(t *testing.T) {
	img := kernelTestImage(0x0, 3<<20, 0xa, 1<<20+123)
	gz, zs := gzipped(t, img), zstdCompressed(t, img)
	tests := []struct {
		name, format string
		data         []byte
	}{
		{"Image.gz", FormatImageGzip, gz},
		{"Image.zst", FormatImageZstd, zs},
		{"zboot gzip", FormatZbootGzip, zbootImage(gz, "gzip", 0)},
		{"zboot zstd22 (v6.1-v6.12)", FormatZbootZstd, zbootImage(withSizeTrailer(zs, len(img)), "zstd22", 4)},
		{"zboot zstd (v6.13+)", FormatZbootZstd, zbootImage(withSizeTrailer(zs, len(img)), "zstd", 4)},
		{"zboot gzip with a size trailer", FormatZbootGzip, zbootImage(withSizeTrailer(gz, len(img)), "gzip", 4)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// From memory and from a file: the two ways BootFile reads.
			path := filepath.Join(t.TempDir(), "vmlinuz")
			if err := os.WriteFile(path, tt.data, 0o644); err != nil {
				t.Fatal(err)
			}
			fromFile, err := readBootFile("kernel", path)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range []BootFile{{Path: path, Data: tt.data}, fromFile} {
				k, err := parseKernel(f, 64<<20)
				if err != nil {
					t.Fatalf("parseKernel: %v", err)
				}
				if !k.IsImage || k.Format != tt.format || !k.Unpacked() || k.Path != path {
					t.Errorf("IsImage %v, Format %q (want %q), Unpacked %v, Path %q", k.IsImage, k.Format, tt.format, k.Unpacked(), k.Path)
				}
				if k.UnpackTime <= 0 {
					t.Errorf("UnpackTime %v for an unpacked kernel", k.UnpackTime)
				}
				if !bytes.Equal(k.Data, img) || k.size() != uint64(len(img)) {
					t.Fatalf("unpacked %d bytes, not the %d-byte Image", len(k.Data), len(img))
				}
				if k.Header.ImageSize != 3<<20 || k.Header.Flags != 0xa {
					t.Errorf("header %+v", k.Header)
				}
				dst := make([]byte, k.size())
				if err := k.loadInto(dst); err != nil || !bytes.Equal(dst, img) {
					t.Errorf("loadInto copies something else than the Image (%v)", err)
				}
			}
		})
	}
}

func TestParseKernelCompressedErrors(t *testing.T) {
	img := kernelTestImage(0, 3<<20, 0xa, 256<<10)
	gz := gzipped(t, img)
	zs := zstdCompressed(t, img)
	corrupt := append([]byte(nil), gz...)
	corrupt[len(corrupt)-6] ^= 0xff // the CRC32 in the gzip trailer (RFC 1952 2.2)
	// A bomb: a valid Image header, then far more zeros than the limit.
	bomb := append(kernelTestImage(0, 1<<20, 0xa, 64), make([]byte, 8<<20)...)
	const limit = 2 << 20
	bigZboot := zbootImage(gz, "gzip", 0)
	binary.LittleEndian.PutUint32(bigZboot[12:], uint32(len(bigZboot)))
	badName := zbootImage(gz, "gz\x01p", 0)

	tests := []struct {
		name string
		data []byte
		says []string
	}{
		{"truncated gzip", gz[:len(gz)/2], []string{"truncated"}},
		{"truncated zstd", zs[:len(zs)/2], []string{"truncated"}},
		{"gzip cut inside its header", gz[:5], []string{"gzip"}},
		{"gzip with a bad checksum", corrupt, []string{"checksum", "corrupt"}},
		{"gzip bomb", gzipped(t, bomb), []string{"more than 2M", "decompression bomb"}},
		{"zstd bomb", zstdCompressed(t, bomb), []string{"more than 2M", "decompression bomb"}},
		{"zboot bomb", zbootImage(gzipped(t, bomb), "gzip", 0), []string{"more than 2M"}},
		{"zboot lzma", zbootImage(gz, "lzma", 0), []string{"EFI zboot", `"lzma"`, "gzip and zstd"}},
		{"zboot xzkern", zbootImage(gz, "xzkern", 0), []string{`"xzkern"`, "CONFIG_KERNEL_GZIP"}},
		{"zboot truncated", zbootImage(gz, "gzip", 0)[:0x1000+len(gz)/2], []string{"EFI zboot", "truncated"}},
		{"zboot payload size past the end", bigZboot, []string{"runs past the end", "truncated"}},
		{"zboot payload inside the header", func() []byte {
			b := zbootImage(gz, "gzip", 0)
			binary.LittleEndian.PutUint32(b[8:], 16)
			return b
		}(), []string{"points into the header"}},
		{"zboot without a compression name", badName, []string{"compression type"}},
		{"zboot of a gzip'd payload", zbootImage(gzipped(t, arm64Code()), "gzip", 0), []string{"header bytes"}},
		{"xz", append([]byte("\xfd7zXZ\x00"), make([]byte, 100)...), []string{"xz-compressed", "gzip and zstd"}},
		{"bzip2", append([]byte("BZh9"), make([]byte, 100)...), []string{"bzip2-compressed"}},
		{"lz4 (legacy frame)", append([]byte("\x02\x21\x4c\x18"), make([]byte, 100)...), []string{"lz4-compressed"}},
		{"lzo", append([]byte("\x89LZO\x00\r\n\x1a\n"), make([]byte, 100)...), []string{"lzo-compressed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := parseKernel(BootFile{Path: "/boot/vmlinuz-x", Data: tt.data}, limit)
			if err == nil {
				t.Fatalf("parseKernel succeeded (%s)", k.Format)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "kernel /boot/vmlinuz-x") {
				t.Errorf("error %q does not start with the kernel's path", msg)
			}
			for _, s := range tt.says {
				if !strings.Contains(msg, s) {
					t.Errorf("error %q does not say %q", msg, s)
				}
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("error %q is more than one line", msg)
			}
			if k.IsImage || k.Unpacked() {
				t.Error("an error with an Image or unpacked data")
			}
		})
	}
}

// A gzip bomb costs mvm about the limit, not what it claims to unpack to:
// 128 MiB of zeros (gzip: 130 KiB) against a 4 MiB limit.
func TestUnpackKernelBounded(t *testing.T) {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zw.Write(kernelTestImage(0, 1<<20, 0xa, 64))
	zero := make([]byte, 1<<20)
	for range 128 {
		zw.Write(zero)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := parseKernel(BootFile{Path: "bomb.gz", Data: buf.Bytes()}, 4<<20)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "more than 4M") {
		t.Fatalf("parseKernel(bomb) = %v, want a more-than-4M error", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 32<<20 {
		t.Errorf("unpacking the bomb allocated %d MiB; the limit is 4 MiB", got>>20)
	}
}

func TestOpenKernelBuildTree(t *testing.T) {
	img := kernelTestImage(0, 2<<20, 0xa, 8192)
	mkTree := func(t *testing.T, files map[string][]byte) string {
		dir := t.TempDir()
		for name, data := range files {
			p := filepath.Join(dir, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	// What a built tree has: the Image, Image.gz, vmlinux, modules.
	tree := mkTree(t, map[string][]byte{
		"arch/arm64/boot/Image":     img,
		"arch/arm64/boot/Image.gz":  gzipped(t, kernelTestImage(0, 9<<20, 0xa, 4096)),
		"vmlinux":                   []byte("\x7fELF\x02\x01\x01"),
		"Makefile":                  []byte("VERSION = 6\n"),
		"drivers/net/virtio_net.ko": []byte("\x7fELF"),
	})
	k, err := OpenKernel(tree, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	if k.Tree != tree || k.Path != filepath.Join(tree, "arch", "arm64", "boot", "Image") || k.Format != FormatImage || k.Header.ImageSize != 2<<20 {
		t.Errorf("tree %q: Tree %q, Path %q, Format %q, image_size %#x", tree, k.Tree, k.Path, k.Format, k.Header.ImageSize)
	}

	// Only Image.gz (make Image.gz): unpacked; the tree's path is made
	// absolute for whoever looks for its modules later.
	gzTree := mkTree(t, map[string][]byte{"arch/arm64/boot/Image.gz": gzipped(t, img)})
	t.Chdir(filepath.Dir(gzTree))
	k, err = OpenKernel(filepath.Base(gzTree), 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	if k.Tree != gzTree || k.Format != FormatImageGzip || !bytes.Equal(k.Data, img) {
		t.Errorf("Image.gz tree: Tree %q (want %q), Format %q, %d bytes", k.Tree, gzTree, k.Format, len(k.Data))
	}

	// A file is not a tree.
	if k, err = OpenKernel(filepath.Join(tree, "arch/arm64/boot/Image"), 64<<20); err != nil || k.Tree != "" {
		t.Errorf("OpenKernel(Image file) = Tree %q, %v", k.Tree, err)
	}

	for _, tt := range []struct {
		name  string
		files map[string][]byte
		says  string
	}{
		{"an unbuilt tree", map[string][]byte{"Makefile": []byte("VERSION = 6\n"), "arch/arm64/Kconfig": nil}, "without arch/arm64/boot/Image"},
		{"an x86 tree", map[string][]byte{"arch/x86/boot/bzImage": x86BzImage()}, "without arch/arm64/boot/Image"},
		{"an Image that is a directory", map[string][]byte{"arch/arm64/boot/Image/x": nil}, "without arch/arm64/boot/Image"},
		{"an empty Image", map[string][]byte{"arch/arm64/boot/Image": nil}, "is empty"},
		{"a vmlinux-only Image", map[string][]byte{"arch/arm64/boot/Image": []byte("\x7fELF\x02\x01\x01\x00")}, "ELF"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := mkTree(t, tt.files)
			_, err := OpenKernel(dir, 64<<20)
			if err == nil || !strings.Contains(err.Error(), tt.says) || strings.Contains(err.Error(), "\n") {
				t.Errorf("OpenKernel = %v, want one line saying %q", err, tt.says)
			}
		})
	}
}

// prepare places an unpacked kernel by its own header, and bounds it by
// --memory.
func TestPrepareCompressedKernel(t *testing.T) {
	dir := t.TempDir()
	img := kernelTestImage(0, 24<<20, 0xa, 1<<20)
	path := filepath.Join(dir, "vmlinuz")
	if err := os.WriteFile(path, zbootImage(gzipped(t, img), "gzip", 0), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := validConfig()
	cfg.Kernel = path
	p, err := prepare(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if p.kernel.Format != FormatZbootGzip || p.place.Kernel.Size < 24<<20 || p.place.Entry != p.place.Kernel.Base {
		t.Errorf("zboot kernel %s placed at %+v entry %#x", p.kernel.Format, p.place.Kernel, p.place.Entry)
	}
	// An Image larger than RAM is refused while unpacking.
	big := filepath.Join(dir, "big.gz")
	if err := os.WriteFile(big, gzipped(t, append(kernelTestImage(0, 0, 0xa, 64), make([]byte, MinMemory)...)), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.Kernel, cfg.Memory = big, MinMemory
	if _, err := prepare(cfg); err == nil || !strings.Contains(err.Error(), "more than 16M") {
		t.Errorf("prepare(kernel unpacking past --memory) = %v", err)
	}
}

// FuzzKernelFormats: compressed and zboot kernels, mutated. Unpacking
// never panics nor goes past its limit; a success is an Image whose
// header parses; a failure is one line naming the file.
func FuzzKernelFormats(f *testing.F) {
	img := kernelTestImage(0, 1<<20, 0xa, 4096)
	gz, zs := gzipped(f, img), zstdCompressed(f, img)
	f.Add(gz)
	f.Add(zs)
	f.Add(zbootImage(gz, "gzip", 0))
	f.Add(zbootImage(withSizeTrailer(zs, len(img)), "zstd22", 4))
	f.Add(zbootImage(gz, "lzma", 0))
	f.Add(gzipped(f, append(kernelTestImage(0, 1<<20, 0xa, 64), make([]byte, 1<<20)...)))
	f.Add(gz[:len(gz)/2])
	const limit = 256 << 10
	f.Fuzz(func(t *testing.T, data []byte) {
		const path = "/k/fuzz"
		k, err := parseKernel(BootFile{Path: path, Data: data}, limit)
		if err != nil {
			if k.IsImage || !strings.HasPrefix(err.Error(), "kernel "+path) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q (IsImage %v)", err, k.IsImage)
			}
			return
		}
		if !k.IsImage {
			return // a flat binary: FuzzParseKernel's property
		}
		d := k.Data
		if !k.Unpacked() {
			d = data
		} else if len(d) > limit {
			t.Fatalf("unpacked %d bytes past the %d-byte limit", len(d), limit)
		}
		h, err := ParseImage(bytes.NewReader(d), int64(len(d)))
		if err != nil || h != k.Header {
			t.Fatalf("the kernel's Image does not parse to its header: %v", err)
		}
	})
}

// The limit is exact: an Image of limit bytes unpacks, one byte more
// does not, however small the limit.
func TestUnpackKernelLimitExact(t *testing.T) {
	for _, size := range []int{64, 100, 4096} {
		img := kernelTestImage(0, 1<<20, 0xa, size)
		if k, err := parseKernel(BootFile{Path: "k.gz", Data: gzipped(t, img)}, uint64(size)); err != nil || !bytes.Equal(k.Data, img) {
			t.Errorf("%d-byte Image, limit %d: %v", size, size, err)
		}
		if _, err := parseKernel(BootFile{Path: "k.gz", Data: gzipped(t, img)}, uint64(size-1)); err == nil || !strings.Contains(err.Error(), "more than") {
			t.Errorf("%d-byte Image, limit %d: %v, want a more-than error", size, size-1, err)
		}
	}
}
