package guest

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The "newc" format, from the kernel's
// Documentation/driver-api/early-userspace/buffer-format.rst: a 110-byte
// ASCII header (magic "070701" and 13 eight-digit hex fields), the name
// with its NUL (namesize counts it), padding to 4 bytes, the data, padding
// to 4 bytes; the archive ends with an entry named "TRAILER!!!".
type newcEntry struct {
	offset           int // of the header in the archive
	ino, mode, nlink uint64
	uid, gid, mtime  uint64
	devMajor         uint64
	devMinor         uint64
	rdevMajor        uint64
	rdevMinor        uint64
	name             string // without the NUL
	data             []byte
}

// Stat type bits (include/uapi/linux/stat.h).
const (
	sIFMT  = 0o170000
	sIFDIR = 0o040000
	sIFREG = 0o100000
	sIFLNK = 0o120000
	sIFCHR = 0o020000
)

func parseNewc(b []byte) ([]newcEntry, error) {
	var out []newcEntry
	off := 0
	for {
		if off%4 != 0 {
			return nil, fmt.Errorf("header at %d is not 4-byte aligned", off)
		}
		if len(b)-off < 110 {
			return nil, fmt.Errorf("truncated header at %d", off)
		}
		h := b[off : off+110]
		if string(h[:6]) != "070701" {
			return nil, fmt.Errorf("bad magic %q at %d", h[:6], off)
		}
		var f [13]uint64
		for i := range f {
			s := string(h[6+8*i : 6+8*i+8])
			v, err := strconv.ParseUint(s, 16, 32)
			if err != nil {
				return nil, fmt.Errorf("header at %d, field %d: %q is not 8 hex digits", off, i, s)
			}
			f[i] = v
		}
		e := newcEntry{offset: off, ino: f[0], mode: f[1], uid: f[2], gid: f[3], nlink: f[4], mtime: f[5],
			devMajor: f[7], devMinor: f[8], rdevMajor: f[9], rdevMinor: f[10]}
		filesize, namesize, check := int(f[6]), int(f[11]), f[12]
		if check != 0 {
			return nil, fmt.Errorf("entry at %d: check field %#x, must be 0 for newc", off, check)
		}
		if namesize < 1 || off+110+namesize > len(b) {
			return nil, fmt.Errorf("entry at %d: bad namesize %d", off, namesize)
		}
		name := b[off+110 : off+110+namesize]
		if name[namesize-1] != 0 {
			return nil, fmt.Errorf("entry at %d: name %q not NUL-terminated", off, name)
		}
		e.name = string(name[:namesize-1])
		off += 110 + namesize
		for ; off%4 != 0; off++ {
			if off >= len(b) || b[off] != 0 {
				return nil, fmt.Errorf("entry %q: bad name padding", e.name)
			}
		}
		if off+filesize > len(b) {
			return nil, fmt.Errorf("entry %q: data runs past the end", e.name)
		}
		e.data = b[off : off+filesize]
		off += filesize
		for ; off%4 != 0; off++ {
			if off >= len(b) || b[off] != 0 {
				return nil, fmt.Errorf("entry %q: bad data padding", e.name)
			}
		}
		if e.name == "TRAILER!!!" {
			if off != len(b) {
				return nil, fmt.Errorf("%d bytes after the trailer", len(b)-off)
			}
			return out, nil
		}
		out = append(out, e)
	}
}

func archiveBytes(t testing.TB, a *Initramfs) []byte {
	t.Helper()
	var buf bytes.Buffer
	n, err := a.WriteTo(&buf)
	if err != nil {
		t.Fatalf("WriteTo: %v", err)
	}
	if n != int64(buf.Len()) {
		t.Fatalf("WriteTo returned %d, wrote %d bytes", n, buf.Len())
	}
	return buf.Bytes()
}

// wantFile is what the test archive should contain.
type wantFile struct {
	mode   fs.FileMode // type and permission bits as os.Lstat reports them
	data   string      // file contents
	target string      // symlink target
}

