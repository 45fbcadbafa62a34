package vmm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"
)

// BootFile is a kernel or initrd on the host. Only its start is read into
// memory, to recognise its format; the loader copies the file straight
// into guest RAM, so a 30 MiB kernel never passes through mvm's heap.
type BootFile struct {
	Path string
	// Data is the start of the file (at most headLen bytes), or with
	// Size 0 the whole of it, in memory.
	Data []byte
	// Size is the file's size (len(Data) when zero).
	Size uint64
	// Archive, when set, writes the file (Size bytes) instead.
	Archive Archive
}

// Archive is a boot file written at load: Size bytes by WriteTo
// (guest.Initramfs is one).
type Archive interface {
	Size() int64
	WriteTo(w io.Writer) (int64, error)
}

// headLen covers every header parseKernel looks at (x86's "HdrS" at 0x202,
// the 64-byte arm64 Image header, 512 bytes of text detection).
const headLen = 4096

func (f BootFile) size() uint64 {
	if f.Size == 0 {
		return uint64(len(f.Data))
	}
	return f.Size
}

// loadInto copies the whole file into dst (len(dst) == size()).
func (f BootFile) loadInto(dst []byte) error {
	if f.Archive != nil {
		w := &sliceWriter{b: dst}
		if _, err := f.Archive.WriteTo(w); err != nil {
			return err
		}
		if w.n != len(dst) {
			return fmt.Errorf("the archive wrote %d bytes, want %d", w.n, len(dst))
		}
		return nil
	}
	if f.Size == 0 {
		copy(dst, f.Data)
		return nil
	}
	fh, err := os.Open(f.Path)
	if err != nil {
		return err
	}
	defer fh.Close()
	if _, err := io.ReadFull(io.NewSectionReader(fh, 0, int64(len(dst))), dst); err != nil {
		return fmt.Errorf("read %s: %w (did it change while mvm ran?)", f.Path, err)
	}
	return nil
}

// readBootFile reads a kernel or initrd, turning the usual mistakes into one
// clear sentence each.
func readBootFile(what, path string) (BootFile, error) {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return BootFile{}, fmt.Errorf("%s %s does not exist", what, path)
	case errors.Is(err, fs.ErrPermission):
		return BootFile{}, fmt.Errorf("%s %s is not readable: permission denied", what, path)
	case err != nil:
		return BootFile{}, fmt.Errorf("%s %s: %w", what, path, err)
	case st.IsDir():
		return BootFile{}, fmt.Errorf("%s %s is a directory, not a file", what, path)
	case st.Size() == 0:
		return BootFile{}, fmt.Errorf("%s %s is empty", what, path)
	}
	fh, err := os.Open(path)
	if errors.Is(err, fs.ErrPermission) {
		return BootFile{}, fmt.Errorf("%s %s is not readable: permission denied", what, path)
	}
	if err != nil {
		return BootFile{}, fmt.Errorf("read %s %s: %w", what, path, err)
	}
	defer fh.Close()
	head := make([]byte, min(st.Size(), headLen))
	if _, err := io.ReadFull(fh, head); err != nil {
		return BootFile{}, fmt.Errorf("read %s %s: %w", what, path, err)
	}
	return BootFile{Path: path, Data: head, Size: uint64(st.Size())}, nil
}

// Kernel is a loaded kernel: an arm64 Image (as built, or unpacked from a
// compressed file) or a flat binary.
type Kernel struct {
	// BootFile is the kernel as loaded. For a compressed kernel Data is
	// the whole unpacked Image (Size 0) and Path the compressed file.
	BootFile
	IsImage bool
	Header  ImageHeader // valid when IsImage
	// Format is how the file was packed: FormatImage, FormatImageGzip,
	// FormatZbootGzip, ... or FormatBinary.
	Format string
	// Tree is the absolute path of the kernel build tree --kernel named
	// (its modules are under it), "" when --kernel named a file.
	Tree string
	// UnpackTime is how long unpacking a compressed kernel took.
	UnpackTime time.Duration
}

// Unpacked reports whether the kernel was decompressed into memory.
func (k Kernel) Unpacked() bool {
	return k.Size == 0 && k.Format != FormatImage && k.Format != FormatBinary
}

