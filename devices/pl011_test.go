package devices

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// Offsets, bits and reset values below are written out from the PL011
// TRM (ARM DDI 0183, table 3-1 and sections 3.3.x), not taken from the
// device's constants, so a wrong constant fails here.

// pl011Rig is a PL011 with its output and interrupt line recorded.
type pl011Rig struct {
	p    *PL011
	out  bytes.Buffer
	line bool
	// edges counts setIRQ calls; each must change the level.
	edges int
	t     *testing.T
}

func newPL011Rig(t *testing.T) *pl011Rig {
	r := &pl011Rig{t: t}
	r.p = NewPL011(&r.out, func(level bool) {
		if level == r.line {
			t.Errorf("setIRQ(%v) repeats the line's level", level)
		}
		r.line = level
		r.edges++
	})
	return r
}

func (r *pl011Rig) read32(off uint64) uint32 {
	var b [4]byte
	r.p.Read(off, b[:])
	return binary.LittleEndian.Uint32(b[:])
}

func (r *pl011Rig) write32(off uint64, v uint32) {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], v)
	r.p.Write(off, b[:])
}

func (r *pl011Rig) write16(off uint64, v uint16) {
	var b [2]byte
	binary.LittleEndian.PutUint16(b[:], v)
	r.p.Write(off, b[:])
}

// enable does what Linux's pl011_startup does to receive: FIFOs on
// (LCR_H.FEN, bit 4), UARTEN|TXE|RXE (CR bits 0, 8, 9).
func (r *pl011Rig) enable() {
	r.write32(0x2c, 1<<4|3<<5) // FEN, 8 bits
	r.write32(0x30, 1|1<<8|1<<9)
}

func TestPL011IDs(t *testing.T) {
	r := newPL011Rig(t)
	want := []uint32{0x11, 0x10, 0x14, 0x00, 0x0d, 0xf0, 0x05, 0xb1} // DESIGN.md section 8, QEMU's
	var periph, cell uint32
	for i, w := range want {
		got := r.read32(0xfe0 + 4*uint64(i))
		if got != w {
			t.Errorf("id register %#x = %#x, want %#x", 0xfe0+4*i, got, w)
		}
		if i < 4 {
			periph |= got << (8 * i)
		} else {
			cell |= got << (8 * (i - 4))
		}
	}
	// TRM 3.3.14: PartNumber [11:0] = 0x011, Designer [19:12] = 0x41
	// (ARM), Revision [23:20]; 3.3.15: the PrimeCell id 0xB105F00D.
	// Linux's amba-pl011 matches id 0x00041011 under mask 0x000fffff.
	if periph&0xfff != 0x011 || periph>>12&0xff != 0x41 || periph&0x000fffff != 0x00041011 {
		t.Errorf("peripheral id %#08x: part %#x designer %#x", periph, periph&0xfff, periph>>12&0xff)
	}
	if cell != 0xb105f00d {
		t.Errorf("PrimeCell id %#08x, want 0xb105f00d", cell)
	}
}

func TestPL011ResetValues(t *testing.T) {
	r := newPL011Rig(t)
	cases := []struct {
		name string
		off  uint64
		mask uint32 // bits the TRM defines at reset
		want uint32
	}{
		{"RSR", 0x04, 0xf, 0},
		{"FR TXFE RXFE set, TXFF RXFF BUSY clear", 0x18, 0xf8, 0x90},
		{"ILPR", 0x20, 0xff, 0},
		{"IBRD", 0x24, 0xffff, 0},
		{"FBRD", 0x28, 0x3f, 0},
		{"LCR_H", 0x2c, 0xff, 0},
		{"CR TXE RXE", 0x30, 0xffff, 0x0300},
		{"IFLS half and half", 0x34, 0x3f, 0x12},
		{"IMSC", 0x38, 0x7ff, 0},
		{"RIS (without modem bits)", 0x3c, 0x7f0, 0},
		{"MIS", 0x40, 0x7ff, 0},
		{"DMACR", 0x48, 0x7, 0},
	}
	for _, c := range cases {
		if got := r.read32(c.off) & c.mask; got != c.want {
			t.Errorf("%s (%#x) = %#x, want %#x", c.name, c.off, got, c.want)
		}
	}
	if r.line {
		t.Errorf("line high at reset")
	}
}