// testArchive builds the archive the host-cpio tests extract: files of
// every padding length, nested directories (some only implied), an empty
// file, permission variety, a symlink and an explicit empty directory. It
// adds dev explicitly, as a root filesystem has it (dev/console goes in
// it; see the bug report on archives without dev).
func testArchive(t *testing.T) (*Initramfs, map[string]wantFile) {
	t.Helper()
	a := NewInitramfs()
	want := map[string]wantFile{}
	dir := wantFile{mode: fs.ModeDir | 0o755}
	file := func(name, data string, perm uint32) {
		t.Helper()
		if err := a.AddFile(name, []byte(data), perm); err != nil {
			t.Fatalf("AddFile(%q): %v", name, err)
		}
		want[name] = wantFile{mode: fs.FileMode(perm & 0o777), data: data}
	}
	file("init", "#!/bin/sh\nexec /bin/sh\n", 0o755)
	file("etc/hostname", "mvm\n", 0o644)
	file("etc/ssh/keys/host_key", "secret", 0o600)
	file("empty", "", 0o644)
	for n := 1; n <= 7; n++ { // every data length mod 4
		file(fmt.Sprintf("usr/share/pad/%d", n), strings.Repeat(string(rune('a'+n)), n), 0o640)
	}
	bin := string(bytes.Repeat([]byte{0, 1, 2, 0xff, 0x7f, '\n'}, 1000))
	file("usr/lib/deep/a/b/c/blob.bin", bin, 0o444)
	file("bin/busybox", "\x7fELF fake busybox", 0o755)
	if err := a.AddSymlink("bin/sh", "busybox"); err != nil {
		t.Fatal(err)
	}
	want["bin/sh"] = wantFile{mode: fs.ModeSymlink | 0o777, target: "busybox"}
	if err := a.AddSymlink("lib", "/usr/lib"); err != nil {
		t.Fatal(err)
	}
	want["lib"] = wantFile{mode: fs.ModeSymlink | 0o777, target: "/usr/lib"}
	for _, d := range []string{"tmp", "dev", "proc/sys"} {
		if err := a.AddDir(d); err != nil {
			t.Fatal(err)
		}
	}
	// Every directory, explicit or implied, must be in the archive.
	for name := range want {
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			want[d] = dir
		}
	}
	for _, d := range []string{"tmp", "dev", "proc", "proc/sys"} {
		want[d] = dir
	}
	return a, want
}

func needCpio(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("cpio")
	if err != nil {
		t.Fatalf("these tests check archives with the host's GNU cpio, which is not installed (%v): apt-get install cpio", err)
	}
	return p
}