// OpenKernel reads and recognises the kernel --kernel names: a file in one
// of the formats of kernelFormats, or a kernel build tree. A compressed
// kernel is unpacked into memory, refusing more than limit bytes (and
// MaxKernelSize). Every error is one line saying what is wrong.
func OpenKernel(path string, limit uint64) (Kernel, error) {
	file, tree, err := resolveKernelPath(path)
	if err != nil {
		return Kernel{}, err
	}
	kf, err := readBootFile("kernel", file)
	if err != nil {
		return Kernel{}, err
	}
	k, err := parseKernel(kf, limit)
	k.Tree = tree
	return k, err
}

// parseKernel decides what kind of kernel f is. An arm64 Image is
// recognised by its header; a gzip or zstd stream, or an EFI zboot image
// with such a payload, is unpacked (at most limit bytes) and must hold an
// Image; anything else that is not an obviously wrong format (ELF, another
// compression, another architecture's kernel, text) is a flat binary
// loaded at the base of RAM and entered at its first byte.
func parseKernel(f BootFile, limit uint64) (Kernel, error) {
	limit = min(limit, MaxKernelSize)
	k := Kernel{BootFile: f, Format: FormatBinary}
	h, err := ParseImage(bytes.NewReader(f.Data), int64(f.size()))
	if err == nil {
		k.IsImage, k.Header, k.Format = true, h, FormatImage
		return k, nil
	}
	if !errors.Is(err, ErrNotImage) {
		return k, fmt.Errorf("kernel %s: %w", f.Path, err)
	}
	d := f.Data
	if isZboot(d) {
		zh, err := parseZboot(d, f.size())
		if err != nil {
			return k, fmt.Errorf("kernel %s is an EFI zboot image, but %w", f.Path, err)
		}
		comp := zbootCompression(zh.comp)
		if comp == "" {
			return k, fmt.Errorf("kernel %s is an EFI zboot image with a %q-compressed payload; mvm unpacks gzip and zstd only: rebuild with CONFIG_KERNEL_GZIP or CONFIG_KERNEL_ZSTD, or pass the build tree's arch/arm64/boot/Image", f.Path, zh.comp)
		}
		return unpackInto(k, comp, zh.payloadOff, zh.payloadSize, "its EFI zboot "+comp+" payload", limit)
	}
	switch c := compression(d); c {
	case "gzip", "zstd":
		return unpackInto(k, c, 0, f.size(), "the "+c+" data", limit)
	case "":
	default:
		return k, fmt.Errorf("kernel %s is %s-compressed; mvm unpacks gzip and zstd only: decompress it first, or recompress it with gzip; --kernel takes %s", f.Path, c, kernelFormats)
	}
	switch {
	case bytes.HasPrefix(d, []byte("\x7fELF")):
		return k, fmt.Errorf("kernel %s is an ELF file (a vmlinux?), not a kernel mvm boots: use the build's arch/arm64/boot/Image (objcopy -O binary for a payload); --kernel takes %s", f.Path, kernelFormats)
	case bytes.HasPrefix(d, []byte("MZ")):
		return k, fmt.Errorf("kernel %s is not an arm64 Image: it has a PE/EFI header but neither the arm64 Image magic nor an EFI zboot header (an x86 bzImage?); --kernel takes %s", f.Path, kernelFormats)
	case len(d) >= 0x206 && bytes.Equal(d[0x202:0x206], []byte("HdrS")):
		return k, fmt.Errorf("kernel %s is an x86 kernel; --kernel takes %s", f.Path, kernelFormats)
	case isText(d):
		return k, fmt.Errorf("kernel %s is a text file; --kernel takes %s", f.Path, kernelFormats)
	}
	return k, nil
}

