package vmm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// BootFile is a kernel or initrd on the host. Only its start is read into
// memory, to recognise its format; the loader copies the file straight
// into guest RAM, so a 30 MiB kernel never passes through mvm's heap.
type BootFile struct {
	Path string
	// Data is the start of the file (at most headLen bytes).
	Data []byte
	// Size is the file's size (len(Data) when zero).
	Size uint64
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

// Kernel is a loaded kernel: an arm64 Image or a flat binary.
type Kernel struct {
	BootFile
	IsImage bool
	Header  ImageHeader // valid when IsImage
}

// parseKernel decides what kind of kernel data is. An arm64 Image is
// recognised by its header; anything else that is not an obviously wrong
// format (ELF, compressed, another architecture's PE image) is a flat binary
// loaded at the base of RAM and entered at its first byte.
func parseKernel(f BootFile) (Kernel, error) {
	k := Kernel{BootFile: f}
	h, err := ParseImage(bytes.NewReader(f.Data), int64(f.size()))
	if err == nil {
		k.IsImage, k.Header = true, h
		return k, nil
	}
	if !errors.Is(err, ErrNotImage) {
		return k, fmt.Errorf("kernel %s: %w", f.Path, err)
	}
	d := f.Data
	switch {
	case bytes.HasPrefix(d, []byte("\x7fELF")):
		return k, fmt.Errorf("kernel %s is an ELF file, not an arm64 Image or flat binary: use the kernel's arch/arm64/boot/Image, or objcopy -O binary for a payload", f.Path)
	case bytes.HasPrefix(d, []byte{0x1f, 0x8b}):
		return k, fmt.Errorf("kernel %s is gzip-compressed: decompress it first (zcat %s > Image), arm64 Images do not decompress themselves", f.Path, f.Path)
	case bytes.HasPrefix(d, []byte("MZ")):
		return k, fmt.Errorf("kernel %s is not an arm64 Image: it has a PE/EFI header but no arm64 Image magic (an x86 bzImage?)", f.Path)
	case len(d) >= 0x206 && bytes.Equal(d[0x202:0x206], []byte("HdrS")):
		return k, fmt.Errorf("kernel %s is an x86 kernel, not an arm64 Image", f.Path)
	case isText(d):
		return k, fmt.Errorf("kernel %s is a text file, not an arm64 Image or flat binary", f.Path)
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
	if err := cfg.Validate(); err != nil {
		return p, err
	}
	kf, err := readBootFile("kernel", cfg.Kernel)
	if err != nil {
		return p, err
	}
	if p.kernel, err = parseKernel(kf); err != nil {
		return p, err
	}
	if cfg.Initrd != "" {
		if p.initrd, err = readBootFile("initrd", cfg.Initrd); err != nil {
			return p, err
		}
	}
	koff, ksize := uint64(0), alignUp(p.kernel.size(), PageSize)
	if p.kernel.IsImage {
		koff, ksize = p.kernel.Header.TextOffset, p.kernel.Header.LoadSize(p.kernel.size())
	}
	p.place, err = Place(RAMRegions(cfg.Memory)[0], koff, ksize, p.initrd.size())
	return p, err
}
