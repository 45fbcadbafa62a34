package devices

import (
	"bytes"
	"sync"
	"testing"
)

// Register offsets and bits from the National Semiconductor PC16550D data
// sheet (Table II, "Summary of Registers"), written out here rather than
// taken from the implementation's constants.
const (
	tRBR = 0 // read, DLAB=0
	tTHR = 0 // write, DLAB=0
	tDLL = 0 // DLAB=1
	tIER = 1 // DLAB=0
	tDLM = 1 // DLAB=1
	tIIR = 2 // read
	tFCR = 2 // write
	tLCR = 3
	tMCR = 4
	tLSR = 5
	tMSR = 6
	tSCR = 7

	tIERERBFI = 0x01 // enable received data available interrupt
	tIERETBEI = 0x02 // enable transmitter holding register empty interrupt

	tIIRNone = 0x01 // bit 0: "0 if interrupt pending"
	tIIRTHRE = 0x02 // priority 3: transmitter holding register empty
	tIIRRDA  = 0x04 // priority 2: received data available

	tFCREnable  = 0x01
	tFCRClearRX = 0x02

	tLCRDLAB = 0x80

	tMCRLoop = 0x10

	tLSRDR   = 0x01
	tLSRTHRE = 0x20
	tLSRTEMT = 0x40
)

// irqRecorder records the interrupt line as the UART drives it.
type irqRecorder struct {
	mu     sync.Mutex
	level  bool
	events []bool
}

func (r *irqRecorder) set(level bool) {
	r.mu.Lock()
	r.level = level
	r.events = append(r.events, level)
	r.mu.Unlock()
}

func (r *irqRecorder) get() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.level
}

func newTestUART() (*UART, *bytes.Buffer, *irqRecorder) {
	out := &bytes.Buffer{}
	irq := &irqRecorder{}
	return NewUART(out, irq.set), out, irq
}

func rd(u *UART, off uint64) byte {
	b := []byte{0xa5} // not zero, so a Read that leaves it alone shows
	u.Read(off, b)
	return b[0]
}

func wr(u *UART, off uint64, v byte) { u.Write(off, []byte{v}) }

func TestUARTTransmitGoesToOutput(t *testing.T) {
	u, out, _ := newTestUART()
	msg := []byte("hello, 16550\r\n\x00\xff")
	for _, c := range msg {
		wr(u, tTHR, c)
	}
	if !bytes.Equal(out.Bytes(), msg) {
		t.Errorf("output = %q, want %q", out.Bytes(), msg)
	}
}

func TestUARTLSR(t *testing.T) {
	u, _, _ := newTestUART()
	check := func(when string, wantDR bool) {
		t.Helper()
		lsr := rd(u, tLSR)
		if lsr&tLSRTHRE == 0 || lsr&tLSRTEMT == 0 {
			t.Errorf("%s: LSR = %#02x, want THRE and TEMT set (transmitter always empty)", when, lsr)
		}
		if got := lsr&tLSRDR != 0; got != wantDR {
			t.Errorf("%s: LSR = %#02x, DR = %v, want %v", when, lsr, got, wantDR)
		}
	}
	check("reset", false)
	wr(u, tTHR, 'a')
	check("after THR write", false)
	u.Input([]byte("xy"))
	check("with 2 bytes received", true)
	rd(u, tRBR)
	check("with 1 byte received", true)
	rd(u, tRBR)
	check("after reading all received bytes", false)
	// Reading RBR with nothing received must not make DR appear.
	rd(u, tRBR)
	check("after reading an empty RBR", false)
}

func TestUARTRegistersReadBack(t *testing.T) {
	tests := []struct {
		name string
		off  uint64
		mask byte // bits the data sheet says exist
	}{
		{"IER", tIER, 0x0f}, // bits 4-7 are always 0
		{"LCR", tLCR, 0xff},
		{"MCR", tMCR, 0x1f}, // bits 5-7 are permanently 0
		{"SCR", tSCR, 0xff},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, v := range []byte{0x00, 0x01, 0x0f, 0x10, 0x5a, 0x7f, 0xa5, 0xff} {
				u, _, _ := newTestUART()
				wr(u, tt.off, v)
				if got := rd(u, tt.off); got != v&tt.mask {
					t.Errorf("wrote %#02x, read %#02x, want %#02x", v, got, v&tt.mask)
				}
			}
		})
	}
}