func TestPL011RegistersReadBack(t *testing.T) {
	r := newPL011Rig(t)
	cases := []struct {
		name      string
		off       uint64
		write     uint32
		wantValue uint32
	}{
		{"ILPR 8 bits", 0x20, 0x1ab, 0xab},
		{"IBRD 16 bits", 0x24, 0x12345, 0x2345},
		{"FBRD 6 bits", 0x28, 0xff, 0x3f},
		{"LCR_H 8 bits", 0x2c, 0x1ff, 0xff},
		{"CR without reserved bits 3-6", 0x30, 0xffff, 0xff87},
		{"IFLS 6 bits", 0x34, 0xff, 0x3f},
		{"IMSC 11 bits", 0x38, 0xffff, 0x7ff},
		{"DMACR 3 bits", 0x48, 0xff, 0x7},
	}
	for _, c := range cases {
		r.write32(c.off, c.write)
		if got := r.read32(c.off); got != c.wantValue {
			t.Errorf("%s: wrote %#x, read %#x, want %#x", c.name, c.write, got, c.wantValue)
		}
	}
	// Read-only and write-only registers.
	r.write32(0x18, 0)
	if fr := r.read32(0x18); fr&0x90 != 0x90 {
		t.Errorf("a write changed FR to %#x", fr)
	}
	if icr := r.read32(0x44); icr != 0 {
		t.Errorf("ICR reads %#x, want 0 (write only)", icr)
	}
	// Linux (UPIO_MEM) uses 16-bit accesses, earlycon 8 or 32.
	r.write16(0x24, 0x0d)
	var b [2]byte
	r.p.Read(0x24, b[:])
	if b != [2]byte{0x0d, 0} {
		t.Errorf("16-bit IBRD read % x after a 16-bit write of 0x0d", b)
	}
	r.write32(0x30, 0x0301)
	var hi [1]byte
	r.p.Read(0x31, hi[:])
	if hi[0] != 0x03 {
		t.Errorf("byte read of CR[15:8] = %#x, want 0x03", hi[0])
	}
	// Unaligned writes and odd widths are ignored.
	r.p.Write(0x25, []byte{0x77})
	r.p.Write(0x24, []byte{1, 2, 3})
	if got := r.read32(0x24); got != 0x0d {
		t.Errorf("IBRD %#x after ignored writes, want 0x0d", got)
	}
	// An 8-byte write covers two registers: IBRD and FBRD.
	r.p.Write(0x24, []byte{0x34, 0x12, 0, 0, 0x05, 0, 0, 0})
	if i, f := r.read32(0x24), r.read32(0x28); i != 0x1234 || f != 5 {
		t.Errorf("8-byte write: IBRD %#x FBRD %#x, want 0x1234 5", i, f)
	}
}

func TestPL011Transmit(t *testing.T) {
	r := newPL011Rig(t)
	// earlycon writes before anything enables the UART (UARTEN clear).
	r.p.Write(0x00, []byte{'h'})
	r.write16(0x00, 'i')
	r.write32(0x00, 0xf00+'!') // bits [11:8] are not data
	if r.out.String() != "hi!" {
		t.Errorf("output %q, want %q", r.out.String(), "hi!")
	}
	if fr := r.read32(0x18); fr&(1<<7) == 0 || fr&(1<<5|1<<3) != 0 {
		t.Errorf("FR %#x after transmitting: want TXFE, not TXFF or BUSY", fr)
	}
	// The FIFO fell through its trigger level: TXIS (bit 5) is raw
	// pending, and the line rises once it is unmasked.
	if ris := r.read32(0x3c); ris&(1<<5) == 0 {
		t.Fatalf("RIS %#x: no TXIS after transmitting", ris)
	}
	if r.line {
		t.Fatalf("line high with every interrupt masked")
	}
	r.write32(0x38, 1<<5) // TXIM
	if !r.line || r.read32(0x40) != 1<<5 {
		t.Fatalf("TXIM unmasked: line %v MIS %#x, want high and TXIS", r.line, r.read32(0x40))
	}
	// Linux's interrupt handler writes what it has; each byte keeps
	// TXIS up, so it is called again until it masks TXIM (stop_tx).
	r.write32(0x00, 'x')
	if !r.line {
		t.Errorf("line fell while bytes were written with TXIM set")
	}
	r.write32(0x38, 0)
	if r.line {
		t.Errorf("line still high with TXIM masked")
	}
	// ICR clears it (TRM 3.3.13, TXIC bit 5).
	r.write32(0x38, 1<<5)
	r.write32(0x44, 1<<5)
	if r.line || r.read32(0x3c)&(1<<5) != 0 {
		t.Errorf("ICR TXIC: line %v RIS %#x", r.line, r.read32(0x3c))
	}
	r.write32(0x00, 'y')
	if !r.line {
		t.Errorf("the next byte did not raise TXIS again")
	}
}

