package symbols

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const kallsyms = `ffffc0bd9ec00000 T _text
ffffc0bd9ec10000 T _stext
ffffc0bd9ec10800 T vectors
ffffc0bd9ec11000 t el1h_64_sync
ffffc0bd9ec11200 T cpu_do_idle
ffffc0bd9ec11200 T arch_cpu_idle_alias
ffffc0bd9ec20000 D some_data
0000000000000000 T hidden_without_privilege
ffffc0bd9ec30000 T _etext
ffffc0bda0000000 t vhost_worker	[vhost]
`

func TestParseKallsyms(t *testing.T) {
	tab, err := ParseText(strings.NewReader(kallsyms))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		addr uint64
		name string
		off  uint64
		ok   bool
	}{
		{0xffffc0bd9ec10800, "vectors", 0, true},
		{0xffffc0bd9ec11010, "el1h_64_sync", 0x10, true},
		{0xffffc0bd9ec11204, "cpu_do_idle", 4, true},
		{0xffffc0bd9ec2ffff, "cpu_do_idle", 0x1edff, true}, // data symbols are not functions
		{0xffffc0bd9ec30010, "", 0, false},                 // past _etext
		{0xffffc0bda0000008, "vhost_worker", 8, true},      // module text
		{0x1000, "", 0, false},
	} {
		name, off, ok := tab.Lookup(c.addr)
		if ok != c.ok || (ok && (name != c.name && !(c.name == "cpu_do_idle" && name == "arch_cpu_idle_alias") || off != c.off)) {
			t.Errorf("Lookup(%#x) = %q+%#x %v, want %q+%#x %v", c.addr, name, off, ok, c.name, c.off, c.ok)
		}
	}
	if tab.Has("hidden_without_privilege") || tab.Has("some_data") {
		t.Error("zero-address or data symbols kept")
	}
	v, ok := tab.Vectors()
	if !ok || v != 0xffffc0bd9ec10800 {
		t.Errorf("vectors %#x %v", v, ok)
	}
	// The guest booted with another KASLR offset: its VBAR is below the
	// dump's vectors; the offset wraps and maps back.
	off, err := tab.KASLROffset(0xffff800080010800)
	if err != nil {
		t.Fatal(err)
	}
	if name, _, _ := tab.Lookup(0xffff800080011010 - off); name != "el1h_64_sync" {
		t.Errorf("offset %#x maps a guest PC to %q", off, name)
	}
	if _, err := tab.KASLROffset(0); err == nil || !strings.Contains(err.Error(), "nokaslr") {
		t.Errorf("no VBAR: %v", err)
	}
}

func TestParseTextErrors(t *testing.T) {
	for name, in := range map[string]string{
		"stub":        "ffffffffffffffff B The real System.map is in the linux-image-<version>-dbg package\n",
		"empty":       "",
		"not hex":     "zzzz T foo\n",
		"fields":      "ffff T\n",
		"long type":   "ffff TT foo\n",
		"bad module":  "ffff T foo bar\n",
		"binary":      "ffff T fo\x00o\n",
		"long line":   "ffff T " + strings.Repeat("a", 5000) + "\n",
		"addr digits": "1ffffffffffffffff T foo\n",
	} {
		_, err := ParseText(strings.NewReader(in))
		if err == nil || !errors.Is(err, ErrFormat) {
			t.Errorf("%s: %v, want ErrFormat", name, err)
		}
		if name == "stub" && !strings.Contains(err.Error(), "-dbg") {
			t.Errorf("stub error does not say where the real one is: %v", err)
		}
	}
	// A huge file stops at the limit instead of reading it all.
	huge := strings.NewReader(strings.Repeat("ffff800080000000 D f\n", MaxTextBytes/20+10))
	if _, err := ParseText(huge); err == nil || !strings.Contains(err.Error(), "MiB") {
		t.Errorf("huge file: %v", err)
	}
}

