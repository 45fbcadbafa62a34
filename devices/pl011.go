package devices

import (
	"io"
	"sync"
)

// PL011 register offsets and bits (ARM PrimeCell UART (PL011) Technical
// Reference Manual, ARM DDI 0183, chapter 3 "Programmers Model", table
// 3-1 "UART register summary"). The registers sit 4 bytes apart on a
// 32-bit APB bus; none is wider than 16 bits.
const (
	pl011DR    = 0x000 // data: write transmits, read pops the receive FIFO
	pl011RSR   = 0x004 // receive status (read) / error clear (ECR, write)
	pl011FR    = 0x018 // flags (read only)
	pl011ILPR  = 0x020 // IrDA low-power counter
	pl011IBRD  = 0x024 // integer baud rate divisor
	pl011FBRD  = 0x028 // fractional baud rate divisor
	pl011LCRH  = 0x02c // line control
	pl011CR    = 0x030 // control
	pl011IFLS  = 0x034 // interrupt FIFO level select
	pl011IMSC  = 0x038 // interrupt mask set/clear
	pl011RIS   = 0x03c // raw interrupt status (read only)
	pl011MIS   = 0x040 // masked interrupt status (read only)
	pl011ICR   = 0x044 // interrupt clear (write only)
	pl011DMACR = 0x048 // DMA control
	// pl011IDBase is UARTPeriphID0: four peripheral id registers, then
	// four PrimeCell id registers (TRM 3.3.14, 3.3.15), a byte in each.
	pl011IDBase = 0xfe0

	// FR bits (TRM 3.3.3). CTS, DSR and DCD are the complements of the
	// modem inputs: set means asserted.
	frCTS  = 1 << 0
	frDSR  = 1 << 1
	frDCD  = 1 << 2
	frBUSY = 1 << 3
	frRXFE = 1 << 4
	frTXFF = 1 << 5
	frRXFF = 1 << 6
	frTXFE = 1 << 7

	// RSR/ECR: overrun error (TRM 3.3.2).
	rsrOE = 1 << 3

	// LCR_H: FIFOs enabled (TRM 3.3.7); without it they are one-byte
	// holding registers.
	lcrhFEN = 1 << 4

	// CR bits (TRM 3.3.8); bits 3-6 are reserved and read as zero.
	crUARTEN = 1 << 0
	crLBE    = 1 << 7
	crRXE    = 1 << 9
	crMask   = 0xff87
	// crReset: TXE and RXE set, the UART disabled (TRM table 3-1).
	crReset = 0x0300

	// iflsReset: both FIFO trigger levels at 1/2 (TRM table 3-1).
	iflsReset = 0x12

	// Interrupt bits, the same in IMSC, RIS, MIS and ICR (TRM 3.3.10-13).
	intRX   = 1 << 4  // receive: the FIFO reached its trigger level
	intTX   = 1 << 5  // transmit: the FIFO fell to its trigger level
	intRT   = 1 << 6  // receive timeout: data waits and no more arrives
	intOE   = 1 << 10 // overrun
	intMask = 0x7ff

	// pl011FIFODepth is the FIFOs' depth for this revision: Linux's
	// amba-pl011 takes 16 for ARM's PL011 below revision 3 (the ids
	// below say revision 1), and so does QEMU's model.
	pl011FIFODepth = 16
)

// pl011IDs are the bytes at 0xFE0..0xFFC: part number 0x011, designer
// 0x41 (ARM), revision 1 (PeriphID0..3 = 0x11, 0x10, 0x14, 0x00), then
// the PrimeCell id 0xB105F00D (0x0D, 0xF0, 0x05, 0xB1) that Linux's AMBA
// bus checks before it matches a driver. The values QEMU's PL011 has.
const pl011IDs = "\x11\x10\x14\x00\x0d\xf0\x05\xb1"

// ConsoleUART is a UART that can be the guest's console: it transmits to
// the writer it was made with and takes the host's input through Input,
// which accepts up to RxRoom bytes.
type ConsoleUART interface {
	Device
	Input(p []byte)
	RxRoom() int
}