func writeArchiveFile(t *testing.T, a *Initramfs) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "initramfs.cpio")
	if err := os.WriteFile(f, archiveBytes(t, a), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func runCpio(t *testing.T, dir, archive string, args ...string) (stdout string) {
	t.Helper()
	in, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	cmd := exec.Command(needCpio(t), args...)
	cmd.Dir = dir
	cmd.Stdin = in
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("cpio %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.String()
}

func TestInitramfsExtractsWithHostCpio(t *testing.T) {
	a, want := testArchive(t)
	archive := writeArchiveFile(t, a)
	dir := t.TempDir()
	// -d: make directories, -m: keep mtimes, -v: list. dev/console is left
	// out: creating a device node needs CAP_MKNOD, which the test may not
	// have; TestInitramfsCpioListing checks its header instead.
	runCpio(t, dir, archive, "-idmv", "--no-absolute-filenames", "-f", "dev/console")

	got := map[string]fs.FileInfo{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		fi, err := os.Lstat(p)
		got[filepath.ToSlash(rel)] = fi
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, w := range want {
		fi, ok := got[name]
		if !ok {
			t.Errorf("%s: not extracted", name)
			continue
		}
		p := filepath.Join(dir, name)
		if fi.Mode().Type() != w.mode.Type() {
			t.Errorf("%s: type %v, want %v", name, fi.Mode().Type(), w.mode.Type())
			continue
		}
		switch {
		case w.mode.IsDir():
			if fi.Mode().Perm() != w.mode.Perm() {
				t.Errorf("%s: mode %v, want %v", name, fi.Mode(), w.mode)
			}
		case w.mode&fs.ModeSymlink != 0:
			if target, err := os.Readlink(p); err != nil || target != w.target {
				t.Errorf("%s: symlink to %q (%v), want %q", name, target, err, w.target)
			}
		default:
			if fi.Mode() != w.mode {
				t.Errorf("%s: mode %v, want %v", name, fi.Mode(), w.mode)
			}
			data, err := os.ReadFile(p)
			if err != nil || string(data) != w.data {
				t.Errorf("%s: contents %q (%v), want %q", name, data, err, w.data)
			}
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: extracted but never added", name)
		}
	}
}

func TestInitramfsCpioListing(t *testing.T) {
	a, want := testArchive(t)
	archive := writeArchiveFile(t, a)
	names := strings.Fields(runCpio(t, t.TempDir(), archive, "-it"))
	// The kernel does not create missing parent directories while
	// unpacking (init/initramfs.c), so each must come before its contents.
	seen := map[string]bool{}
	for _, n := range names {
		if strings.HasPrefix(n, "/") || n == "." || strings.Contains("/"+n+"/", "/../") {
			t.Errorf("entry %q: not a clean relative path", n)
		}
		if d := path.Dir(n); d != "." && !seen[d] {
			t.Errorf("%s comes before its directory %s", n, d)
		}
		if seen[n] {
			t.Errorf("%s is in the archive twice", n)
		}
		seen[n] = true
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("%s missing from cpio -t", name)
		}
	}
	// The builder adds /dev/console, char 5,1 (Documentation/admin-guide/
	// devices.txt), for the kernel's console before devtmpfs is mounted.
	if !seen["dev/console"] {
		t.Fatal("dev/console missing from the archive")
	}
	for _, line := range strings.Split(runCpio(t, t.TempDir(), archive, "-itv"), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[len(f)-1] != "dev/console" {
			continue
		}
		if !strings.HasPrefix(f[0], "c") {
			t.Errorf("dev/console is not a character device: %q", line)
		}
		if !strings.Contains(strings.Join(f, " "), "5, 1") {
			t.Errorf("dev/console is not device 5,1: %q", line)
		}
	}
}

func TestInitramfsNewcStructure(t *testing.T) {
	a, want := testArchive(t)
	entries, err := parseNewc(archiveBytes(t, a))
	if err != nil {
		t.Fatalf("not a valid newc archive: %v", err)
	}
	inos := map[uint64]string{}
	for _, e := range entries {
		if prev, dup := inos[e.ino]; dup {
			t.Errorf("%s and %s share inode %d (the kernel would hard-link them)", prev, e.name, e.ino)
		}
		inos[e.ino] = e.name
		if e.name == "dev/console" {
			if e.mode&sIFMT != sIFCHR || e.rdevMajor != 5 || e.rdevMinor != 1 {
				t.Errorf("dev/console: mode %o rdev %d,%d, want a char device 5,1", e.mode, e.rdevMajor, e.rdevMinor)
			}
			continue
		}
		w, ok := want[e.name]
		if !ok {
			t.Errorf("unexpected entry %q", e.name)
			continue
		}
		switch {
		case w.mode.IsDir():
			if e.mode&sIFMT != sIFDIR || len(e.data) != 0 {
				t.Errorf("%s: mode %o with %d bytes, want an empty directory entry", e.name, e.mode, len(e.data))
			}
		case w.mode&fs.ModeSymlink != 0:
			if e.mode&sIFMT != sIFLNK || string(e.data) != w.target {
				t.Errorf("%s: mode %o data %q, want a symlink to %q", e.name, e.mode, e.data, w.target)
			}
		default:
			if e.mode != sIFREG|uint64(w.mode.Perm()) || string(e.data) != w.data || e.nlink != 1 {
				t.Errorf("%s: mode %o nlink %d, %d bytes; want %o, 1, %d bytes", e.name, e.mode, e.nlink, len(e.data), sIFREG|uint64(w.mode.Perm()), len(w.data))
			}
		}
	}
	if len(entries) != len(want)+1 { // + dev/console
		t.Errorf("%d entries, want %d", len(entries), len(want)+1)
	}
}

func TestInitramfsSpecialPermissionBits(t *testing.T) {
	a := NewInitramfs()
	for name, perm := range map[string]uint32{"su": 0o4755, "wall": 0o2755, "tmp": 0o1777, "typebits": 0o100644} {
		if err := a.AddFile(name, []byte("x"), perm); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := parseNewc(archiveBytes(t, a))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{"su": sIFREG | 0o4755, "wall": sIFREG | 0o2755, "tmp": sIFREG | 0o1777, "typebits": sIFREG | 0o644}
	for _, e := range entries {
		if w, ok := want[e.name]; ok && e.mode != w {
			t.Errorf("%s: mode %o, want %o (a file keeps setuid/setgid/sticky and is always a regular file)", e.name, e.mode, w)
		}
	}
}

func TestInitramfsGzip(t *testing.T) {
	a, _ := testArchive(t)
	raw := archiveBytes(t, a)
	gz, err := a.Gzip()
	if err != nil {
		t.Fatalf("Gzip: %v", err)
	}
	if len(gz) < 2 || gz[0] != 0x1f || gz[1] != 0x8b {
		t.Fatalf("Gzip output does not start with the gzip magic 1f 8b")
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	zr.Multistream(false)
	got, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("decompress: %v", err)
	}
	if !bytes.Equal(got, raw) {
		t.Errorf("Gzip decompresses to %d bytes that differ from WriteTo's %d", len(got), len(raw))
	}
	// Deterministic: the same archive twice gives the same bytes.
	if again := archiveBytes(t, a); !bytes.Equal(again, raw) {
		t.Error("two WriteTo calls on the same archive differ")
	}
}

func TestInitramfsEmptyArchive(t *testing.T) {
	entries, err := parseNewc(archiveBytes(t, NewInitramfs()))
	if err != nil {
		t.Fatalf("empty archive: %v", err)
	}
	for _, e := range entries {
		if e.name != "dev/console" && e.name != "dev" {
			t.Errorf("empty archive holds %q", e.name)
		}
	}
}

func TestInitramfsBadPaths(t *testing.T) {
	bad := []string{"", "/", ".", "//", "./", "/.", "a/..", "..", "../..", "/a/../"}
	adders := map[string]func(a *Initramfs, name string) error{
		"AddFile":    func(a *Initramfs, n string) error { return a.AddFile(n, []byte("x"), 0o644) },
		"AddDir":     func(a *Initramfs, n string) error { return a.AddDir(n) },
		"AddSymlink": func(a *Initramfs, n string) error { return a.AddSymlink(n, "target") },
	}
	for what, add := range adders {
		for _, name := range bad {
			a := NewInitramfs()
			if err := add(a, name); err == nil {
				t.Errorf("%s(%q) succeeded, want an error", what, name)
			} else if !strings.Contains(err.Error(), strconv.Quote(name)) {
				t.Errorf("%s(%q): error %q does not quote the path", what, name, err)
			}
		}
	}
}

func TestInitramfsPathsAreMadeRelative(t *testing.T) {
	tests := map[string]string{
		"/init":              "init",
		"./etc/passwd":       "etc/passwd",
		"../../escape":       "escape",
		"/usr//bin/../lib/x": "usr/lib/x",
		"a/./b/":             "a/b",
	}
	for in, want := range tests {
		a := NewInitramfs()
		if err := a.AddFile(in, []byte("x"), 0o644); err != nil {
			t.Errorf("AddFile(%q): %v", in, err)
			continue
		}
		entries, err := parseNewc(archiveBytes(t, a))
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, e := range entries {
			if e.mode&sIFMT == sIFREG {
				found = true
				if e.name != want {
					t.Errorf("AddFile(%q) stored %q, want %q", in, e.name, want)
				}
			}
		}
		if !found {
			t.Errorf("AddFile(%q): no regular file in the archive", in)
		}
	}
}

func TestInitramfsAddHostFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "tool")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o751); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o751); err != nil { // past the umask
		t.Fatal(err)
	}
	a := NewInitramfs()
	if err := a.AddHostFile("bin/tool", p); err != nil {
		t.Fatal(err)
	}
	entries, err := parseNewc(archiveBytes(t, a))
	if err != nil {
		t.Fatal(err)
	}
	var ok bool
	for _, e := range entries {
		if e.name == "bin/tool" {
			ok = e.mode == sIFREG|0o751 && string(e.data) == "#!/bin/sh\n"
		}
	}
	if !ok {
		t.Error("bin/tool not in the archive with mode 0751 and the host file's contents")
	}
	err = a.AddHostFile("x", filepath.Join(dir, "missing"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("AddHostFile(missing) = %v, want an error wrapping fs.ErrNotExist", err)
	}
}

