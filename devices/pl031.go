package devices

import (
	"sync"
	"time"
)

// PL031 register offsets and bits (ARM PrimeCell Real Time Clock (PL031)
// Technical Reference Manual, ARM DDI 0224, section 3.2 "Register
// summary"). Every register is 32 bits wide.
const (
	rtcDR   = 0x000 // data: the counter, seconds (read only)
	rtcMR   = 0x004 // match: the alarm time
	rtcLR   = 0x008 // load: a write sets the counter; reads the last value written
	rtcCR   = 0x00c // control: bit 0 starts the counter
	rtcIMSC = 0x010 // interrupt mask set/clear: bit 0 enables the alarm interrupt
	rtcRIS  = 0x014 // raw interrupt status (read only)
	rtcMIS  = 0x018 // masked interrupt status: RIS & IMSC (read only)
	rtcICR  = 0x01c // interrupt clear: writing bit 0 clears RIS (write only)

	rtcCRStart = 1 << 0
	rtcIntBit  = 1 << 0 // RTCINTR, the only interrupt

	// rtcIDBase is RTCPeriphID0: four peripheral id registers, then four
	// PrimeCell id registers (TRM 3.3.9, 3.3.10), one byte in each word.
	rtcIDBase = 0xfe0
)

// pl031IDs are the bytes at 0xFE0..0xFFC (TRM 3.3.9, 3.3.10): part number
// 0x031 in PeriphID0 and PeriphID1[3:0], designer 0x41 (ARM) in
// PeriphID1[7:4] and PeriphID2[3:0], revision 1 in PeriphID2[7:4],
// configuration 0 in PeriphID3 (0x31, 0x10, 0x14, 0x00; QEMU's PL031 has
// the same), then the PrimeCell id 0xB105F00D (0x0D, 0xF0, 0x05, 0xB1)
// that Linux's AMBA bus checks before it matches a driver.
const pl031IDs = "\x31\x10\x14\x00\x0d\xf0\x05\xb1"

// Clock is the wall clock and the timers a device runs on; tests pass a
// fake one.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f once d has passed, on its own goroutine; the
	// returned func cancels it.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// HostClock is the host's wall clock and Go's timers.
type HostClock struct{}

// Now implements Clock.
func (HostClock) Now() time.Time { return time.Now() }

// AfterFunc implements Clock.
func (HostClock) AfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

// PL031 is an Arm PrimeCell PL031 real-time clock whose counter is the
// host's wall clock in seconds since the epoch plus an offset that belongs
// to this device alone: a guest that writes the load register (LR) moves
// its own clock, never the host's or another VM's.
//
// The counter runs from power-on (CR reads back started, and a write
// cannot stop it, as the TRM says of a started RTC), so a guest that never
// touches CR still reads the time. The alarm works as the TRM describes:
// when the counter reaches the match register (MR), the raw interrupt
// (RIS) is set; the interrupt line is RIS & IMSC, level-triggered, and a
// write of 1 to ICR clears it. Writing MR equal to the current count
// matches at once, as QEMU's PL031 does.
//
// Registers are 32 bits; reads of any width and alignment return the
// bytes of the registers they cover, writes other than aligned 32-bit
// ones are ignored (the device sits on a 32-bit APB bus), as are writes to
// read-only registers and unknown offsets, which read as zero.
type PL031 struct {
	clock  Clock
	setIRQ func(level bool)

	mu     sync.Mutex
	offset time.Duration // guest counter = host wall clock + offset
	lr, mr uint32
	imsc   bool
	ris    bool
	line   bool        // the level last given to setIRQ
	stop   func() bool // cancels the pending alarm, if any
	gen    uint64      // alarm generation: a stale timer does nothing
	closed bool
}

// NewPL031 returns an RTC on clock (HostClock{} for a VM) whose interrupt
// line is driven through setIRQ (nil: no interrupt).
func NewPL031(clock Clock, setIRQ func(level bool)) *PL031 {
	if setIRQ == nil {
		setIRQ = func(bool) {}
	}
	return &PL031{clock: clock, setIRQ: setIRQ}
}

