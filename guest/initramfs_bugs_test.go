package guest

import (
	"path"
	"strings"
	"testing"
)

// The kernel's unpacker (init/initramfs.c) creates no missing parent
// directories, so an archive must list every directory before its
// contents. An archive built without an explicit "dev" has dev/console
// but no dev.
func TestInitramfsDevConsoleHasItsDirectory(t *testing.T) {
	a := NewInitramfs()
	if err := a.AddFile("init", []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	archive := writeArchiveFile(t, a)
	seen := map[string]bool{}
	for _, n := range strings.Fields(runCpio(t, t.TempDir(), archive, "-it")) {
		if d := path.Dir(n); d != "." && !seen[d] {
			t.Errorf("%s comes before (or without) its directory %s", n, d)
		}
		seen[n] = true
	}
}

// A path cannot be both a file and a directory; the archive would not
// unpack (cpio: "a/b: Cannot open: Not a directory").
func TestInitramfsFileDirectoryConflict(t *testing.T) {
	a := NewInitramfs()
	if err := a.AddFile("a", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := a.AddFile("a/b", []byte("y"), 0o644); err == nil {
		t.Error(`AddFile("a/b") after file "a" succeeded, want an error`)
	}
	b := NewInitramfs()
	if err := b.AddFile("d/f", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := b.AddFile("d", []byte("y"), 0o644); err == nil {
		t.Error(`AddFile("d") over the directory holding d/f succeeded, want an error`)
	}
}

// newc names are NUL-terminated strings: a name with a NUL in it is cut
// short by the kernel and by cpio.
func TestInitramfsNULInName(t *testing.T) {
	a := NewInitramfs()
	if err := a.AddFile("bin/a\x00b", []byte("x"), 0o644); err == nil {
		t.Error(`AddFile("bin/a\x00b") succeeded, want an error`)
	}
}

// Adding dev/console (as a copy of a root filesystem would) puts it in the
// archive twice.
func TestInitramfsDevConsoleOnce(t *testing.T) {
	a := NewInitramfs()
	if err := a.AddDir("dev"); err != nil {
		t.Fatal(err)
	}
	if err := a.AddFile("dev/console", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	entries, err := parseNewc(archiveBytes(t, a))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if e.name == "dev/console" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("dev/console is in the archive %d times", n)
	}
}