func TestUARTDLABSwitchesToDivisorLatch(t *testing.T) {
	u, out, _ := newTestUART()
	wr(u, tIER, 0x05)
	wr(u, tLCR, tLCRDLAB|0x03) // DLAB, 8N1
	wr(u, tDLL, 0x34)
	wr(u, tDLM, 0x12)
	if got := rd(u, tDLL); got != 0x34 {
		t.Errorf("DLL = %#02x, want 0x34", got)
	}
	if got := rd(u, tDLM); got != 0x12 {
		t.Errorf("DLM = %#02x, want 0x12", got)
	}
	if out.Len() != 0 {
		t.Errorf("divisor latch writes reached the output: %q", out.Bytes())
	}
	if got := rd(u, tLCR); got != tLCRDLAB|0x03 {
		t.Errorf("LCR = %#02x", got)
	}
	wr(u, tLCR, 0x03) // DLAB off
	if got := rd(u, tIER); got != 0x05 {
		t.Errorf("IER after DLAB = %#02x, want 0x05 (untouched by the DLM write)", got)
	}
	u.Input([]byte{'q'})
	if got := rd(u, tRBR); got != 'q' {
		t.Errorf("RBR = %#02x, want 'q'", got)
	}
	wr(u, tTHR, 'z')
	if out.String() != "z" {
		t.Errorf("output = %q, want \"z\"", out.String())
	}
	// And back: the divisor survived.
	wr(u, tLCR, tLCRDLAB)
	if dll, dlm := rd(u, tDLL), rd(u, tDLM); dll != 0x34 || dlm != 0x12 {
		t.Errorf("divisor = %#02x%02x after DLAB toggle, want 0x1234", dlm, dll)
	}
}

func TestUARTIIRPriority(t *testing.T) {
	tests := []struct {
		name  string
		ier   byte
		rx    string
		want  byte // IIR low nibble
		level bool
	}{
		{"nothing enabled, nothing pending", 0, "", tIIRNone, false},
		{"data but RDA disabled", 0, "a", tIIRNone, false},
		{"RDA enabled, no data", tIERERBFI, "", tIIRNone, false},
		{"RDA enabled with data", tIERERBFI, "a", tIIRRDA, true},
		{"THRE enabled", tIERETBEI, "", tIIRTHRE, true},
		{"THRE enabled, data but RDA disabled", tIERETBEI, "a", tIIRTHRE, true},
		{"both enabled, data: RX wins", tIERERBFI | tIERETBEI, "a", tIIRRDA, true},
		{"both enabled, no data", tIERERBFI | tIERETBEI, "", tIIRTHRE, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, _, irq := newTestUART()
			u.Input([]byte(tt.rx))
			wr(u, tIER, tt.ier)
			if got := irq.get(); got != tt.level {
				t.Errorf("IRQ line = %v, want %v", got, tt.level)
			}
			if got := rd(u, tIIR) & 0x0f; got != tt.want {
				t.Errorf("IIR = %#02x, want %#02x", got, tt.want)
			}
		})
	}
}

func TestUARTIIRFIFOBits(t *testing.T) {
	u, _, _ := newTestUART()
	if got := rd(u, tIIR); got&0xc0 != 0 {
		t.Errorf("IIR = %#02x with FIFOs off, want bits 6-7 clear", got)
	}
	wr(u, tFCR, tFCREnable)
	if got := rd(u, tIIR); got&0xc0 != 0xc0 {
		t.Errorf("IIR = %#02x with FIFOs on, want bits 6-7 set", got)
	}
}