func TestOpenELF(t *testing.T) {
	// A real ELF with a symbol table: a small Go program built here (test
	// binaries are linked without one).
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	os.WriteFile(src, []byte("package main\n\nfunc main() {}\n"), 0o644)
	exe := filepath.Join(dir, "prog")
	cmd := exec.Command("go", "build", "-o", exe, src)
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GO111MODULE=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	tab, err := Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	if tab.Kind != "ELF" || tab.Len() < 100 {
		t.Fatalf("%s: %d symbols", tab.Kind, tab.Len())
	}
	if !tab.Has("main.main") && !tab.Has("testing.tRunner") {
		t.Error("no Go function symbols found in the test binary")
	}
	// A stripped ELF has no symbol table.
	stripped := filepath.Join(dir, "stripped")
	cmd = exec.Command("go", "build", "-ldflags=-s", "-o", stripped, src)
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GO111MODULE=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build -ldflags=-s: %v\n%s", err, out)
	}
	if _, err := Open(stripped); err == nil || !errors.Is(err, ErrFormat) {
		t.Errorf("stripped ELF: %v", err)
	}
	// A truncated ELF is a format error, not a panic.
	data, _ := os.ReadFile(exe)
	trunc := filepath.Join(dir, "trunc")
	os.WriteFile(trunc, data[:200], 0o644)
	if _, err := Open(trunc); err == nil {
		t.Error("truncated ELF accepted")
	}
}

func FuzzParseText(f *testing.F) {
	f.Add([]byte(kallsyms))
	f.Add([]byte("ffffffffffffffff B The real System.map is in the linux-image-<version>-dbg package\n"))
	f.Add([]byte("ffff T a\nffff T a [m]\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tab, err := ParseText(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error without ErrFormat: %v", err)
			}
			return
		}
		if tab.Len() == 0 {
			t.Fatal("a table without symbols")
		}
		for i := 1; i < len(tab.syms); i++ {
			if tab.syms[i].Addr < tab.syms[i-1].Addr {
				t.Fatal("symbols not sorted")
			}
		}
		for _, s := range tab.syms {
			if s.Addr == tab.end {
				continue // _etext closes the text
			}
			if name, _, ok := tab.Lookup(s.Addr); !ok || name == "" {
				t.Fatalf("symbol %+v does not look itself up", s)
			}
		}
	})
}

func FuzzParseELF(f *testing.F) {
	exe, err := os.Executable()
	if err == nil {
		if data, err := os.ReadFile(exe); err == nil && len(data) > 4096 {
			f.Add(data[:4096])
		}
	}
	f.Add([]byte("\x7fELF\x02\x01\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ParseELF(bytes.NewReader(data)) // must not panic
	})
}

func TestGuestCode(t *testing.T) {
	tab, err := ParseText(strings.NewReader(kallsyms))
	if err != nil {
		t.Fatal(err)
	}
	// The guest runs 0x1000 above the dump's addresses.
	const off = 0x1000
	pcs := map[string]map[uint64]uint64{
		"WFx":      {0xffffc0bd9ec11204 + off: 90, 0xffffc0bd9ec11208 + off: 5},
		"DABT_LOW": {0xffffc0bd9ec11010 + off: 7, 0xffffc0bd9ec11014 + off: 9, 0x0000aaaa00001000: 3, 0xffffc0bdb0000000 + off: 1},
	}
	got := GuestCode(pcs, map[string]uint64{"DABT_LOW": 2}, tab, off, 2)
	if len(got) != 2 || got[0].Reason != "WFx" || got[1].Reason != "DABT_LOW" {
		t.Fatalf("reasons %+v", got)
	}
	if f := got[0].Functions; len(f) != 1 || f[0].Samples != 95 || !strings.HasSuffix(f[0].TopPC, "+0x4") {
		t.Errorf("WFx functions %+v", f)
	}
	d := got[1]
	if len(d.Functions) != 2 || d.Functions[0].Function != "el1h_64_sync" || d.Functions[0].Samples != 16 ||
		d.Functions[0].TopPC != "el1h_64_sync+0x14" || d.Functions[1].Function != UserCode || d.Functions[1].Samples != 3 {
		t.Errorf("DABT_LOW functions %+v", d.Functions)
	}
	if d.Other != 2+1 { // the bound's 2 and the 1 past the top 2
		t.Errorf("DABT_LOW other %d", d.Other)
	}
	raw := GuestCode(pcs, nil, nil, 0, 10)
	if raw[0].Functions[0].Function != "0xffffc0bd9ec12204" {
		t.Errorf("raw PCs %+v", raw[0].Functions)
	}
}