type failWriter struct{ after int }

func (f *failWriter) Write(p []byte) (int, error) {
	if f.after <= 0 {
		return 0, errors.New("disk full")
	}
	f.after--
	return len(p), nil
}

func TestInitramfsWriteToReportsErrors(t *testing.T) {
	a, _ := testArchive(t)
	for _, after := range []int{0, 1, 5, 50} {
		if _, err := a.WriteTo(&failWriter{after: after}); err == nil || !strings.Contains(err.Error(), "disk full") {
			t.Errorf("WriteTo a writer failing after %d writes: err = %v, want the writer's error", after, err)
		}
	}
}

// FuzzInitramfs adds entries named by the fuzzer and checks that the
// archive is always well-formed newc, that every entry name is clean and
// relative, that the last entry added under a name wins, and that parents
// come before their contents.
func FuzzInitramfs(f *testing.F) {
	f.Add("init;etc/passwd;bin/sh>busybox;usr/lib/", []byte("data"))
	f.Add("/a/b/c;a/b;../x;./y/", []byte{})
	f.Add("a;a/;a>b;dev/console", []byte{0, 1, 2})
	f.Fuzz(func(t *testing.T, spec string, data []byte) {
		a := NewInitramfs()
		if err := a.AddDir("dev"); err != nil {
			t.Fatal(err)
		}
		type kind int
		const (
			kFile kind = iota
			kDir
			kLink
		)
		last := map[string]kind{}
		for _, item := range strings.Split(spec, ";") {
			var err error
			var k kind
			name, target, isLink := strings.Cut(item, ">")
			switch {
			case isLink:
				k, err = kLink, a.AddSymlink(name, target)
			case strings.HasSuffix(name, "/"):
				k, err = kDir, a.AddDir(name)
			default:
				k, err = kFile, a.AddFile(name, data, 0o644)
			}
			clean := strings.TrimPrefix(path.Clean("/"+name), "/")
			if clean == "" {
				if err == nil {
					t.Fatalf("adding %q (the root) succeeded", item)
				}
				continue
			}
			if err != nil {
				// A file where a directory is (or the reverse) cannot
				// be unpacked, so the builder refuses it.
				// A NUL cannot be in a newc name either.
				if strings.Contains(err.Error(), "not a directory") || strings.Contains(err.Error(), "directory with entries") || strings.ContainsRune(name, 0) || strings.ContainsRune(target, 0) {
					continue
				}
				t.Fatalf("adding %q: %v", item, err)
			}
			last[clean] = k
		}
		raw := archiveBytes(t, a)
		entries, err := parseNewc(raw)
		if err != nil {
			t.Fatalf("archive is not valid newc: %v", err)
		}
		byName := map[string]newcEntry{}
		for _, e := range entries {
			if e.name == "" || strings.HasPrefix(e.name, "/") || path.Clean(e.name) != e.name {
				t.Fatalf("entry name %q is not a clean relative path", e.name)
			}
			if d := path.Dir(e.name); d != "." {
				if _, ok := byName[d]; !ok {
					t.Fatalf("%q comes before its directory %q", e.name, d)
				}
			}
			// A name added twice is stored once. (dev/console added by
			// the caller is the exception reported with this test: the
			// builder appends its own.)
			if _, dup := byName[e.name]; dup && e.name != "dev/console" {
				t.Fatalf("%q is in the archive twice", e.name)
			}
			byName[e.name] = e
		}
		for name, k := range last {
			e, ok := byName[name]
			if !ok {
				t.Fatalf("%q added but not in the archive", name)
			}
			if name == "dev/console" {
				continue // the builder's own node is written after
			}
			switch want := map[kind]uint64{kFile: sIFREG, kDir: sIFDIR, kLink: sIFLNK}[k]; {
			case e.mode&sIFMT != want:
				t.Fatalf("%q: mode %o, want type %o", name, e.mode, want)
			case k == kFile && !bytes.Equal(e.data, data):
				t.Fatalf("%q: data differs", name)
			}
		}
	})
}

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

