package cmdmode

import (
	"bytes"
	"debug/elf"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestStripped builds a small Go program as go build does (DWARF and a
// symbol table, like mvm's binary), strips it, runs both and reads their
// program headers: the stripped one is shorter, loads the same segments
// and prints the same, a traceback through the runtime's own tables
// included.
func TestStripped(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	dir := t.TempDir()
	src := "package main\n\nimport (\n\t\"fmt\"\n\t\"runtime\"\n)\n\nfunc main() {\n\tdefer func() {\n\t\tpc, file, line, _ := runtime.Caller(0)\n\t\tfmt.Println(recover(), runtime.FuncForPC(pc).Name(), file != \"\", line > 0)\n\t}()\n\tvar m map[string]int\n\tm[\"x\"] = 1\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	full := filepath.Join(dir, "full")
	build := exec.Command(gobin, "build", "-o", full, "main.go")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOFLAGS=", "GO111MODULE=off", "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	self, err := os.ReadFile(full)
	if err != nil {
		t.Fatal(err)
	}
	out := stripped(self)
	t.Logf("%d -> %d bytes", len(self), len(out))
	if len(out) > len(self)*9/10 {
		t.Fatalf("stripped %d bytes to %d: less than 10%% removed", len(self), len(out))
	}
	a, err := elf.NewFile(bytes.NewReader(self))
	if err != nil {
		t.Fatal(err)
	}
	b, err := elf.NewFile(bytes.NewReader(out))
	if err != nil {
		t.Fatalf("the stripped binary does not parse: %v", err)
	}
	if len(a.Progs) != len(b.Progs) {
		t.Fatalf("%d program headers, want %d", len(b.Progs), len(a.Progs))
	}
	for i := range a.Progs {
		if a.Progs[i].ProgHeader != b.Progs[i].ProgHeader {
			t.Errorf("program header %d changed: %+v -> %+v", i, a.Progs[i].ProgHeader, b.Progs[i].ProgHeader)
		}
	}
	strippedPath := filepath.Join(dir, "stripped")
	if err := os.WriteFile(strippedPath, out, 0o755); err != nil {
		t.Fatal(err)
	}
	want, err := exec.Command(full).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, want)
	}
	got, err := exec.Command(strippedPath).CombinedOutput()
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("the stripped binary printed %q (%v), the full one %q", got, err, want)
	}
	for _, junk := range [][]byte{nil, []byte("not elf"), self[:100]} {
		if got := stripped(junk); !bytes.Equal(got, junk) {
			t.Errorf("stripped changed %d bytes of non-ELF input", len(junk))
		}
	}
	// StrippedFile reads the same bytes from the file, twice.
	for _, c := range []struct {
		path string
		want []byte
	}{{full, out}, {writeTemp(t, []byte("not elf")), []byte("not elf")}} {
		f, err := StrippedFile(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if f.Size != int64(len(c.want)) {
			t.Errorf("StrippedFile(%s).Size = %d, want %d", c.path, f.Size, len(c.want))
		}
		for range 2 {
			r, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(r)
			r.(io.Closer).Close()
			if err != nil || !bytes.Equal(got, c.want) {
				t.Errorf("StrippedFile(%s) read %d bytes (%v), want stripped's %d, equal", c.path, len(got), err, len(c.want))
			}
		}
	}
	if _, err := StrippedFile(filepath.Join(dir, "missing")); err == nil {
		t.Error("StrippedFile of a missing file: no error")
	}
}

func writeTemp(t *testing.T, data []byte) string {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// stripped is StrippedFile's cut made in memory: the oracle the tests
// compare StrippedFile's bytes with.
func stripped(exe []byte) []byte {
	cut, hdr := strippedLen(bytes.NewReader(exe), int64(len(exe)))
	if hdr == nil {
		return exe
	}
	out := make([]byte, cut)
	copy(out, exe[:cut])
	copy(out, hdr)
	return out
}