func TestPL011TransmitErrorDropsOutput(t *testing.T) {
	p := NewPL011(failWriter{}, nil)
	for range 3 {
		p.Write(0, []byte{'a'}) // must not panic or block
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("closed") }

func TestPL011ReceiveNeedsEnable(t *testing.T) {
	r := newPL011Rig(t)
	// At reset UARTEN (CR bit 0) is clear: no receiving.
	if n := r.p.RxRoom(); n != 0 {
		t.Errorf("RxRoom %d with the UART disabled", n)
	}
	r.p.Input([]byte("a"))
	if fr := r.read32(0x18); fr&(1<<4) == 0 {
		t.Errorf("FR %#x: data received by a disabled UART", fr)
	}
	// Enabled without FIFOs: a one-byte holding register.
	r.write32(0x30, 1|1<<8|1<<9)
	if n := r.p.RxRoom(); n != 1 {
		t.Errorf("RxRoom %d with FIFOs off, want 1", n)
	}
	// With FEN: the 16-deep FIFO of a revision-1 PL011.
	r.write32(0x2c, 1<<4)
	if n := r.p.RxRoom(); n != 16 {
		t.Errorf("RxRoom %d with FIFOs on, want 16", n)
	}
	// RXE (bit 9) clear: no receiving either.
	r.write32(0x30, 1|1<<8)
	if n := r.p.RxRoom(); n != 0 {
		t.Errorf("RxRoom %d with RXE clear", n)
	}
}

func TestPL011ReceiveInterrupts(t *testing.T) {
	r := newPL011Rig(t)
	r.enable()
	r.write32(0x38, 1<<4|1<<6) // RXIM, RTIM: what Linux unmasks
	// One byte: below the 1/2 trigger (8), so only the receive timeout.
	r.p.Input([]byte("a"))
	if ris := r.read32(0x3c); ris&(1<<6) == 0 || ris&(1<<4) != 0 {
		t.Errorf("RIS %#x after 1 byte: want RTIS, not RXIS", ris)
	}
	if !r.line {
		t.Errorf("line low with RTIS unmasked")
	}
	if fr := r.read32(0x18); fr&(1<<4) != 0 {
		t.Errorf("FR %#x: RXFE with a byte waiting", fr)
	}
	if c := r.read32(0x00); c != 'a' {
		t.Errorf("DR read %#x, want 'a'", c)
	}
	if ris := r.read32(0x3c); ris&(1<<6) != 0 || r.line {
		t.Errorf("FIFO read empty: RIS %#x line %v, want RTIS cleared and the line low", ris, r.line)
	}
	if fr := r.read32(0x18); fr&(1<<4) == 0 {
		t.Errorf("FR %#x: not RXFE once read empty", fr)
	}

	// Eight bytes reach the trigger: RXIS; one read takes the FIFO
	// below it and clears RXIS; RTIS holds while data waits.
	r.p.Input([]byte("01234567"))
	if ris := r.read32(0x3c); ris&(1<<4|1<<6) != 1<<4|1<<6 {
		t.Errorf("RIS %#x after 8 bytes: want RXIS and RTIS", ris)
	}
	r.read32(0x00)
	if ris := r.read32(0x3c); ris&(1<<4) != 0 || ris&(1<<6) == 0 {
		t.Errorf("RIS %#x with 7 bytes left: want RTIS alone", ris)
	}
	// ICR clears RTIS with data still waiting (TRM 3.3.13).
	r.write32(0x44, 1<<6)
	if r.read32(0x3c)&(1<<6) != 0 || r.line {
		t.Errorf("ICR RTIC did not clear RTIS")
	}
	var got []byte
	for r.read32(0x18)&(1<<4) == 0 {
		got = append(got, byte(r.read32(0x00)))
	}
	if string(got) != "1234567" {
		t.Errorf("read %q, want %q", got, "1234567")
	}
	// Reading DR when empty returns 0 and changes nothing.
	if c := r.read32(0x00); c != 0 {
		t.Errorf("empty DR read %#x", c)
	}
}

// Each RXIFLSEL value (IFLS bits [5:3]) is a fraction of the 16-entry
// FIFO (TRM 3.3.9): 1/8, 1/4, 1/2, 3/4, 7/8.
func TestPL011RxTriggerLevels(t *testing.T) {
	for sel, level := range []int{2, 4, 8, 12, 14} {
		r := newPL011Rig(t)
		r.enable()
		r.write32(0x34, uint32(sel)<<3)
		r.p.Input(bytes.Repeat([]byte("x"), level-1))
		if r.read32(0x3c)&(1<<4) != 0 {
			t.Errorf("RXIFLSEL %d: RXIS at %d bytes", sel, level-1)
		}
		r.p.Input([]byte("x"))
		if r.read32(0x3c)&(1<<4) == 0 {
			t.Errorf("RXIFLSEL %d: no RXIS at %d bytes", sel, level)
		}
	}
	// FIFOs off: one character fills the holding register and raises
	// RXIS; FR says full.
	r := newPL011Rig(t)
	r.write32(0x30, 1|1<<8|1<<9)
	r.p.Input([]byte("z"))
	if ris, fr := r.read32(0x3c), r.read32(0x18); ris&(1<<4) == 0 || fr&(1<<6) == 0 {
		t.Errorf("FIFOs off, 1 byte: RIS %#x FR %#x, want RXIS and RXFF", ris, fr)
	}
}

func TestPL011Overrun(t *testing.T) {
	r := newPL011Rig(t)
	r.enable()
	r.write32(0x38, 1<<10) // OEIM
	r.p.Input(bytes.Repeat([]byte("a"), 16))
	if fr := r.read32(0x18); fr&(1<<6) == 0 {
		t.Errorf("FR %#x: 16 bytes and not RXFF", fr)
	}
	if r.line {
		t.Errorf("overrun interrupt before an overrun")
	}
	r.p.Input([]byte("b"))
	if rsr := r.read32(0x04); rsr&(1<<3) == 0 {
		t.Errorf("RSR %#x after an overrun: no OE (bit 3)", rsr)
	}
	if ris := r.read32(0x3c); ris&(1<<10) == 0 || !r.line {
		t.Errorf("RIS %#x line %v after an overrun: want OEIS and the line high", ris, r.line)
	}
	r.write32(0x04, 0) // ECR: any write clears
	r.write32(0x44, 1<<10)
	if rsr, ris := r.read32(0x04), r.read32(0x3c); rsr != 0 || ris&(1<<10) != 0 || r.line {
		t.Errorf("after ECR and ICR: RSR %#x RIS %#x line %v", rsr, ris, r.line)
	}
	for i := range 16 {
		if c := r.read32(0x00); c != 'a' {
			t.Fatalf("byte %d = %#x: the overrun byte replaced FIFO data", i, c)
		}
	}
}

func TestPL011Loopback(t *testing.T) {
	r := newPL011Rig(t)
	r.enable()
	r.write32(0x30, 1|1<<7|1<<8|1<<9) // LBE
	r.write32(0x00, 'q')
	if r.out.Len() != 0 {
		t.Errorf("loopback sent %q out", r.out.String())
	}
	if c := r.read32(0x00); c != 'q' {
		t.Errorf("loopback received %#x, want 'q'", c)
	}
}

func TestPL011Reset(t *testing.T) {
	r := newPL011Rig(t)
	r.enable()
	r.write32(0x38, 0x7ff)
	r.p.Input([]byte("abc"))
	if !r.line {
		t.Fatal("line low with data and every interrupt unmasked")
	}
	r.p.Reset()
	if r.line || r.read32(0x30) != 0x0300 || r.read32(0x18)&(1<<4) == 0 || r.read32(0x38) != 0 {
		t.Errorf("after Reset: line %v CR %#x FR %#x IMSC %#x", r.line, r.read32(0x30), r.read32(0x18), r.read32(0x38))
	}
}

// FuzzPL011: any sequence of guest accesses (any offset, width) and host
// input leaves the device consistent: no panic, the line equals
// RIS & IMSC != 0, the FIFO within its depth, FR never reports a busy or
// full transmitter.
func FuzzPL011(f *testing.F) {
	f.Add([]byte{1, 0x30, 0, 4, 0x01, 0x03, 0, 0, 2, 'a', 0, 0, 0, 0})
	f.Add([]byte{1, 0x2c, 0, 1, 0x10, 1, 0x38, 0, 2, 0xff, 0x07, 2, 'x', 0, 0, 8})
	f.Fuzz(func(t *testing.T, ops []byte) {
		r := newPL011Rig(t)
		for len(ops) >= 4 {
			kind, off, width := ops[0]%3, uint64(ops[1])|uint64(ops[2]&0x0f)<<8, int(ops[3]%17)
			ops = ops[4:]
			data := make([]byte, width)
			n := copy(data, ops)
			ops = ops[n:]
			switch kind {
			case 0:
				r.p.Read(off, data)
			case 1:
				r.p.Write(off, data)
			case 2:
				r.p.Input(data)
			}
			ris, imsc, fr := r.read32(0x3c), r.read32(0x38), r.read32(0x18)
			if r.line != (ris&imsc != 0) {
				t.Fatalf("line %v with RIS %#x IMSC %#x", r.line, ris, imsc)
			}
			if len(r.p.rx) > 16 {
				t.Fatalf("%d bytes in the FIFO", len(r.p.rx))
			}
			if fr&(1<<7) == 0 || fr&(1<<5|1<<3) != 0 {
				t.Fatalf("FR %#x", fr)
			}
		}
	})
}