// TestInitramfsAddFileFrom: a file given by a reader is in the archive
// as AddFile would put it (same bytes), each write reads it anew, Size is
// the written length with and without such files, and a source shorter
// than its size fails the write.
func TestInitramfsAddFileFrom(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789abc"), 1001) // 13013 bytes: padding needed
	opens := 0
	open := func() (io.Reader, error) { opens++; return bytes.NewReader(body), nil }
	a, b := NewInitramfs(), NewInitramfs()
	for _, x := range []*Initramfs{a, b} {
		if err := x.AddFile("etc/conf", []byte("x=1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.AddFile("init", body, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := b.AddFileFrom("init", int64(len(body)), open, 0o755); err != nil {
		t.Fatal(err)
	}
	want := archiveBytes(t, a)
	if a.Size() != int64(len(want)) {
		t.Errorf("Size() = %d, WriteTo wrote %d", a.Size(), len(want))
	}
	for i := range 2 {
		if got := archiveBytes(t, b); !bytes.Equal(got, want) {
			t.Fatalf("write %d: the archive with AddFileFrom differs from AddFile's (%d vs %d bytes)", i, len(got), len(want))
		}
	}
	if opens != 2 || b.Size() != int64(len(want)) {
		t.Errorf("%d opens for 2 writes, Size() %d of %d", opens, b.Size(), len(want))
	}
	short := NewInitramfs()
	short.AddFileFrom("init", int64(len(body))+1, open, 0o755)
	if _, err := short.WriteTo(io.Discard); err == nil || !strings.Contains(err.Error(), "want") {
		t.Errorf("a source one byte short: err %v, want a size mismatch", err)
	}
	if err := short.AddFileFrom("big", 1<<32, open, 0o644); err == nil {
		t.Error("a file over newc's 4 GiB: no error")
	}
}
