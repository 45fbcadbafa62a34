//go:build linux

package virtio

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	hvirtio "github.com/c35s/hype/virtio"
	"golang.org/x/sys/unix"
)

func blkHeader(typ uint32, sector uint64) []byte {
	h := make([]byte, 16)
	binary.LittleEndian.PutUint32(h, typ)
	binary.LittleEndian.PutUint64(h[8:], sector)
	return h
}

func tempImage(t *testing.T, size int) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "disk.img")
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i / 512)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const allFeatures = ^uint64(0)

func TestBlockReadWriteFlush(t *testing.T) {
	p := tempImage(t, 64<<10)
	b, err := OpenDisk("virtio-blk0", p, false)
	if err != nil {
		t.Fatal(err)
	}
	d := newTestDriver(t, b, 16, allFeatures)
	var cfg [8]byte
	d.tr.Read(regConfig, cfg[:])
	if got := binary.LittleEndian.Uint64(cfg[:]); got != 128 {
		t.Errorf("capacity %d sectors, want 128", got)
	}
	if d.r32(regDeviceID) != uint32(hvirtio.BlockDeviceID) {
		t.Errorf("device ID %d", d.r32(regDeviceID))
	}

	// Read sectors 3..4 with the data split over two descriptors.
	addrs := d.submit(0, buf{data: blkHeader(blkTIn, 3)}, buf{data: make([]byte, 512), write: true},
		buf{data: make([]byte, 512), write: true}, buf{data: []byte{0xff}, write: true})
	_, n := d.waitUsed(0)
	if n != 1025 {
		t.Errorf("read used len %d, want 1025", n)
	}
	if st := d.ram.at(addrs[3], 1)[0]; st != blkSOK {
		t.Fatalf("read status %d", st)
	}
	if got := d.ram.at(addrs[1], 512); !bytes.Equal(got, bytes.Repeat([]byte{3}, 512)) {
		t.Errorf("sector 3 read back %v...", got[:4])
	}
	if got := d.ram.at(addrs[2], 512); !bytes.Equal(got, bytes.Repeat([]byte{4}, 512)) {
		t.Errorf("sector 4 read back %v...", got[:4])
	}

	// Write sector 7, flush, and find it in the file.
	pattern := bytes.Repeat([]byte("mvm!"), 128)
	addrs = d.submit(0, buf{data: blkHeader(blkTOut, 7)}, buf{data: pattern}, buf{data: []byte{0xff}, write: true})
	d.waitUsed(0)
	if st := d.ram.at(addrs[2], 1)[0]; st != blkSOK {
		t.Fatalf("write status %d", st)
	}
	addrs = d.submit(0, buf{data: blkHeader(blkTFlush, 0)}, buf{data: []byte{0xff}, write: true})
	d.waitUsed(0)
	if st := d.ram.at(addrs[1], 1)[0]; st != blkSOK {
		t.Fatalf("flush status %d", st)
	}
	file, _ := os.ReadFile(p)
	if !bytes.Equal(file[7*512:8*512], pattern) {
		t.Errorf("sector 7 of the file is not what the guest wrote")
	}

	// Past the end, and an unknown type.
	addrs = d.submit(0, buf{data: blkHeader(blkTIn, 127)}, buf{data: make([]byte, 1024), write: true}, buf{data: []byte{0xff}, write: true})
	d.waitUsed(0)
	if st := d.ram.at(addrs[2], 1)[0]; st != blkSIOErr {
		t.Errorf("read past the end: status %d, want IOERR", st)
	}
	addrs = d.submit(0, buf{data: blkHeader(99, 0)}, buf{data: []byte{0xff}, write: true})
	d.waitUsed(0)
	if st := d.ram.at(addrs[1], 1)[0]; st != blkSUnsupp {
		t.Errorf("unknown type: status %d, want UNSUPP", st)
	}
	// Serial number.
	addrs = d.submit(0, buf{data: blkHeader(blkTGetID, 0)}, buf{data: make([]byte, 20), write: true}, buf{data: []byte{0xff}, write: true})
	d.waitUsed(0)
	if got := strings.TrimRight(string(d.ram.at(addrs[1], 20)), "\x00"); got != "virtio-blk0" {
		t.Errorf("serial %q", got)
	}
	if d.tr.Problems() != 0 {
		t.Errorf("%d problems counted for a well-behaved driver", d.tr.Problems())
	}
}