func TestUARTTHREInterrupt(t *testing.T) {
	u, _, irq := newTestUART()
	if irq.get() {
		t.Fatal("IRQ raised at reset")
	}
	// Enabling ETBEI while the THR is empty interrupts at once.
	wr(u, tIER, tIERETBEI)
	if !irq.get() {
		t.Fatal("enabling ETBEI with an empty THR did not raise the IRQ")
	}
	// Reading IIR while it reports THRE clears the THRE interrupt.
	if got := rd(u, tIIR) & 0x0f; got != tIIRTHRE {
		t.Fatalf("IIR = %#02x, want THRE", got)
	}
	if irq.get() {
		t.Error("IRQ still raised after the IIR read that reported THRE")
	}
	if got := rd(u, tIIR) & 0x0f; got != tIIRNone {
		t.Errorf("second IIR read = %#02x, want none (0x01)", got)
	}
	// A THR write empties again at once: THRE is pending again.
	wr(u, tTHR, 'x')
	if !irq.get() {
		t.Error("no THRE interrupt after a transmitted byte")
	}
	// Disabling ETBEI drops the line.
	wr(u, tIER, 0)
	if irq.get() {
		t.Error("IRQ still raised with IER = 0")
	}
	if got := rd(u, tIIR) & 0x0f; got != tIIRNone {
		t.Errorf("IIR with IER = 0: %#02x, want 0x01", got)
	}
	// Re-enabling with the THR still empty interrupts again (Linux's
	// 8250 driver starts transmission this way).
	wr(u, tIER, tIERETBEI)
	if !irq.get() {
		t.Error("re-enabling ETBEI did not raise the IRQ")
	}
}

func TestUARTIIRReadDoesNotClearRDA(t *testing.T) {
	u, _, irq := newTestUART()
	wr(u, tIER, tIERERBFI|tIERETBEI)
	u.Input([]byte("ab"))
	for i := 0; i < 3; i++ {
		if got := rd(u, tIIR) & 0x0f; got != tIIRRDA {
			t.Fatalf("IIR read %d = %#02x, want RDA (reading IIR does not consume data)", i, got)
		}
	}
	rd(u, tRBR)
	rd(u, tRBR)
	// With RX drained, the THRE interrupt (never cleared: the IIR reads
	// reported RDA, not THRE) shows.
	if got := rd(u, tIIR) & 0x0f; got != tIIRTHRE {
		t.Errorf("IIR after draining RX = %#02x, want THRE", got)
	}
	if irq.get() {
		t.Error("IRQ raised after the THRE-reporting IIR read with RX empty")
	}
}

func TestUARTReceive(t *testing.T) {
	u, _, irq := newTestUART()
	u.Input([]byte("he"))
	u.Input([]byte("llo"))
	if irq.get() {
		t.Error("IRQ raised for received data with ERBFI off")
	}
	wr(u, tIER, tIERERBFI)
	if !irq.get() {
		t.Error("enabling ERBFI with data waiting did not raise the IRQ")
	}
	var got []byte
	for rd(u, tLSR)&tLSRDR != 0 {
		got = append(got, rd(u, tRBR))
		if len(got) > 100 {
			t.Fatal("DR never cleared")
		}
	}
	if string(got) != "hello" {
		t.Errorf("received %q, want \"hello\"", got)
	}
	if irq.get() {
		t.Error("IRQ still raised with RX empty")
	}
	u.Input([]byte("!"))
	if !irq.get() {
		t.Error("no IRQ for new data with ERBFI on")
	}
	wr(u, tIER, 0)
	if irq.get() {
		t.Error("IRQ still raised after clearing ERBFI")
	}
}

func TestUARTReceiveOverrun(t *testing.T) {
	u, _, _ := newTestUART()
	room := u.RxRoom()
	if room <= 0 {
		t.Fatalf("RxRoom = %d at reset, want > 0", room)
	}
	in := make([]byte, room+37)
	for i := range in {
		in[i] = byte(i*7 + 1)
	}
	u.Input(in)
	if got := u.RxRoom(); got != 0 {
		t.Errorf("RxRoom after overfilling = %d, want 0", got)
	}
	u.Input([]byte("more")) // dropped: the FIFO is full
	var got []byte
	for rd(u, tLSR)&tLSRDR != 0 && len(got) <= len(in) {
		got = append(got, rd(u, tRBR))
	}
	if !bytes.Equal(got, in[:room]) {
		t.Errorf("received %d bytes %x, want the first %d of the input", len(got), got, room)
	}
	if got := u.RxRoom(); got != room {
		t.Errorf("RxRoom after draining = %d, want %d", got, room)
	}
}

