package guest

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
)

// Initramfs builds a Linux initramfs: a cpio archive in the "newc" format
// (Documentation/driver-api/early-userspace/buffer-format.rst), optionally
// gzip-compressed. Parent directories are created implicitly.
type Initramfs struct {
	entries map[string]entry
}

type entry struct {
	mode uint32 // full st_mode: type and permission bits
	data []byte // file contents or symlink target
	// open, when set, gives the file's size bytes instead of data, each
	// time the archive is written (AddFileFrom).
	open func() (io.Reader, error)
	size int64
}

// length is the entry's data length in the archive.
func (e entry) length() int64 {
	if e.open != nil {
		return e.size
	}
	return int64(len(e.data))
}

// File modes for newc headers (include/uapi/linux/stat.h).
const (
	modeDir     = 0o040000
	modeFile    = 0o100000
	modeSymlink = 0o120000
	modeChar    = 0o020000
)

// NewInitramfs returns an empty archive.
func NewInitramfs() *Initramfs {
	return &Initramfs{entries: map[string]entry{}}
}

func clean(name string) (string, error) {
	n := strings.TrimPrefix(path.Clean("/"+name), "/")
	if n == "" || n == "." || strings.ContainsRune(n, 0) {
		return "", fmt.Errorf("initramfs: bad path %q", name)
	}
	return n, nil
}

// addParents creates the missing directories above n; an ancestor that is
// not a directory is an error (the archive could not be unpacked).
func (a *Initramfs) addParents(n string) error {
	for d := path.Dir(n); d != "." && d != "/"; d = path.Dir(d) {
		e, ok := a.entries[d]
		if !ok {
			a.entries[d] = entry{mode: modeDir | 0o755}
			continue
		}
		if e.mode&0o170000 != modeDir {
			return fmt.Errorf("initramfs: %s: %s is not a directory", n, d)
		}
	}
	return nil
}

// place checks that n can become a non-directory entry and creates its
// parents.
func (a *Initramfs) place(n string) error {
	if e, ok := a.entries[n]; ok && e.mode&0o170000 == modeDir {
		prefix := n + "/"
		for k := range a.entries {
			if strings.HasPrefix(k, prefix) {
				return fmt.Errorf("initramfs: %s is a directory with entries", n)
			}
		}
	}
	return a.addParents(n)
}

// AddFile adds a regular file with permission bits perm.
func (a *Initramfs) AddFile(name string, data []byte, perm uint32) error {
	n, err := clean(name)
	if err != nil {
		return err
	}
	if err := a.place(n); err != nil {
		return err
	}
	a.entries[n] = entry{mode: modeFile | perm&0o7777, data: data}
	return nil
}

// AddFileFrom adds a regular file of size bytes whose contents open
// returns each time the archive is written, so that a large file goes
// from its source straight to the archive's writer (with WriteTo into
// guest RAM: command mode's init, the size of mvm's binary, never passes
// through mvm's heap). WriteTo fails if the reader gives fewer bytes.
func (a *Initramfs) AddFileFrom(name string, size int64, open func() (io.Reader, error), perm uint32) error {
	n, err := clean(name)
	if err != nil {
		return err
	}
	if size < 0 || size > 0xffffffff {
		// newc's filesize field is 32 bits.
		return fmt.Errorf("initramfs: %s: size %d out of range", n, size)
	}
	if err := a.place(n); err != nil {
		return err
	}
	a.entries[n] = entry{mode: modeFile | perm&0o7777, open: open, size: size}
	return nil
}

// AddHostFile adds the contents of a host file, keeping its permission bits.
func (a *Initramfs) AddHostFile(name, hostPath string) error {
	st, err := os.Stat(hostPath)
	if err != nil {
		return fmt.Errorf("initramfs: %w", err)
	}
	data, err := os.ReadFile(hostPath)
	if err != nil {
		return fmt.Errorf("initramfs: %w", err)
	}
	return a.AddFile(name, data, uint32(st.Mode().Perm()))
}

// AddDir adds a directory.
func (a *Initramfs) AddDir(name string) error {
	n, err := clean(name)
	if err != nil {
		return err
	}
	if e, ok := a.entries[n]; ok && e.mode&0o170000 != modeDir {
		return fmt.Errorf("initramfs: %s exists and is not a directory", n)
	}
	if err := a.addParents(n); err != nil {
		return err
	}
	a.entries[n] = entry{mode: modeDir | 0o755}
	return nil
}

