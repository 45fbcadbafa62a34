package cmdmode

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
)

// Stripped returns an ELF executable without what only debuggers read:
// the sections that no PT_LOAD segment maps (DWARF, .symtab, .strtab) and
// the section header table. The kernel loads an executable by its program
// headers alone (fs/binfmt_elf.c), and Go's runtime finds its tables
// through symbols linked into the data, not through section headers. It
// is how `strip` would shorten mvm's binary for the guest (~30% of it).
// Anything it does not understand — not a 64-bit little-endian ELF
// executable, a non-allocated section before the end of the loaded
// segments — it returns unchanged.
func Stripped(exe []byte) []byte {
	f, err := elf.NewFile(bytes.NewReader(exe))
	if err != nil || f.Class != elf.ELFCLASS64 || f.Data != elf.ELFDATA2LSB || f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return exe
	}
	loadEnd := uint64(0)
	for _, p := range f.Progs {
		if p.Off+p.Filesz > loadEnd {
			loadEnd = p.Off + p.Filesz
		}
	}
	cut := uint64(len(exe))
	for _, s := range f.Sections {
		if s.Type == elf.SHT_NULL || s.Type == elf.SHT_NOBITS || s.Flags&elf.SHF_ALLOC != 0 {
			continue
		}
		if s.Offset < loadEnd {
			return exe
		}
		cut = min(cut, s.Offset)
	}
	// The ELF header's e_phoff/e_phentsize/e_phnum must stay inside.
	hdr := exe[:64]
	phoff := binary.LittleEndian.Uint64(hdr[32:])
	phEnd := phoff + uint64(binary.LittleEndian.Uint16(hdr[54:]))*uint64(binary.LittleEndian.Uint16(hdr[56:]))
	if cut >= uint64(len(exe)) || cut < loadEnd || cut < phEnd {
		return exe
	}
	out := make([]byte, cut)
	copy(out, exe[:cut])
	// No section headers: e_shoff, e_shnum and e_shstrndx 0 (ELF-64
	// header, System V ABI gABI "ELF Header").
	binary.LittleEndian.PutUint64(out[40:], 0)
	binary.LittleEndian.PutUint16(out[60:], 0)
	binary.LittleEndian.PutUint16(out[62:], 0)
	return out
}