func TestBlockReadOnly(t *testing.T) {
	p := tempImage(t, 8<<10)
	before, _ := os.ReadFile(p)
	b, err := OpenDisk("virtio-blk0", p, true)
	if err != nil {
		t.Fatal(err)
	}
	if b.Features()&blkFRO == 0 {
		t.Fatal("read-only disk does not offer VIRTIO_BLK_F_RO")
	}
	d := newTestDriver(t, b, 8, allFeatures)
	addrs := d.submit(0, buf{data: blkHeader(blkTOut, 0)}, buf{data: make([]byte, 512)}, buf{data: []byte{0xff}, write: true})
	d.waitUsed(0)
	if st := d.ram.at(addrs[2], 1)[0]; st != blkSIOErr {
		t.Errorf("write to ro disk: status %d, want IOERR", st)
	}
	d.tr.Close()
	after, _ := os.ReadFile(p)
	if !bytes.Equal(before, after) {
		t.Error("read-only image changed")
	}
}

func TestOpenDiskErrors(t *testing.T) {
	dir := t.TempDir()
	odd := filepath.Join(dir, "odd.img")
	os.WriteFile(odd, make([]byte, 1000), 0o644)
	empty := filepath.Join(dir, "empty.img")
	os.WriteFile(empty, nil, 0o644)
	for _, c := range []struct{ path, want string }{
		{filepath.Join(dir, "missing.img"), "does not exist"},
		{dir, "is a directory"},
		{odd, "not a non-zero multiple of 512"},
		{empty, "not a non-zero multiple of 512"},
		{"/dev/null", "not a regular file"},
	} {
		_, err := OpenDisk("d", c.path, false)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("OpenDisk(%s) = %v, want an error with %q", c.path, err, c.want)
		}
		// CheckDisk finds the same, read-only or not (mvm checks disks
		// with it before it probes the host).
		for _, ro := range []bool{false, true} {
			if cerr := CheckDisk(c.path, ro); cerr == nil || !strings.Contains(cerr.Error(), c.want) || (!ro && cerr.Error() != err.Error()) {
				t.Errorf("CheckDisk(%s, ro %v) = %v, want OpenDisk's error %v", c.path, ro, cerr, err)
			}
		}
	}
}

// CheckDisk opens and closes: it takes no lock and leaves none, so the
// check of an image another mvm uses passes, and the VM's own OpenDisk
// after the check gets its exclusive lock.
func TestCheckDiskTakesNoLock(t *testing.T) {
	p := tempImage(t, 4096)
	if err := CheckDisk(p, false); err != nil {
		t.Fatal(err)
	}
	a, err := OpenDisk("a", p, false)
	if err != nil {
		t.Fatalf("OpenDisk after CheckDisk: %v", err)
	}
	defer a.Close()
	if err := CheckDisk(p, true); err != nil {
		t.Errorf("CheckDisk while another holds the image: %v", err)
	}
}

func TestOpenDiskLock(t *testing.T) {
	p := tempImage(t, 4096)
	a, err := OpenDisk("a", p, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenDisk("b", p, false); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("second writer: %v, want 'in use'", err)
	}
	if _, err := OpenDisk("b", p, true); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("reader while a writer holds it: %v, want 'in use'", err)
	}
	a.Close()
	r1, err := OpenDisk("r1", p, true)
	if err != nil {
		t.Fatal(err)
	}
	defer r1.Close()
	r2, err := OpenDisk("r2", p, true)
	if err != nil {
		t.Fatalf("two readers: %v", err)
	}
	r2.Close()
}

func TestRNG(t *testing.T) {
	d := newTestDriver(t, NewRNG(), 8, allFeatures)
	addrs := d.submit(0, buf{data: make([]byte, 64), write: true})
	_, n := d.waitUsed(0)
	if n != 64 {
		t.Fatalf("rng used len %d, want 64", n)
	}
	if bytes.Equal(d.ram.at(addrs[0], 64), make([]byte, 64)) {
		t.Error("rng left the buffer zero")
	}
}