// PL011 is an Arm PrimeCell PL011 UART as Linux's amba-pl011 driver and
// earlycon ("pl011,mmio32,ADDR") use it.
//
// Transmission is instantaneous: a byte written to DR goes to Out at once,
// so FR always shows the transmit FIFO empty (TXFE) and never full or
// BUSY, and every write makes the FIFO fall through its trigger level,
// which sets the transmit interrupt (TXIS) as the TRM describes; it stays
// set until ICR clears it. Linux's driver writes from its start_tx path
// until TXFF (never seen here) and only unmasks TXIS for what it could not
// write, then masks it when its buffer is empty, so its tty write path
// never waits for an interrupt that does not come. Bytes are sent whatever
// UARTEN and TXE say, as QEMU's model does, so that earlycon works on a
// UART nobody enabled (CR's reset value has UARTEN clear).
//
// Reception: Input queues host bytes in the receive FIFO (16 deep, 1 with
// LCR_H.FEN clear), and only while CR has UARTEN and RXE set (otherwise
// RxRoom is 0 and the host keeps its input). A FIFO that reaches the RX
// trigger level sets RXIS; it is cleared when reads take the FIFO below
// the level, or by ICR. Data arriving sets RTIS, the receive timeout:
// host input comes in bursts, and the end of a burst is a line that
// stays idle; RTIS is cleared when the FIFO is read empty, or by ICR. A
// byte that finds the FIFO full is lost and sets the overrun error (RSR
// OE, OEIS). With CR.LBE (loopback) transmitted bytes are received
// instead of sent.
//
// The interrupt line is level-triggered: high while RIS & IMSC is not
// zero. The modem inputs read as a connected line (CTS, DSR, DCD) and
// raise no interrupts.
//
// Any access is harmless: reads of any width and alignment return the
// bytes of the registers they cover (a read covering DR pops the FIFO
// once); writes of 1, 2 or 4 bytes at a register's offset write it, zero
// extended, an 8-byte write its two registers, and other writes (any
// other width or alignment, read-only registers, unknown offsets) are
// ignored; unknown offsets read as zero.
type PL011 struct {
	out    io.Writer
	setIRQ func(level bool)

	mu     sync.Mutex
	rx     []byte
	rsr    uint32
	ilpr   uint32
	ibrd   uint32
	fbrd   uint32
	lcrh   uint32
	cr     uint32
	ifls   uint32
	imsc   uint32
	ris    uint32
	dmacr  uint32
	line   bool  // the level last given to setIRQ
	outErr error // first error writing Out; later bytes are dropped
	txbuf  [1]byte
}

// NewPL011 returns a PL011 in its reset state writing to out; setIRQ
// (nil: no interrupt) drives its interrupt line.
func NewPL011(out io.Writer, setIRQ func(level bool)) *PL011 {
	if setIRQ == nil {
		setIRQ = func(bool) {}
	}
	p := &PL011{out: out, setIRQ: setIRQ}
	p.resetLocked()
	return p
}

// Name implements Device.
func (p *PL011) Name() string { return "pl011" }

func (p *PL011) resetLocked() {
	p.rx = p.rx[:0]
	p.rsr, p.ilpr, p.ibrd, p.fbrd, p.lcrh = 0, 0, 0, 0, 0
	p.cr, p.ifls = crReset, iflsReset
	p.imsc, p.ris, p.dmacr = 0, 0, 0
}

// Reset is a guest reboot: every register to its reset value, the FIFO
// emptied, the line lowered.
func (p *PL011) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resetLocked()
	p.updateLocked()
}

// depthLocked is the receive FIFO's depth now.
func (p *PL011) depthLocked() int {
	if p.lcrh&lcrhFEN == 0 {
		return 1
	}
	return pl011FIFODepth
}

// levelFor is the number of entries a trigger-level field (IFLS
// RXIFLSEL or TXIFLSEL: 0 1/8, 1 1/4, 2 1/2, 3 3/4, 4 7/8; TRM 3.3.9)
// stands for, for a FIFO of depth entries.
func levelFor(sel uint32, depth int) int {
	eighths := [...]int{1, 2, 4, 6, 7}
	if sel >= uint32(len(eighths)) {
		sel = 2 // reserved encodings: take the reset value's half
	}
	if depth == 1 {
		return 1
	}
	return depth * eighths[sel] / 8
}

func (p *PL011) rxTriggerLocked() int { return levelFor(p.ifls>>3&7, p.depthLocked()) }

// rxEnabledLocked: the receiver takes data only while the UART and its
// receive section are enabled (TRM 3.3.8).
func (p *PL011) rxEnabledLocked() bool { return p.cr&(crUARTEN|crRXE) == crUARTEN|crRXE }

// RxRoom reports how many bytes Input would take now.
func (p *PL011) RxRoom() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.rxEnabledLocked() {
		return 0
	}
	return max(p.depthLocked()-len(p.rx), 0)
}

// Input queues host bytes for the guest. Bytes that find the FIFO full,
// or the receiver disabled, are lost: the first as an overrun.
func (p *PL011) Input(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.rxEnabledLocked() || len(b) == 0 {
		return
	}
	p.receiveLocked(b)
	p.updateLocked()
}