// AddSymlink adds a symbolic link to target.
func (a *Initramfs) AddSymlink(name, target string) error {
	n, err := clean(name)
	if err != nil {
		return err
	}
	if err := a.place(n); err != nil {
		return err
	}
	a.entries[n] = entry{mode: modeSymlink | 0o777, data: []byte(target)}
	return nil
}

// WriteTo writes the uncompressed newc archive.
func (a *Initramfs) WriteTo(w io.Writer) (int64, error) {
	cw := &countWriter{w: w}
	a.walk(func(ino uint32, name string, e entry, rdev uint32) {
		writeEntry(cw, ino, name, e, rdev)
	})
	return cw.n, cw.err
}

// Size is the length of the uncompressed archive WriteTo writes, known
// without reading any AddFileFrom source.
func (a *Initramfs) Size() int64 {
	var n int64
	a.walk(func(_ uint32, name string, e entry, _ uint32) {
		n += align4(headerLen+int64(len(name))+1) + align4(e.length())
	})
	return n
}

// walk calls fn for each entry of the archive in order, with its inode
// number and device number.
func (a *Initramfs) walk(fn func(ino uint32, name string, e entry, rdev uint32)) {
	names := make([]string, 0, len(a.entries))
	for n := range a.entries {
		names = append(names, n)
	}
	// Sorted order puts every directory before its contents.
	sort.Strings(names)
	ino := uint32(1)
	for _, n := range names {
		fn(ino, n, a.entries[n], 0)
		ino++
	}
	// The console node the kernel opens for init before devtmpfs is
	// mounted; the unpacker creates no missing parents, so dev comes first.
	if _, ok := a.entries["dev/console"]; !ok {
		if _, ok := a.entries["dev"]; !ok {
			fn(ino, "dev", entry{mode: modeDir | 0o755}, 0)
			ino++
		}
		fn(ino, "dev/console", entry{mode: modeChar | 0o600}, 5<<8|1)
	}
	fn(0, "TRAILER!!!", entry{}, 0)
}

// Gzip returns the archive compressed with gzip, as the kernel's
// CONFIG_RD_GZIP unpacks it.
func (a *Initramfs) Gzip() ([]byte, error) {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	if _, err := a.WriteTo(zw); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}

// ReadFrom passes a copy on to the writer's own ReadFrom where it has one
// (reading straight into the destination), else copies through Write.
func (c *countWriter) ReadFrom(r io.Reader) (int64, error) {
	if c.err != nil {
		return 0, c.err
	}
	var n int64
	var err error
	if rf, ok := c.w.(io.ReaderFrom); ok {
		n, err = rf.ReadFrom(r)
	} else {
		n, err = io.Copy(struct{ io.Writer }{c.w}, r)
	}
	c.n += n
	c.err = err
	return n, err
}

// headerLen is the length of a newc header ("070701" and 13 fields of 8
// hex digits).
const headerLen = 6 + 13*8

func align4(n int64) int64 { return (n + 3) &^ 3 }

// writeEntry writes one newc header, name and data, each padded to 4 bytes.
// rdev packs major<<8|minor.
func writeEntry(w *countWriter, ino uint32, name string, e entry, rdev uint32) {
	nlink := 1
	if e.mode&0o170000 == modeDir {
		nlink = 2
	}
	size := e.length()
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		ino, e.mode, 0, 0, nlink, 0, size, 0, 0, rdev>>8, rdev&0xff, len(name)+1, 0)
	io.WriteString(w, hdr)
	io.WriteString(w, name)
	w.Write([]byte{0})
	pad(w, len(hdr)+len(name)+1)
	if e.open == nil {
		w.Write(e.data)
	} else if w.err == nil {
		r, err := e.open()
		if err != nil {
			w.err = fmt.Errorf("initramfs: %s: %w", name, err)
			return
		}
		if n, err := w.ReadFrom(io.LimitReader(r, size)); err == nil && n != size {
			w.err = fmt.Errorf("initramfs: %s: %d bytes, want %d (did it change?)", name, n, size)
		} else if err != nil {
			w.err = fmt.Errorf("initramfs: %s: %w", name, err)
		}
		if c, ok := r.(io.Closer); ok {
			c.Close()
		}
	}
	pad(w, int(size))
}

func pad(w io.Writer, n int) {
	if r := n % 4; r != 0 {
		w.Write(make([]byte, 4-r))
	}
}
