package virtio

import (
	"encoding/binary"
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// blkBench is the first request of a 1 MiB O_DIRECT read as Linux sends
// it when the buffer's pages are scattered (blkSegMax of its 256 pages;
// the other two follow in a second request): an indirect table of the
// 16-byte header, blkSegMax 4 KiB buffers on every other guest page, and
// the status byte.
type blkBench struct {
	q    *Queue
	ram  *fakeRAM
	blk  *Block
	bufs [][]byte // the same buffers, for the raw preadv baseline
}

const (
	bbDesc     = testRAMBase
	bbAvail    = testRAMBase + 0x1000
	bbUsed     = testRAMBase + 0x2000
	bbTable    = testRAMBase + 0x3000 // 256 descriptors: 4 KiB
	bbHdr      = testRAMBase + 0x4000
	bbData     = testRAMBase + 0x10000
	bbQueueLen = 256
)

func newBlkBench(b *testing.B) *blkBench {
	b.Helper()
	p := b.TempDir() + "/disk.img"
	if err := os.WriteFile(p, make([]byte, 4<<20), 0o644); err != nil {
		b.Fatal(err)
	}
	blk, err := OpenDisk("vda", p, true)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { blk.Close() })
	ram := newFakeRAM(8 << 20)
	q, err := NewQueue(ram, QueueConfig{Size: bbQueueLen, DescAddr: bbDesc, AvailAddr: bbAvail, UsedAddr: bbUsed}, true)
	if err != nil {
		b.Fatal(err)
	}
	bb := &blkBench{q: q, ram: ram, blk: blk}
	table := ram.at(bbTable, 16*(blkSegMax+2))
	put := func(i int, addr uint64, n uint32, flags uint16) {
		d := table[16*i:]
		binary.LittleEndian.PutUint64(d, addr)
		binary.LittleEndian.PutUint32(d[8:], n)
		binary.LittleEndian.PutUint16(d[12:], flags)
		binary.LittleEndian.PutUint16(d[14:], uint16(i+1))
	}
	copy(ram.at(bbHdr, 16), blkHeader(blkTIn, 0))
	put(0, bbHdr, 16, descFNext)
	for i := 0; i < blkSegMax; i++ {
		a := bbData + uint64(2*i)*4096
		put(1+i, a, 4096, descFNext|descFWrite)
		bb.bufs = append(bb.bufs, ram.at(a, 4096))
	}
	put(1+blkSegMax, bbHdr+16, 1, descFWrite)
	d := ram.at(bbDesc, 16)
	binary.LittleEndian.PutUint64(d, bbTable)
	binary.LittleEndian.PutUint32(d[8:], uint32(16*(blkSegMax+2)))
	binary.LittleEndian.PutUint16(d[12:], descFIndirect)
	return bb
}

// offer makes descriptor 0 available once more.
func (bb *blkBench) offer() {
	idx := load16(bb.ram.at(bbAvail, 4), 2) + 1
	binary.LittleEndian.PutUint16(bb.ram.at(bbAvail+4+2*uint64((idx-1)%bbQueueLen), 2), 0)
	binary.LittleEndian.PutUint16(bb.ram.at(bbAvail+2, 2), idx)
}

// BenchmarkBlockRequest: one read of blkSegMax scattered 4 KiB buffers
// through the queue as the worker takes it (popNext, the request, Push),
// against BenchmarkBlockPreadv, the bare preadv system call on the same
// buffers: the difference is the device model's cost per request.
func BenchmarkBlockRequest(b *testing.B) {
	bb := newBlkBench(b)
	env := &Env{}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		bb.offer()
		c, err := bb.q.popNext()
		if err != nil || c == nil {
			b.Fatalf("pop: %v", err)
		}
		n := bb.blk.request(env, c)
		bb.q.Push(c.Head, n)
		if n != 1+blkSegMax*4096 {
			b.Fatalf("request wrote %d bytes", n)
		}
	}
}

func BenchmarkBlockPreadv(b *testing.B) {
	bb := newBlkBench(b)
	iov := make([]unix.Iovec, len(bb.bufs))
	for i, buf := range bb.bufs {
		iov[i].Base = &buf[0]
		iov[i].SetLen(len(buf))
	}
	fd := bb.blk.f.Fd()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		n, _, errno := unix.Syscall6(unix.SYS_PREADV, fd, uintptr(unsafe.Pointer(&iov[0])), uintptr(len(iov)), 0, 0, 0)
		if errno != 0 || n != blkSegMax*4096 {
			b.Fatalf("preadv: %d, %v", n, errno)
		}
	}
}