// TestBlockEventIdx: with VIRTIO_F_EVENT_IDX the device interrupts only
// when used.idx passes the driver's used_event, and before it waits it
// publishes avail_event = the next entry it will take (virtio 1.2 section
// 2.7.7.2 and 2.7.10).
func TestBlockEventIdx(t *testing.T) {
	b, err := OpenDisk("virtio-blk0", tempImage(t, 64<<10), true)
	if err != nil {
		t.Fatal(err)
	}
	const qsize = 8
	d := newTestDriver(t, b, qsize, allFeatures)
	r := &d.rings[0]
	// The fields' aligned 32-bit words, accessed atomically as the
	// device does (a guest's accesses are its own; here the race detector
	// watches both sides).
	usedEventWord := (*uint32)(unsafe.Pointer(&d.ram.at(r.avail+4+2*qsize, 4)[0]))
	availEventWord := (*uint32)(unsafe.Pointer(&d.ram.at(r.used+4+8*qsize, 4)[0]))
	setUsedEvent := func(v uint16) { atomic.StoreUint32(usedEventWord, uint32(v)) }
	availEvent := func() uint16 { return uint16(atomic.LoadUint32(availEventWord)) }
	read := func() {
		d.submit(0, buf{data: blkHeader(blkTIn, 1)}, buf{data: make([]byte, 512), write: true}, buf{data: []byte{0xff}, write: true})
		d.waitUsed(0)
	}
	irqs := func() int {
		n := 0
		for {
			select {
			case <-d.irqs:
				n++
			case <-time.After(100 * time.Millisecond):
				return n
			}
		}
	}
	irqs()
	// used_event 5: no interrupt for entries 0..4.
	setUsedEvent(5)
	for i := 0; i < 3; i++ {
		read()
	}
	if n := irqs(); n != 0 {
		t.Errorf("used_event 5, used.idx 0->3: %d interrupts, want none", n)
	}
	// used_event 3: the next entry used (the 4th) interrupts.
	setUsedEvent(3)
	read()
	if n := irqs(); n != 1 {
		t.Errorf("used_event 3, used.idx 3->4: %d interrupts, want 1", n)
	}
	// The worker waits for the 5th request having asked to be notified of
	// it: avail_event = 4 (it may still be on its way there).
	deadline := time.Now().Add(5 * time.Second)
	for availEvent() != 4 {
		if time.Now().After(deadline) {
			t.Fatalf("avail_event %d after 4 requests, want 4", availEvent())
		}
		time.Sleep(time.Millisecond)
	}
	if d.tr.Problems() != 0 {
		t.Errorf("%d problems counted for a well-behaved driver", d.tr.Problems())
	}
}

// TestNeedEvent: section 2.7.10's condition, across the 16-bit wrap.
func TestNeedEvent(t *testing.T) {
	for _, c := range []struct {
		event, new, old uint16
		want            bool
	}{
		{0, 1, 0, true},
		{1, 1, 0, false},
		{5, 3, 0, false},
		{2, 3, 0, true},
		{3, 4, 3, true},
		{0xffff, 1, 0xfffe, true},
		{1, 2, 0xfffe, true},
		{2, 2, 0xfffe, false},
		{7, 7, 7, false},
	} {
		if got := needEvent(c.event, c.new, c.old); got != c.want {
			t.Errorf("needEvent(event %d, new %d, old %d) = %v, want %v", c.event, c.new, c.old, got, c.want)
		}
	}
}

// TestVectored reads and writes more buffers than one preadv takes
// (maxIOV), with empty ones among them, and checks every byte landed
// where it belongs; then skipIOV's cuts inside and between buffers.
func TestVectored(t *testing.T) {
	const n = maxIOV + 300
	p := filepath.Join(t.TempDir(), "f")
	data := make([]byte, 3*n)
	for i := range data {
		data[i] = byte(i*7 + i/251)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var bufs [][]byte
	for i := 0; i < n; i++ {
		bufs = append(bufs, make([]byte, 3))
		if i%100 == 0 {
			bufs = append(bufs, nil)
		}
	}
	var scratch []unix.Iovec
	if err := vectored(f, unix.SYS_PREADV, &scratch, bufs, 5, "read"); err == nil {
		t.Fatal("a read past the end of the file succeeded")
	}
	if err := vectored(f, unix.SYS_PREADV, &scratch, bufs[:len(bufs)-1], 2, "read"); err != nil {
		t.Fatal(err)
	}
	off := 2
	for i, b := range bufs[:len(bufs)-1] {
		if len(b) > 0 && !bytes.Equal(b, data[off:off+len(b)]) {
			t.Fatalf("buffer %d: %x, want %x", i, b, data[off:off+len(b)])
		}
		off += len(b)
	}
	for _, b := range bufs {
		for i := range b {
			b[i] ^= 0xff
		}
	}
	if err := vectored(f, unix.SYS_PWRITEV, &scratch, bufs, 0, "write"); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Join(bufs, nil)
	if !bytes.Equal(got[:len(want)], want) {
		t.Fatal("pwritev: the file does not hold the buffers in order")
	}

	a, b := []byte("abcd"), []byte("ef")
	iov := func() []unix.Iovec {
		v := []unix.Iovec{{Base: &a[0]}, {Base: &b[0]}}
		v[0].SetLen(len(a))
		v[1].SetLen(len(b))
		return v
	}
	for _, c := range []struct {
		skip uint64
		want string
	}{{0, "abcdef"}, {1, "bcdef"}, {4, "ef"}, {5, "f"}, {6, ""}, {9, ""}} {
		var s []byte
		for _, v := range skipIOV(iov(), c.skip) {
			s = append(s, unsafe.Slice(v.Base, v.Len)...)
		}
		if string(s) != c.want {
			t.Errorf("skipIOV %d: %q, want %q", c.skip, s, c.want)
		}
	}
}