func TestUARTLoopback(t *testing.T) {
	u, out, irq := newTestUART()
	wr(u, tMCR, tMCRLoop)
	wr(u, tIER, tIERERBFI)
	wr(u, tTHR, 'L')
	wr(u, tTHR, 'B')
	if out.Len() != 0 {
		t.Errorf("loopback transmit reached the output: %q", out.Bytes())
	}
	if !irq.get() {
		t.Error("no RDA interrupt for looped-back data")
	}
	if got := string([]byte{rd(u, tRBR), rd(u, tRBR)}); got != "LB" {
		t.Errorf("looped back %q, want \"LB\"", got)
	}
	if rd(u, tLSR)&tLSRDR != 0 {
		t.Error("DR set after reading the looped-back bytes")
	}
	wr(u, tMCR, 0)
	wr(u, tTHR, 'o')
	if out.String() != "o" {
		t.Errorf("after leaving loopback, output = %q, want \"o\"", out.String())
	}
	if rd(u, tLSR)&tLSRDR != 0 {
		t.Error("transmitted byte looped back with MCR loop off")
	}
}

func TestUARTLoopbackOverrun(t *testing.T) {
	u, _, _ := newTestUART()
	room := u.RxRoom()
	wr(u, tMCR, tMCRLoop)
	for i := 0; i < room+10; i++ {
		wr(u, tTHR, byte(i))
	}
	if got := u.RxRoom(); got != 0 {
		t.Fatalf("RxRoom = %d after looping back more than the FIFO holds", got)
	}
	for i := 0; i < room; i++ {
		if got := rd(u, tRBR); got != byte(i) {
			t.Fatalf("byte %d = %#02x, want %#02x (the first bytes are kept)", i, got, byte(i))
		}
	}
	if rd(u, tLSR)&tLSRDR != 0 {
		t.Error("more bytes than the FIFO holds were looped back")
	}
}

func TestUARTFCRClearsReceiveFIFO(t *testing.T) {
	u, _, irq := newTestUART()
	wr(u, tIER, tIERERBFI)
	u.Input([]byte("stale"))
	if !irq.get() {
		t.Fatal("no RDA interrupt")
	}
	wr(u, tFCR, tFCREnable|tFCRClearRX)
	if rd(u, tLSR)&tLSRDR != 0 {
		t.Error("DR still set after FCR RX clear")
	}
	if irq.get() {
		t.Error("RDA interrupt still raised after FCR RX clear")
	}
	u.Input([]byte("n"))
	if got := rd(u, tRBR); got != 'n' {
		t.Errorf("first byte after clear = %q, want 'n'", got)
	}
	// FCR without bit 1 leaves received data alone.
	u.Input([]byte("k"))
	wr(u, tFCR, tFCREnable)
	if got := rd(u, tRBR); got != 'k' {
		t.Errorf("FCR write without bit 1 lost data: RBR = %q", got)
	}
}

// lockedBuffer is safe for concurrent writers, so the test does not depend
// on the UART serialising its writes to catch lost bytes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func TestUARTConcurrentTransmit(t *testing.T) {
	const writers, perWriter = 16, 500
	var out lockedBuffer
	var irqMu sync.Mutex
	u := NewUART(&out, func(bool) { irqMu.Lock(); irqMu.Unlock() })
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				u.Write(tTHR, []byte{byte(w)})
				if i%50 == 0 {
					u.Read(tLSR, make([]byte, 1))
					u.Read(tIIR, make([]byte, 1))
					u.Write(tIER, []byte{byte(i & 3)})
				}
			}
		}(w)
	}
	wg.Wait()
	counts := make(map[byte]int)
	for _, c := range out.b.Bytes() {
		counts[c]++
	}
	if out.b.Len() != writers*perWriter {
		t.Errorf("output has %d bytes, want %d", out.b.Len(), writers*perWriter)
	}
	for w := 0; w < writers; w++ {
		if counts[byte(w)] != perWriter {
			t.Errorf("writer %d: %d bytes in the output, want %d", w, counts[byte(w)], perWriter)
		}
	}
}

