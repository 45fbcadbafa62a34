//go:build linux

package virtio

import (
	"encoding/binary"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// testRAMBase is where the fake guest RAM starts: 1 GiB, as in mvm.
const testRAMBase = 0x4000_0000

// fakeRAM is guest memory for tests: one region at testRAMBase.
type fakeRAM struct{ b []byte }

func newFakeRAM(size int) *fakeRAM { return &fakeRAM{b: make([]byte, size)} }

func (m *fakeRAM) Slice(addr, size uint64) ([]byte, bool) {
	if addr < testRAMBase || addr+size < addr {
		return nil, false
	}
	off := addr - testRAMBase
	if off > uint64(len(m.b)) || size > uint64(len(m.b))-off {
		return nil, false
	}
	return m.b[off : off+size], true
}

func (m *fakeRAM) at(addr uint64, n int) []byte {
	b, ok := m.Slice(addr, uint64(n))
	if !ok {
		panic("test address outside fake RAM")
	}
	return b
}

// testDriver programs a Transport the way Linux's virtio_mmio and a
// split-ring driver do, with its rings in fakeRAM.
type testDriver struct {
	t     testing.TB
	tr    *Transport
	ram   *fakeRAM
	irqs  chan struct{}
	rings []testRing
	next  uint64 // bump allocator in fake RAM
}

type testRing struct {
	size              uint16
	desc, avail, used uint64
	availIdx, freeDsc uint16
	lastUsed          uint16
}

func (d *testDriver) r32(off uint64) uint32 {
	var b [4]byte
	d.tr.Read(off, b[:])
	return binary.LittleEndian.Uint32(b[:])
}

func (d *testDriver) w32(off uint64, v uint32) {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], v)
	d.tr.Write(off, b[:])
}

func (d *testDriver) alloc(n, align uint64) uint64 {
	d.next = (d.next + align - 1) &^ (align - 1)
	a := d.next
	d.next += n
	return a
}

// newTestDriver wraps dev in a transport and brings it to DRIVER_OK with
// every queue at size qsize, accepting the features in accept (masked by
// what the device offers).
func newTestDriver(t testing.TB, dev Device, qsize uint16, accept uint64) *testDriver {
	t.Helper()
	ram := newFakeRAM(4 << 20)
	d := &testDriver{t: t, ram: ram, irqs: make(chan struct{}, 1024), next: testRAMBase}
	tr, err := NewTransport(dev, ram, func() {
		select {
		case d.irqs <- struct{}{}:
		default:
		}
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	d.tr = tr
	t.Cleanup(func() { tr.Close() })
	if d.r32(regMagic) != 0x74726976 || d.r32(regVersion) != 2 {
		t.Fatalf("magic/version = %#x/%d", d.r32(regMagic), d.r32(regVersion))
	}
	d.w32(regStatus, 0)
	d.w32(regStatus, statusAcknowledge)
	d.w32(regStatus, statusAcknowledge|statusDriver)
	d.w32(regDevFeatSel, 0)
	lo := d.r32(regDevFeatures)
	d.w32(regDevFeatSel, 1)
	hi := d.r32(regDevFeatures)
	offered := uint64(hi)<<32 | uint64(lo)
	want := offered & accept
	d.w32(regDrvFeatSel, 0)
	d.w32(regDrvFeatures, uint32(want))
	d.w32(regDrvFeatSel, 1)
	d.w32(regDrvFeatures, uint32(want>>32))
	d.w32(regStatus, statusAcknowledge|statusDriver|statusFeaturesOK)
	if d.r32(regStatus)&statusFeaturesOK == 0 {
		t.Fatalf("device refused features %#x (offered %#x)", want, offered)
	}
	for qi := range dev.QueueMax() {
		d.w32(regQueueSel, uint32(qi))
		if max := d.r32(regQueueNumMax); max < uint32(qsize) {
			t.Fatalf("queue %d max %d < %d", qi, max, qsize)
		}
		r := testRing{size: qsize}
		r.desc = d.alloc(16*uint64(qsize), 16)
		r.avail = d.alloc(6+2*uint64(qsize), 4)
		r.used = d.alloc(6+8*uint64(qsize), 4)
		d.w32(regQueueNum, uint32(qsize))
		d.w32(regQueueDescLo, uint32(r.desc))
		d.w32(regQueueDescHi, uint32(r.desc>>32))
		d.w32(regQueueDriverLo, uint32(r.avail))
		d.w32(regQueueDriverHi, uint32(r.avail>>32))
		d.w32(regQueueDeviceLo, uint32(r.used))
		d.w32(regQueueDeviceHi, uint32(r.used>>32))
		d.w32(regQueueReady, 1)
		d.rings = append(d.rings, r)
	}
	d.w32(regStatus, statusAcknowledge|statusDriver|statusFeaturesOK|statusDriverOK)
	if st := d.r32(regStatus); st&statusNeedsReset != 0 || st&statusDriverOK == 0 {
		t.Fatalf("status after DRIVER_OK = %#x", st)
	}
	return d
}

// buf is one buffer of a request: data to place in guest memory and
// whether the device writes it.
type buf struct {
	data  []byte
	write bool
}

// submit puts one chain of direct descriptors on queue qi and notifies;
// it returns the guest addresses of the buffers.
func (d *testDriver) submit(qi int, bufs ...buf) []uint64 {
	r := &d.rings[qi]
	addrs := make([]uint64, len(bufs))
	head := r.freeDsc
	for i, b := range bufs {
		a := d.alloc(uint64(len(b.data))+1, 8)
		copy(d.ram.at(a, len(b.data)), b.data)
		addrs[i] = a
		di := (head + uint16(i)) % r.size
		desc := d.ram.at(r.desc+16*uint64(di), 16)
		binary.LittleEndian.PutUint64(desc, a)
		binary.LittleEndian.PutUint32(desc[8:], uint32(len(b.data)))
		var fl uint16
		if b.write {
			fl |= descFWrite
		}
		if i < len(bufs)-1 {
			fl |= descFNext
		}
		binary.LittleEndian.PutUint16(desc[12:], fl)
		binary.LittleEndian.PutUint16(desc[14:], (di+1)%r.size)
	}
	r.freeDsc = (head + uint16(len(bufs))) % r.size
	binary.LittleEndian.PutUint16(d.ram.at(r.avail+4+2*uint64(r.availIdx%r.size), 2), head)
	r.availIdx++
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&d.ram.at(r.avail, 4)[0])), uint32(r.availIdx)<<16)
	d.w32(regQueueNotify, uint32(qi))
	return addrs
}

// waitUsed waits for the next used element of queue qi and returns its
// id and length.
func (d *testDriver) waitUsed(qi int) (uint32, uint32) {
	d.t.Helper()
	r := &d.rings[qi]
	deadline := time.Now().Add(5 * time.Second)
	for {
		idx := load16(d.ram.at(r.used, 4), 2)
		if idx != r.lastUsed {
			e := d.ram.at(r.used+4+8*uint64(r.lastUsed%r.size), 8)
			r.lastUsed++
			d.w32(regIntACK, d.r32(regIntStatus))
			return binary.LittleEndian.Uint32(e), binary.LittleEndian.Uint32(e[4:])
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("queue %d: no used buffer within 5s (status %#x)", qi, d.r32(regStatus))
		}
		time.Sleep(time.Millisecond)
	}
}

func uintptrOf(p *byte) uintptr { return uintptr(unsafe.Pointer(p)) }