// Name implements Device.
func (r *PL031) Name() string { return "pl031" }

// countLocked is the counter's value now, before truncation to 32 bits,
// and the time in nanoseconds on the guest's clock.
func (r *PL031) countLocked() (count int64, ns int64) {
	ns = r.clock.Now().UnixNano() + int64(r.offset)
	count = ns / int64(time.Second)
	if ns < 0 && ns%int64(time.Second) != 0 {
		count-- // floor, should a host clock ever be before 1970
	}
	return count, ns
}

// regLocked is the 32-bit register at the aligned offset off.
func (r *PL031) regLocked(off uint64) uint32 {
	switch off {
	case rtcDR:
		c, _ := r.countLocked()
		return uint32(c)
	case rtcMR:
		return r.mr
	case rtcLR:
		return r.lr
	case rtcCR:
		return rtcCRStart
	case rtcIMSC:
		return b2u(r.imsc)
	case rtcRIS:
		return b2u(r.ris)
	case rtcMIS:
		return b2u(r.ris && r.imsc)
	}
	if off >= rtcIDBase && off < rtcIDBase+4*uint64(len(pl031IDs)) {
		return uint32(pl031IDs[(off-rtcIDBase)/4])
	}
	return 0
}

func b2u(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// Read implements Device.
func (r *PL031) Read(off uint64, data []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	readWords(off, data, r.regLocked)
}

// Write implements Device.
func (r *PL031) Write(off uint64, data []byte) {
	if len(data) != 4 || off&3 != 0 {
		return
	}
	v := uint32(data[0]) | uint32(data[1])<<8 | uint32(data[2])<<16 | uint32(data[3])<<24
	r.mu.Lock()
	defer r.mu.Unlock()
	switch off {
	case rtcMR:
		r.mr = v
		r.armLocked()
	case rtcLR:
		r.lr = v
		_, ns := r.countLocked()
		// The counter reads v from now on and ticks a second later.
		r.offset += time.Duration(int64(v)*int64(time.Second) - ns)
		r.armLocked()
	case rtcIMSC:
		r.imsc = v&rtcIntBit != 0
	case rtcICR:
		if v&rtcIntBit != 0 {
			r.ris = false
		}
	default:
		return // CR (already started), read-only and unknown registers
	}
	r.updateLocked()
}

// armLocked (re)starts the alarm for the next time the counter equals MR.
func (r *PL031) armLocked() {
	if r.stop != nil {
		r.stop()
		r.stop = nil
	}
	r.gen++
	if r.closed {
		return
	}
	count, ns := r.countLocked()
	ahead := r.mr - uint32(count) // seconds until the match, modulo 2^32
	if ahead == 0 {
		r.ris = true
		return
	}
	wait := time.Duration((count+int64(ahead))*int64(time.Second) - ns)
	gen := r.gen
	r.stop = r.clock.AfterFunc(wait, func() { r.match(gen) })
}

// match is the alarm timer firing.
func (r *PL031) match(gen uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if gen != r.gen || r.closed {
		return
	}
	r.stop = nil
	r.ris = true
	r.updateLocked()
}

// updateLocked drives the interrupt line to RIS & IMSC when it changed.
// It runs under the lock so that level changes reach the GIC in order.
func (r *PL031) updateLocked() {
	level := r.ris && r.imsc && !r.closed
	if level != r.line {
		r.line = level
		r.setIRQ(level)
	}
}

// Reset is a guest reboot: the alarm, its mask and status are cleared and
// the line lowered; the counter keeps its time (and the guest's offset),
// as a battery-backed RTC does.
func (r *PL031) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mr, r.imsc, r.ris = 0, false, false
	if r.stop != nil {
		r.stop()
		r.stop = nil
	}
	r.gen++
	r.updateLocked()
}

// Close stops the alarm timer for good; the device then never touches its
// interrupt line again.
func (r *PL031) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stop != nil {
		r.stop()
		r.stop = nil
	}
	r.gen++
	r.closed = true
}