// receiveLocked puts bytes into the receive FIFO and sets the receive
// interrupts.
func (p *PL011) receiveLocked(b []byte) {
	depth, trigger := p.depthLocked(), p.rxTriggerLocked()
	got := false
	for _, c := range b {
		if len(p.rx) >= depth {
			p.rsr |= rsrOE
			p.ris |= intOE
			break
		}
		p.rx = append(p.rx, c)
		got = true
		if len(p.rx) == trigger {
			p.ris |= intRX // the FIFO reached its trigger level
		}
	}
	if got {
		p.ris |= intRT
	}
}

// transmitLocked sends one byte, or receives it in loopback.
func (p *PL011) transmitLocked(c byte) {
	if p.cr&crLBE != 0 {
		p.txbuf[0] = c
		p.receiveLocked(p.txbuf[:])
	} else if p.outErr == nil {
		p.txbuf[0] = c
		_, p.outErr = p.out.Write(p.txbuf[:])
	}
	// The byte left the FIFO at once: it fell through its trigger level.
	p.ris |= intTX
}

// regLocked reads the 32-bit register at the aligned offset off, with
// the read's side effect (DR pops the FIFO).
func (p *PL011) regLocked(off uint64) uint32 {
	switch off {
	case pl011DR:
		if len(p.rx) == 0 {
			return 0
		}
		c := p.rx[0]
		p.rx = append(p.rx[:0], p.rx[1:]...)
		if len(p.rx) < p.rxTriggerLocked() {
			p.ris &^= intRX
		}
		if len(p.rx) == 0 {
			p.ris &^= intRT
		}
		return uint32(c)
	case pl011RSR:
		return p.rsr
	case pl011FR:
		v := uint32(frTXFE | frCTS | frDSR | frDCD)
		if len(p.rx) == 0 {
			v |= frRXFE
		}
		if len(p.rx) >= p.depthLocked() {
			v |= frRXFF
		}
		return v
	case pl011ILPR:
		return p.ilpr
	case pl011IBRD:
		return p.ibrd
	case pl011FBRD:
		return p.fbrd
	case pl011LCRH:
		return p.lcrh
	case pl011CR:
		return p.cr
	case pl011IFLS:
		return p.ifls
	case pl011IMSC:
		return p.imsc
	case pl011RIS:
		return p.ris
	case pl011MIS:
		return p.ris & p.imsc
	case pl011DMACR:
		return p.dmacr
	}
	if off >= pl011IDBase && off < pl011IDBase+4*uint64(len(pl011IDs)) {
		return uint32(pl011IDs[(off-pl011IDBase)/4])
	}
	return 0
}

// setRegLocked writes the 32-bit register at the aligned offset off.
func (p *PL011) setRegLocked(off uint64, v uint32) {
	switch off {
	case pl011DR:
		p.transmitLocked(byte(v))
	case pl011RSR:
		p.rsr = 0 // any write to ECR clears the errors
	case pl011ILPR:
		p.ilpr = v & 0xff
	case pl011IBRD:
		p.ibrd = v & 0xffff
	case pl011FBRD:
		p.fbrd = v & 0x3f
	case pl011LCRH:
		p.lcrh = v & 0xff
	case pl011CR:
		p.cr = v & crMask
	case pl011IFLS:
		p.ifls = v & 0x3f
	case pl011IMSC:
		p.imsc = v & intMask
	case pl011ICR:
		p.ris &^= v & intMask
	case pl011DMACR:
		p.dmacr = v & 7
	}
}

// Read implements Device.
func (p *PL011) Read(off uint64, data []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	readWords(off, data, p.regLocked)
	p.updateLocked()
}

// Write implements Device.
func (p *PL011) Write(off uint64, data []byte) {
	if off&3 != 0 {
		return
	}
	// A narrower write reaches the register zero extended (every
	// register is at most 16 bits); an 8-byte one is two APB writes.
	var words [2]uint32
	n := 1
	switch len(data) {
	case 1:
		words[0] = uint32(data[0])
	case 2:
		words[0] = uint32(data[0]) | uint32(data[1])<<8
	case 4, 8:
		n = len(data) / 4
		for i := range n {
			words[i] = uint32(data[4*i]) | uint32(data[4*i+1])<<8 | uint32(data[4*i+2])<<16 | uint32(data[4*i+3])<<24
		}
	default:
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, w := range words[:n] {
		p.setRegLocked(off+4*uint64(i), w)
	}
	p.updateLocked()
}

// updateLocked drives the line to (RIS & IMSC) != 0 when it changed,
// under the lock so that level changes reach the GIC in order.
func (p *PL011) updateLocked() {
	level := p.ris&p.imsc != 0
	if level != p.line {
		p.line = level
		p.setIRQ(level)
	}
}
