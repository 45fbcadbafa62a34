// Package symbols maps guest kernel addresses to function names for the
// exit profile's guest-code view. It reads a System.map or a /proc/kallsyms
// dump (both "ADDRESS TYPE NAME [module]" lines) or a vmlinux ELF file's
// symbol table, and finds a KASLR offset from the guest's VBAR_EL1 and the
// address of the kernel's exception vectors.
package symbols

import (
	"bufio"
	"bytes"
	"cmp"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Limits on what a symbol file may hold, so that a wrong or hostile file is
// a clear error instead of unbounded memory: a distribution kernel's
// kallsyms has ~200k lines of under 100 bytes (about 10 MiB).
const (
	MaxTextBytes = 64 << 20
	MaxSymbols   = 2 << 20
	maxLine      = 4096
	// maxFuncSize bounds symbol+offset: no kernel function is this long.
	maxFuncSize = 1 << 20
)

// ErrFormat wraps every error about a symbol file's contents.
var ErrFormat = errors.New("not a symbol file")

// Sym is one function symbol.
type Sym struct {
	Addr uint64
	Name string
}

// Table is a sorted set of function symbols.
type Table struct {
	syms []Sym
	// end bounds the last symbol (_etext when present).
	end uint64
	// byName holds the few symbols looked up by name.
	vectors, text uint64
	hasVectors    bool
	// Kind says what the table was read from: "System.map/kallsyms" or
	// "ELF".
	Kind string
}

// Len is the number of function symbols.
func (t *Table) Len() int { return len(t.syms) }

// Vectors is the link (or, for a kallsyms dump, that boot's) address of
// the kernel's exception vector table, `vectors` in arch/arm64/kernel/entry.S.
func (t *Table) Vectors() (uint64, bool) { return t.vectors, t.hasVectors }

// Open reads a symbol file: an ELF file (vmlinux) by its magic, else text.
func Open(path string) (*Table, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var magic [4]byte
	if n, _ := io.ReadFull(f, magic[:]); n == 4 && string(magic[:]) == elf.ELFMAG {
		t, err := ParseELF(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return t, nil
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	t, err := ParseText(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// ParseText reads System.map or /proc/kallsyms lines. Only text symbols
// (types t, T, w, W) are kept; module symbols ("[name]" suffix) too.
func ParseText(r io.Reader) (*Table, error) {
	t := &Table{Kind: "System.map/kallsyms"}
	br := bufio.NewReaderSize(io.LimitReader(r, MaxTextBytes+1), 64<<10)
	var read int64
	lineNo := 0
	var stub bool
	for {
		line, err := br.ReadSlice('\n')
		read += int64(len(line))
		if read > MaxTextBytes {
			return nil, fmt.Errorf("%w: more than %d MiB of text (a System.map or kallsyms dump is ~10 MiB)", ErrFormat, MaxTextBytes>>20)
		}
		if errors.Is(err, bufio.ErrBufferFull) || len(line) > maxLine {
			return nil, fmt.Errorf("%w: line %d is longer than %d bytes", ErrFormat, lineNo+1, maxLine)
		}
		if len(line) > 0 {
			lineNo++
			if bytes.IndexByte(line, 0) >= 0 {
				return nil, fmt.Errorf("%w: line %d holds a NUL byte (binary file?)", ErrFormat, lineNo)
			}
			s := strings.TrimSpace(string(line))
			if strings.Contains(s, "The real System.map is in") {
				// Debian's stub (/boot/System.map-*): one line,
				// "ffffffffffffffff B The real System.map is in the
				// linux-image-<version>-dbg package".
				stub = true
				s = ""
			}
			if s != "" {
				isStub, perr := t.addLine(s)
				if perr != nil {
					return nil, fmt.Errorf("%w: line %d %q: %v", ErrFormat, lineNo, clip(s), perr)
				}
				stub = stub || isStub
				if len(t.syms) > MaxSymbols {
					return nil, fmt.Errorf("%w: more than %d symbols", ErrFormat, MaxSymbols)
				}
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return nil, err
		}
	}
	if len(t.syms) == 0 {
		if stub {
			return nil, fmt.Errorf("%w: a stub System.map without symbols (Debian's packages ship one; use the -dbg package's System.map or vmlinux, or a /proc/kallsyms dump read as root with kernel.kptr_restrict=0)", ErrFormat)
		}
		return nil, fmt.Errorf("%w: no text symbols", ErrFormat)
	}
	t.finish()
	return t, nil
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}

// addLine parses "ADDRESS TYPE NAME [module]".
func (t *Table) addLine(s string) (stub bool, err error) {
	f := strings.Fields(s)
	if len(f) < 3 || len(f) > 4 {
		return false, errors.New(`want "ADDRESS TYPE NAME [module]"`)
	}
	addr, err := strconv.ParseUint(f[0], 16, 64)
	if err != nil || len(f[0]) > 16 {
		return false, errors.New("address is not hexadecimal")
	}
	if len(f[1]) != 1 {
		return false, fmt.Errorf("type %q is not one letter", f[1])
	}
	if len(f) == 4 && !(strings.HasPrefix(f[3], "[") && strings.HasSuffix(f[3], "]")) {
		return false, fmt.Errorf("fourth field %q is not a [module]", f[3])
	}
	name := f[2]
	switch f[1] {
	case "t", "T", "w", "W":
	default:
		// Debian's stub: "ffffffffffffffff B The real System.map is in
		// the linux-image-<version>-dbg package" has more fields, so
		// it fails above; a stub with a data symbol only ends up here.
		return false, nil
	}
	if addr == 0 {
		return false, nil // kallsyms without privilege prints zeros
	}
	if name == "_etext" {
		t.end = addr
	}
	if name == "vectors" {
		t.vectors, t.hasVectors = addr, true
	}
	if name == "_text" {
		t.text = addr
	}
	t.syms = append(t.syms, Sym{Addr: addr, Name: name})
	return false, nil
}

// ParseELF reads the function symbols of an ELF file (a vmlinux).
func ParseELF(r io.ReaderAt) (*Table, error) {
	f, err := elf.NewFile(r)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	syms, err := f.Symbols()
	if err != nil {
		return nil, fmt.Errorf("%w: ELF symbol table: %v (a stripped Image has none: use the -dbg package's vmlinux)", ErrFormat, err)
	}
	if len(syms) > MaxSymbols {
		return nil, fmt.Errorf("%w: more than %d symbols", ErrFormat, MaxSymbols)
	}
	t := &Table{Kind: "ELF"}
	for _, s := range syms {
		switch s.Name {
		case "_etext":
			t.end = s.Value
		case "vectors":
			t.vectors, t.hasVectors = s.Value, true
		case "_text":
			t.text = s.Value
		}
		if elf.ST_TYPE(s.Info) != elf.STT_FUNC && !(s.Name == "vectors" && s.Value != 0) {
			continue
		}
		if s.Value == 0 || s.Name == "" {
			continue
		}
		t.syms = append(t.syms, Sym{Addr: s.Value, Name: s.Name})
	}
	if len(t.syms) == 0 {
		return nil, fmt.Errorf("%w: no function symbols in the ELF file", ErrFormat)
	}
	t.finish()
	return t, nil
}

func (t *Table) finish() {
	slices.SortStableFunc(t.syms, func(a, b Sym) int { return cmp.Compare(a.Addr, b.Addr) })
}

// Lookup names the function holding addr: the symbol with the largest
// address at or below it (before _etext when the table has it).
func (t *Table) Lookup(addr uint64) (name string, off uint64, ok bool) {
	i, found := slices.BinarySearchFunc(t.syms, addr, func(s Sym, a uint64) int { return cmp.Compare(s.Addr, a) })
	if !found {
		i--
	}
	if i < 0 {
		return "", 0, false
	}
	// Several symbols at one address (aliases): the search lands on one;
	// take the last of the run for a stable choice.
	for i+1 < len(t.syms) && t.syms[i+1].Addr == t.syms[i].Addr {
		i++
	}
	if t.end != 0 && t.syms[i].Addr == t.end {
		return "", 0, false // past the kernel's text, before any module's
	}
	if addr-t.syms[i].Addr > maxFuncSize {
		return "", 0, false // far past the last symbol: not a function of the file
	}
	return t.syms[i].Name, addr - t.syms[i].Addr, true
}

// Has reports whether a function symbol of that name exists.
func (t *Table) Has(name string) bool {
	for _, s := range t.syms {
		if s.Name == name {
			return true
		}
	}
	return false
}

// KASLROffset is what to add to the table's addresses to get the running
// guest's: VBAR_EL1 (where the guest kernel put its exception vectors)
// minus the table's `vectors`. It wraps modulo 2^64, so a kallsyms dump
// from a boot with a larger offset gives a "negative" one.
func (t *Table) KASLROffset(vbar uint64) (uint64, error) {
	if !t.hasVectors {
		return 0, errors.New("the symbol file has no `vectors` symbol to find the KASLR offset with: boot the guest with nokaslr")
	}
	if vbar == 0 {
		return 0, errors.New("the guest's VBAR_EL1 was not read: boot the guest with nokaslr")
	}
	return vbar - t.vectors, nil
}