func TestUARTReadWidthsAndUnknownOffsets(t *testing.T) {
	u, _, _ := newTestUART()
	wr(u, tSCR, 0x5a)
	// Wider accesses carry the register in the low byte, zero above.
	b := []byte{0xff, 0xff, 0xff, 0xff}
	u.Read(tSCR, b)
	if !bytes.Equal(b, []byte{0x5a, 0, 0, 0}) {
		t.Errorf("4-byte read of SCR = %x, want 5a000000", b)
	}
	// Empty accesses do nothing and do not panic.
	u.Read(tSCR, nil)
	u.Write(tSCR, nil)
	// Offsets past the 8 registers read as zero.
	for _, off := range []uint64{8, 0x10, 0xfff} {
		if got := rd(u, off); got != 0 {
			t.Errorf("read at %#x = %#02x, want 0", off, got)
		}
	}
}

// FuzzUART drives random register accesses and input, and checks after
// every access that the interrupt line matches the IIR and that received
// bytes come out in order (a model FIFO stands in for the data sheet's).
func FuzzUART(f *testing.F) {
	f.Add([]byte{0x01, 0x02, 0x80, 0x41, 0x42, 0x02, 0x00, 0x00})
	f.Add([]byte{0x41, 0x03, 0x61, 0x62, 0x63, 0x01, 0x01, 0x00, 0x00, 0x00, 0x82, 0x00})
	f.Add([]byte{0x44, 0x10, 0x40, 0x55, 0x00, 0x05, 0x02, 0x06})
	f.Add(bytes.Repeat([]byte{0x80, 0xff, 0x40, 0x01}, 40))
	f.Fuzz(func(t *testing.T, prog []byte) {
		out := &bytes.Buffer{}
		var line bool
		var calls int
		u := NewUART(out, func(level bool) {
			if level == line && calls > 0 {
				t.Fatalf("setIRQ(%v) called with the line already at that level", level)
			}
			line = level
			calls++
		})
		capacity := u.RxRoom()
		var model []byte // bytes the guest should read, in order
		var lcr, mcr byte
		var sent int

		for i := 0; i < len(prog); {
			op := prog[i]
			i++
			arg := byte(0)
			if i < len(prog) {
				arg = prog[i]
				i++
			}
			off := uint64(op & 7)
			switch op >> 6 {
			case 0: // read
				b := []byte{0xee}
				u.Read(off, b)
				switch {
				case off == tRBR && lcr&tLCRDLAB == 0:
					want := byte(0)
					if len(model) > 0 {
						want, model = model[0], model[1:]
					}
					if b[0] != want {
						t.Fatalf("RBR = %#02x, want %#02x", b[0], want)
					}
				case off == tLSR:
					if (b[0]&tLSRDR != 0) != (len(model) > 0) {
						t.Fatalf("LSR = %#02x with %d bytes queued", b[0], len(model))
					}
					if b[0]&(tLSRTHRE|tLSRTEMT) != tLSRTHRE|tLSRTEMT {
						t.Fatalf("LSR = %#02x without THRE|TEMT", b[0])
					}
				case off == tIIR:
					if iir := b[0] & 0x0f; iir != tIIRNone && iir != tIIRTHRE && iir != tIIRRDA {
						t.Fatalf("IIR = %#02x: not an interrupt this UART can raise", b[0])
					}
				}
			case 1: // write
				u.Write(off, []byte{arg})
				switch {
				case off == tTHR && lcr&tLCRDLAB == 0:
					if mcr&tMCRLoop != 0 {
						if len(model) < capacity {
							model = append(model, arg)
						}
					} else {
						sent++
					}
				case off == tFCR && arg&tFCRClearRX != 0:
					model = model[:0]
				case off == tLCR:
					lcr = arg
				case off == tMCR:
					mcr = arg
				}
			default: // input of up to 64 bytes
				n := int(arg) % 65
				p := make([]byte, n)
				for k := range p {
					p[k] = op ^ byte(k)
				}
				u.Input(p)
				model = append(model, p[:min(n, capacity-len(model))]...)
			}
			u.mu.Lock()
			iir := u.iir()
			u.mu.Unlock()
			if line != (iir != tIIRNone) {
				t.Fatalf("after op %#02x %#02x: IRQ line %v but IIR = %#02x", op, arg, line, iir)
			}
			if got := u.RxRoom(); got != capacity-len(model) {
				t.Fatalf("RxRoom = %d, model holds %d of %d", got, len(model), capacity)
			}
		}
		if out.Len() != sent {
			t.Fatalf("output has %d bytes, %d were transmitted", out.Len(), sent)
		}
	})
}
