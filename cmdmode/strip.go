package cmdmode

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
	"os"
)

// elfHeaderLen is the length of an ELF-64 header.
const elfHeaderLen = 64

// strippedLen is StrippedFile's cut: the length of the stripped
// executable and its new ELF header (to replace the first elfHeaderLen
// bytes), or size and nil when it is to stay as it is. It reads only the
// headers.
func strippedLen(r io.ReaderAt, size int64) (int64, []byte) {
	f, err := elf.NewFile(r)
	if err != nil || f.Class != elf.ELFCLASS64 || f.Data != elf.ELFDATA2LSB || f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return size, nil
	}
	loadEnd := uint64(0)
	for _, p := range f.Progs {
		if p.Off+p.Filesz > loadEnd {
			loadEnd = p.Off + p.Filesz
		}
	}
	cut := uint64(size)
	for _, s := range f.Sections {
		if s.Type == elf.SHT_NULL || s.Type == elf.SHT_NOBITS || s.Flags&elf.SHF_ALLOC != 0 {
			continue
		}
		if s.Offset < loadEnd {
			return size, nil
		}
		cut = min(cut, s.Offset)
	}
	// The ELF header's e_phoff/e_phentsize/e_phnum must stay inside.
	hdr := make([]byte, elfHeaderLen)
	if _, err := r.ReadAt(hdr, 0); err != nil {
		return size, nil
	}
	phoff := binary.LittleEndian.Uint64(hdr[32:])
	phEnd := phoff + uint64(binary.LittleEndian.Uint16(hdr[54:]))*uint64(binary.LittleEndian.Uint16(hdr[56:]))
	if cut >= uint64(size) || cut < loadEnd || cut < phEnd || cut < elfHeaderLen {
		return size, nil
	}
	// No section headers: e_shoff, e_shnum and e_shstrndx 0 (ELF-64
	// header, System V ABI gABI "ELF Header").
	binary.LittleEndian.PutUint64(hdr[40:], 0)
	binary.LittleEndian.PutUint16(hdr[60:], 0)
	binary.LittleEndian.PutUint16(hdr[62:], 0)
	return int64(cut), hdr
}

// InitFile is the guest's init binary as the initramfs takes it: its
// size and a reader of its bytes, opened anew for each write of the
// archive.
type InitFile struct {
	Size int64
	Open func() (io.Reader, error)
}

// StrippedFile is an ELF executable on disk (mvm's own, /proc/self/exe)
// without what only debuggers read: the sections that no PT_LOAD segment
// maps (DWARF, .symtab, .strtab) and the section header table. The kernel
// loads an executable by its program headers alone (fs/binfmt_elf.c), and
// Go's runtime finds its tables through symbols linked into the data, not
// through section headers. It is how `strip` would shorten mvm's binary
// for the guest (~30% of it). Anything it does not understand — not a
// 64-bit little-endian ELF executable, a non-allocated section before the
// end of the loaded segments — stays as it is.
//
// Only the headers are read now; Open reads the loaded
// part from the file each time, so the binary goes from the page cache
// straight to where the archive is written (guest RAM), not through
// mvm's heap.
func StrippedFile(path string) (InitFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return InitFile{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return InitFile{}, err
	}
	cut, hdr := strippedLen(f, st.Size())
	return InitFile{Size: cut, Open: func() (io.Reader, error) {
		fh, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		if st, err := fh.Stat(); err != nil || st.Size() < cut {
			fh.Close()
			return nil, fmt.Errorf("%s changed since mvm started", path)
		}
		body := io.Reader(io.NewSectionReader(fh, 0, cut))
		if hdr != nil {
			body = io.MultiReader(bytes.NewReader(hdr), io.NewSectionReader(fh, elfHeaderLen, cut-elfHeaderLen))
		}
		return readCloser{body, fh}, nil
	}}, nil
}

// readCloser reads from r and closes c.
type readCloser struct {
	io.Reader
	c io.Closer
}

func (r readCloser) Close() error { return r.c.Close() }
