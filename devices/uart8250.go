package devices

import (
	"io"
	"sync"
)

// 8250/16550 register offsets with reg-shift 0 (one byte per register).
// Layout and bits from the National Semiconductor PC16550D data sheet.
const (
	uartRBRTHR = 0 // receive buffer (read) / transmit holding (write); DLL when DLAB
	uartIER    = 1 // interrupt enable; DLM when DLAB
	uartIIRFCR = 2 // interrupt identification (read) / FIFO control (write)
	uartLCR    = 3
	uartMCR    = 4
	uartLSR    = 5
	uartMSR    = 6
	uartSCR    = 7

	ierRDA  = 0x01 // received data available
	ierTHRE = 0x02 // transmitter holding register empty

	iirNone  = 0x01
	iirTHRE  = 0x02
	iirRDA   = 0x04
	iirFIFOs = 0xc0 // FIFOs enabled

	lcrDLAB = 0x80

	lsrDR   = 0x01
	lsrTHRE = 0x20
	lsrTEMT = 0x40

	mcrLoop = 0x10

	// MSR with DCD, DSR and CTS asserted: a connected, ready line.
	msrConnected = 0xb0

	rxFIFOSize = 64
)

// UART is a 16550-compatible serial port. Transmitted bytes go to Out at
// once; bytes given to Input are queued for the guest. Its interrupt is
// level-triggered: the setIRQ given to NewUART is called with true when an
// enabled interrupt condition arises and with false when none holds any
// more.
type UART struct {
	out    io.Writer
	setIRQ func(level bool)

	mu        sync.Mutex
	ier, lcr  byte
	mcr, scr  byte
	fcr       byte
	dll, dlm  byte
	thrEmpty  bool // THR-empty interrupt pending (cleared by IIR read or THR write)
	rx        []byte
	irqRaised bool
	outErr    error
	txbuf     [1]byte // one transmitted byte, reused: no allocation per byte
}

// NewUART returns a UART writing to out; setIRQ may be nil.
func NewUART(out io.Writer, setIRQ func(level bool)) *UART {
	if setIRQ == nil {
		setIRQ = func(bool) {}
	}
	return &UART{out: out, setIRQ: setIRQ, dll: 0x0c}
}

// Name implements Device.
func (u *UART) Name() string { return "uart" }

// Input queues bytes for the guest to read, dropping what does not fit in
// the receive FIFO (as a real UART overruns).
func (u *UART) Input(p []byte) {
	u.mu.Lock()
	defer u.mu.Unlock()
	room := rxFIFOSize - len(u.rx)
	if room < len(p) {
		p = p[:max(room, 0)]
	}
	u.rx = append(u.rx, p...)
	u.updateIRQ()
}

// RxRoom reports how many bytes Input would accept now.
func (u *UART) RxRoom() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return rxFIFOSize - len(u.rx)
}

// Read implements Device.
func (u *UART) Read(off uint64, data []byte) {
	for i := range data {
		data[i] = 0
	}
	if len(data) == 0 {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	var v byte
	switch off {
	case uartRBRTHR:
		if u.lcr&lcrDLAB != 0 {
			v = u.dll
		} else if len(u.rx) > 0 {
			v = u.rx[0]
			u.rx = u.rx[1:]
		}
	case uartIER:
		if u.lcr&lcrDLAB != 0 {
			v = u.dlm
		} else {
			v = u.ier
		}
	case uartIIRFCR:
		v = u.iir()
		if v&0x0f == iirTHRE {
			u.thrEmpty = false // reading IIR with THRE as the source clears it
		}
		if u.fcr&1 != 0 {
			v |= iirFIFOs
		}
	case uartLCR:
		v = u.lcr
	case uartMCR:
		v = u.mcr
	case uartLSR:
		v = lsrTHRE | lsrTEMT
		if len(u.rx) > 0 {
			v |= lsrDR
		}
	case uartMSR:
		v = msrConnected
	case uartSCR:
		v = u.scr
	}
	data[0] = v
	u.updateIRQ()
}

// Write implements Device.
func (u *UART) Write(off uint64, data []byte) {
	if len(data) == 0 {
		return
	}
	v := data[0]
	u.mu.Lock()
	switch off {
	case uartRBRTHR:
		if u.lcr&lcrDLAB != 0 {
			u.dll = v
			break
		}
		if u.mcr&mcrLoop != 0 {
			if len(u.rx) < rxFIFOSize {
				u.rx = append(u.rx, v)
			}
		} else if u.outErr == nil {
			u.txbuf[0] = v
			_, u.outErr = u.out.Write(u.txbuf[:])
		}
		// Transmission is instantaneous: the THR is empty again at once.
		u.thrEmpty = true
	case uartIER:
		if u.lcr&lcrDLAB != 0 {
			u.dlm = v
			break
		}
		if v&ierTHRE != 0 && u.ier&ierTHRE == 0 {
			u.thrEmpty = true // enabling THRE with an empty THR interrupts
		}
		u.ier = v & 0x0f
	case uartIIRFCR:
		u.fcr = v
		if v&0x02 != 0 {
			u.rx = u.rx[:0]
		}
	case uartLCR:
		u.lcr = v
	case uartMCR:
		u.mcr = v & 0x1f
	case uartSCR:
		u.scr = v
	}
	u.updateIRQ()
	// Not deferred: this is every UART write exit's path, and nothing
	// above panics (out.Write's error is kept, not raised).
	u.mu.Unlock()
}

// iir returns the highest-priority pending interrupt. Caller holds mu.
func (u *UART) iir() byte {
	switch {
	case u.ier&ierRDA != 0 && len(u.rx) > 0:
		return iirRDA
	case u.ier&ierTHRE != 0 && u.thrEmpty:
		return iirTHRE
	}
	return iirNone
}

// updateIRQ drives the interrupt line from the pending state. Caller holds mu.
func (u *UART) updateIRQ() {
	level := u.iir() != iirNone
	if level != u.irqRaised {
		u.irqRaised = level
		u.setIRQ(level)
	}
}
