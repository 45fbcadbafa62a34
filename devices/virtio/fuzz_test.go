//go:build linux

package virtio

import (
	"encoding/binary"
	"testing"
	"time"
)

// FuzzQueue drives the split-ring parser over arbitrary guest memory: ring
// addresses in and out of RAM, misaligned or not, any queue size, and
// descriptor tables with loops, out-of-range addresses and indices, zero
// and huge lengths, long and indirect chains. It must never panic, and
// every buffer it returns must lie in RAM.
func FuzzQueue(f *testing.F) {
	seed := make([]byte, 4096)
	// A valid 4-entry ring at RAM offsets 0 (desc), 64 (avail), 128 (used)
	// with one two-descriptor chain and one self-loop.
	binary.LittleEndian.PutUint64(seed[0:], testRAMBase+1024)
	binary.LittleEndian.PutUint32(seed[8:], 16)
	binary.LittleEndian.PutUint16(seed[12:], descFNext)
	binary.LittleEndian.PutUint16(seed[14:], 1)
	binary.LittleEndian.PutUint64(seed[16:], testRAMBase+2048)
	binary.LittleEndian.PutUint32(seed[24:], 1)
	binary.LittleEndian.PutUint16(seed[28:], descFWrite)
	binary.LittleEndian.PutUint16(seed[32+12:], descFNext)
	binary.LittleEndian.PutUint16(seed[32+14:], 2)
	binary.LittleEndian.PutUint16(seed[64+2:], 2)
	binary.LittleEndian.PutUint16(seed[64+6:], 2)
	f.Add(uint16(4), uint64(0), uint64(64), uint64(128), true, seed)
	f.Add(uint16(3), uint64(1<<40), uint64(2), uint64(6), false, seed[:64])
	f.Add(uint16(256), uint64(16), uint64(66), uint64(4000), true, seed)
	f.Fuzz(func(t *testing.T, size uint16, desc, avail, used uint64, indirect bool, mem []byte) {
		ram := newFakeRAM(8192)
		copy(ram.b, mem)
		// EVENT_IDX with the odd descriptor addresses, so both ways of
		// deciding interrupts (and ArmNotify's store) meet every layout.
		cfg := QueueConfig{Size: size, DescAddr: testRAMBase + desc, AvailAddr: testRAMBase + avail, UsedAddr: testRAMBase + used, EventIdx: desc%2 == 1}
		q, err := NewQueue(ram, cfg, indirect)
		if err != nil {
			return
		}
		for i := 0; i < 2*int(size)+2; i++ {
			c, err := q.Pop()
			if c == nil {
				break
			}
			for _, b := range append(c.Readable, c.Writable...) {
				if len(b) > 0 && !inside(ram.b, b) {
					t.Fatalf("buffer outside RAM")
				}
			}
			if len(c.Readable)+len(c.Writable) > int(size)+maxIndirect {
				t.Fatalf("chain of %d buffers from a %d-entry queue", len(c.Readable)+len(c.Writable), size)
			}
			_ = err
			q.Push(c.Head, uint32(c.WritableLen()))
			q.WantsInterrupt()
			q.ArmNotify()
		}
	})
}

// inside reports whether b aliases ram.
func inside(ram, b []byte) bool {
	if len(b) == 0 {
		return true
	}
	lo := &ram[0]
	hi := &ram[len(ram)-1]
	first, last := &b[0], &b[len(b)-1]
	return uintptrOf(first) >= uintptrOf(lo) && uintptrOf(last) <= uintptrOf(hi)
}

// FuzzTransport programs devices with arbitrary register writes and reads
// over arbitrary guest memory — what a hostile driver can do — then stops
// them. Nothing may panic and Close must return promptly.
func FuzzTransport(f *testing.F) {
	// Ops: 2 bytes register offset, 4 bytes value, 1 byte write flag.
	op := func(off uint16, v uint32, w bool) []byte {
		b := make([]byte, 7)
		binary.LittleEndian.PutUint16(b, off)
		binary.LittleEndian.PutUint32(b[2:], v)
		if w {
			b[6] = 1
		}
		return b
	}
	var prog []byte
	for _, o := range [][]byte{
		op(regStatus, 3, true), op(regDrvFeatSel, 1, true), op(regDrvFeatures, 1, true),
		op(regStatus, 11, true), op(regQueueNum, 8, true), op(regQueueDescLo, testRAMBase, true),
		op(regQueueDriverLo, testRAMBase+256, true), op(regQueueDeviceLo, testRAMBase+512, true),
		op(regQueueReady, 1, true), op(regStatus, 15, true), op(regQueueNotify, 0, true),
		op(regQueueNotify, 7, true), op(0x123, 0, false), op(regStatus, 0, true),
	} {
		prog = append(prog, o...)
	}
	f.Add(uint8(0), prog, make([]byte, 1024))
	f.Add(uint8(1), prog, make([]byte, 1024))
	f.Fuzz(func(t *testing.T, which uint8, prog, mem []byte) {
		ram := newFakeRAM(4096)
		copy(ram.b, mem)
		var dev Device = NewRNG()
		if which&1 == 1 {
			p := tempImage(t, 4096)
			b, err := OpenDisk("d", p, which&2 != 0)
			if err != nil {
				t.Fatal(err)
			}
			dev = b
		}
		tr, err := NewTransport(dev, ram, func() {}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for len(prog) >= 7 {
			off := uint64(binary.LittleEndian.Uint16(prog))
			data := prog[2:6]
			size := []int{4, 4, 1, 2, 8}[prog[6]>>1%5]
			buf := make([]byte, size)
			copy(buf, data)
			if prog[6]&1 == 1 {
				tr.Write(off, buf)
			} else {
				tr.Read(off, buf)
			}
			prog = prog[7:]
		}
		done := make(chan struct{})
		go func() { tr.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Close did not return: a device worker hangs")
		}
	})
}