// unpackInto decompresses the size bytes at off of k's file and makes k
// the Image they hold.
func unpackInto(k Kernel, comp string, off, size uint64, what string, limit uint64) (Kernel, error) {
	start := time.Now()
	ra, done, err := k.readerAt()
	if err != nil {
		return k, fmt.Errorf("read kernel %s: %w", k.Path, err)
	}
	defer done()
	// Large reads: the decompressors' own buffering reads a file 4 KiB
	// at a time.
	r := bufio.NewReaderSize(io.NewSectionReader(ra, int64(off), int64(size)), 1<<20)
	img, h, err := unpackKernel(k.Path, what, comp, r, limit)
	if err != nil {
		return k, err
	}
	k.UnpackTime = time.Since(start)
	k.BootFile = BootFile{Path: k.Path, Data: img}
	k.IsImage, k.Header = true, h
	switch {
	case off != 0 && comp == "gzip":
		k.Format = FormatZbootGzip
	case off != 0:
		k.Format = FormatZbootZstd
	case comp == "gzip":
		k.Format = FormatImageGzip
	default:
		k.Format = FormatImageZstd
	}
	return k, nil
}

// isText reports whether the start of d looks like text: machine code always
// has bytes outside printable ASCII within its first few instructions.
func isText(d []byte) bool {
	if len(d) > 512 {
		d = d[:512]
	}
	for _, c := range d {
		if (c < 0x20 || c > 0x7e) && c != '\n' && c != '\r' && c != '\t' {
			return false
		}
	}
	return true
}

// bootPlan is what a VM boots: the kernel, the initrd and where they go. It
// is worked out before anything touches KVM, so bad input fails early and
// the same way on every host.
type bootPlan struct {
	kernel Kernel
	initrd BootFile
	place  Placement
}

// CheckBoot checks what New checks before it touches the host: the
// configuration, the kernel and initrd files and that they fit in RAM, the
// disk images and the guest symbols. A tool that starts many VMs (mvm
// bench) calls it once for each configuration before the first boot. Its
// errors are InputErrors.
func CheckBoot(cfg Config) error {
	_, err := checkInput(cfg)
	return err
}

// prepare works out the boot plan of cfg; its errors are InputErrors.
func prepare(cfg Config) (bootPlan, error) {
	p, err := makePlan(cfg)
	return p, asInput(err)
}

// makePlan is prepare without marking its errors: once the VM has run, a
// kernel that went missing is no longer a mistake in the command line.
func makePlan(cfg Config) (bootPlan, error) {
	var p bootPlan
	err := cfg.Validate()
	if err != nil {
		return p, err
	}
	// The kernel must fit in RAM: that bounds what a compressed one may
	// unpack to.
	if p.kernel, err = OpenKernel(cfg.Kernel, cfg.Memory); err != nil {
		return p, err
	}
	if cfg.Initrd != "" {
		if p.initrd, err = readBootFile("initrd", cfg.Initrd); err != nil {
			return p, err
		}
	} else if cfg.InitrdArchive != nil {
		p.initrd = BootFile{Archive: cfg.InitrdArchive, Size: uint64(cfg.InitrdArchive.Size())}
	}
	koff, ksize := uint64(0), alignUp(p.kernel.size(), PageSize)
	if p.kernel.IsImage {
		koff, ksize = p.kernel.Header.TextOffset, p.kernel.Header.LoadSize(p.kernel.size())
	}
	p.place, err = Place(RAMRegions(cfg.Memory)[0], koff, ksize, p.initrd.size())
	return p, err
}

// sliceWriter writes into a fixed slice (guest RAM); ReadFrom reads
// straight into it, so io.Copy from a file is one read into guest RAM.
type sliceWriter struct {
	b []byte
	n int
}

var errArchiveTooLong = errors.New("the archive is longer than its size")

func (w *sliceWriter) Write(p []byte) (int, error) {
	n := copy(w.b[w.n:], p)
	w.n += n
	if n < len(p) {
		return n, errArchiveTooLong
	}
	return n, nil
}

func (w *sliceWriter) ReadFrom(r io.Reader) (int64, error) {
	var total int64
	for {
		if w.n == len(w.b) {
			// Full: anything more is too much.
			var one [1]byte
			if n, _ := r.Read(one[:]); n > 0 {
				return total, errArchiveTooLong
			}
			return total, nil
		}
		n, err := r.Read(w.b[w.n:])
		w.n += n
		total += int64(n)
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}
