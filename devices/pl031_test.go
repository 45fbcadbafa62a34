package devices

import (
	"encoding/binary"
	"sync"
	"testing"
	"time"
)

// Register offsets from the PL031 TRM (ARM DDI 0224, 3.2), written out here
// rather than taken from the implementation.
const (
	tDR   = 0x00
	tMR   = 0x04
	tLR   = 0x08
	tCR   = 0x0c
	tIMSC = 0x10
	tRIS  = 0x14
	tMIS  = 0x18
	tICR  = 0x1c
)

// fakeClock is a wall clock that moves only when told, with timers that
// fire when it passes their deadline.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	at      time.Time
	f       func()
	stopped bool
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !t.stopped
		t.stopped = true
		return was
	}
}

// advance moves the clock by d and runs the timers that are due, outside
// the clock's lock (as Go's timers run on their own goroutine).
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []func()
	keep := c.timers[:0]
	for _, t := range c.timers {
		switch {
		case t.stopped:
		case !t.at.After(c.now):
			t.stopped = true
			due = append(due, t.f)
		default:
			keep = append(keep, t)
		}
	}
	c.timers = keep
	c.mu.Unlock()
	for _, f := range due {
		f()
	}
}

func (c *fakeClock) pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if !t.stopped {
			n++
		}
	}
	return n
}

// irqLog records the levels the device drives its line to.
type irqLog struct {
	mu     sync.Mutex
	levels []bool
}

func (l *irqLog) set(level bool) {
	l.mu.Lock()
	l.levels = append(l.levels, level)
	l.mu.Unlock()
}

func (l *irqLog) last() (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.levels) == 0 {
		return false, 0
	}
	return l.levels[len(l.levels)-1], len(l.levels)
}

func rd32(d Device, off uint64) uint32 {
	b := make([]byte, 4)
	d.Read(off, b)
	return binary.LittleEndian.Uint32(b)
}

func wr32(d Device, off uint64, v uint32) {
	d.Write(off, binary.LittleEndian.AppendUint32(nil, v))
}

// The host time the tests start at: 2026-12-01 10:00:00.25 UTC.
var testEpoch = time.Date(2026, 12, 1, 10, 0, 0, 250_000_000, time.UTC)

func newTestRTC() (*PL031, *fakeClock, *irqLog) {
	c := &fakeClock{now: testEpoch}
	l := &irqLog{}
	return NewPL031(c, l.set), c, l
}

func TestPL031DataIsHostTime(t *testing.T) {
	r, c, _ := newTestRTC()
	if got, want := rd32(r, tDR), uint32(testEpoch.Unix()); got != want {
		t.Fatalf("DR = %d, want the host's seconds since the epoch %d", got, want)
	}
	c.advance(750 * time.Millisecond) // to the next whole second
	if got, want := rd32(r, tDR), uint32(testEpoch.Unix()+1); got != want {
		t.Errorf("DR after the host's second ticked = %d, want %d", got, want)
	}
	c.advance(90 * time.Second)
	if got, want := rd32(r, tDR), uint32(testEpoch.Unix()+91); got != want {
		t.Errorf("DR 90 s later = %d, want %d", got, want)
	}
	if cr := rd32(r, tCR); cr&1 != 1 {
		t.Errorf("CR = %#x: the counter should read as started", cr)
	}
	// Linux's probe writes CR |= 1; a guest writing 0 cannot stop it.
	wr32(r, tCR, 0)
	before := rd32(r, tDR)
	c.advance(2 * time.Second)
	if after := rd32(r, tDR); after != before+2 || rd32(r, tCR)&1 != 1 {
		t.Errorf("after CR = 0: DR %d -> %d, CR %#x; the counter must keep running", before, after, rd32(r, tCR))
	}
}

func TestPL031PrimeCellIDs(t *testing.T) {
	r, _, _ := newTestRTC()
	// PL031 TRM (ARM DDI 0224) 3.3.9-3.3.10, and QEMU's hw/rtc/pl031.c:
	// PeriphID0-3 then PCellID0-3, one byte in each word's low 8 bits.
	offs := []uint64{0xfe0, 0xfe4, 0xfe8, 0xfec, 0xff0, 0xff4, 0xff8, 0xffc}
	want := []uint32{0x31, 0x10, 0x14, 0x00, 0x0d, 0xf0, 0x05, 0xb1}
	var pid, cid uint32
	for i, off := range offs {
		got := rd32(r, off)
		if got != want[i] {
			t.Errorf("id register %#x = %#x, want %#x", off, got, want[i])
		}
		if i < 4 {
			pid |= got << (8 * i)
		} else {
			cid |= got << (8 * (i - 4))
		}
	}
	// The fields of the peripheral id (TRM 3.3.9, figure 3-10).
	if part, designer, rev, cfg := pid&0xfff, (pid>>12)&0xff, (pid>>20)&0xf, pid>>24; part != 0x031 || designer != 0x41 || rev != 1 || cfg != 0 {
		t.Errorf("periphid %#x: part %#x designer %#x revision %d configuration %d; want 0x031, 0x41 (ARM), 1, 0", pid, part, designer, rev, cfg)
	}
	// What Linux's amba_read_periphid assembles and pl031_ids matches
	// (id 0x00041031, mask 0x000fffff).
	if pid&0x000fffff != 0x00041031 || cid != 0xb105f00d {
		t.Errorf("periphid %#x, cid %#x: Linux's AMBA bus would not match rtc-pl031", pid, cid)
	}
	if got := rd32(r, 0xfdc); got != 0 {
		t.Errorf("offset 0xfdc reads %#x, want 0", got)
	}
}

func TestPL031LoadSetsThisClockOnly(t *testing.T) {
	r, c, _ := newTestRTC()
	other := NewPL031(c, nil)
	const set = 1_000_000_000 // 2001-09-09
	wr32(r, tLR, set)
	if got := rd32(r, tDR); got != set {
		t.Fatalf("DR right after LR = %d: %d", set, got)
	}
	if got := rd32(r, tLR); got != set {
		t.Errorf("LR reads %d, want the value written %d", got, set)
	}
	c.advance(999 * time.Millisecond)
	if got := rd32(r, tDR); got != set {
		t.Errorf("DR 999 ms after the load = %d, want %d (a second has not passed)", got, set)
	}
	c.advance(time.Millisecond)
	if got := rd32(r, tDR); got != set+1 {
		t.Errorf("DR 1 s after the load = %d, want %d", got, set+1)
	}
	if got, want := rd32(other, tDR), uint32(c.Now().Unix()); got != want {
		t.Errorf("another RTC on the same host reads %d, want the host time %d", got, want)
	}
	if c.Now().Year() != 2026 {
		t.Errorf("the host clock moved to %v", c.Now())
	}
}

func TestPL031AlarmInterrupt(t *testing.T) {
	r, c, irq := newTestRTC()
	now := rd32(r, tDR)
	// What Linux's pl031_set_alarm + pl031_alarm_irq_enable do.
	wr32(r, tMR, now+3)
	wr32(r, tICR, 1)
	wr32(r, tIMSC, rd32(r, tIMSC)|1)
	if got := rd32(r, tMR); got != now+3 {
		t.Errorf("MR reads %d, want %d", got, now+3)
	}
	if rd32(r, tRIS) != 0 || rd32(r, tMIS) != 0 {
		t.Fatalf("alarm pending before its time: RIS %d MIS %d", rd32(r, tRIS), rd32(r, tMIS))
	}
	c.advance(2 * time.Second) // DR = now+2
	if rd32(r, tRIS) != 0 {
		t.Fatalf("alarm fired a second early")
	}
	c.advance(time.Second) // DR = now+3: the match
	if rd32(r, tDR) != now+3 || rd32(r, tRIS) != 1 || rd32(r, tMIS) != 1 {
		t.Fatalf("at the match: DR %d RIS %d MIS %d, want DR %d RIS 1 MIS 1", rd32(r, tDR), rd32(r, tRIS), rd32(r, tMIS), now+3)
	}
	if lvl, n := irq.last(); !lvl || n != 1 {
		t.Fatalf("line level %v after %d changes, want raised once", lvl, n)
	}
	// The interrupt handler: read MIS, write ICR.
	wr32(r, tICR, 1)
	if rd32(r, tRIS) != 0 {
		t.Errorf("RIS still set after ICR")
	}
	if lvl, n := irq.last(); lvl || n != 2 {
		t.Errorf("line level %v after %d changes, want lowered", lvl, n)
	}
}

func TestPL031MaskedAlarm(t *testing.T) {
	r, c, irq := newTestRTC()
	wr32(r, tMR, rd32(r, tDR)+1)
	c.advance(time.Second)
	if rd32(r, tRIS) != 1 || rd32(r, tMIS) != 0 {
		t.Fatalf("masked match: RIS %d MIS %d, want 1 and 0", rd32(r, tRIS), rd32(r, tMIS))
	}
	if _, n := irq.last(); n != 0 {
		t.Fatalf("a masked alarm drove the line")
	}
	wr32(r, tIMSC, 1) // unmasking a pending alarm raises the line
	if lvl, _ := irq.last(); !lvl || rd32(r, tMIS) != 1 {
		t.Errorf("unmasked pending alarm: line %v MIS %d", lvl, rd32(r, tMIS))
	}
	wr32(r, tIMSC, 0)
	if lvl, _ := irq.last(); lvl {
		t.Errorf("masking did not lower the line")
	}
}

func TestPL031AlarmMovesWithLoadAndRewrite(t *testing.T) {
	r, c, _ := newTestRTC()
	wr32(r, tMR, 5000)
	wr32(r, tLR, 4990) // the counter is now 10 s before the match
	c.advance(9 * time.Second)
	if rd32(r, tRIS) != 0 {
		t.Fatalf("alarm fired at DR %d, before MR 5000", rd32(r, tDR))
	}
	c.advance(time.Second)
	if rd32(r, tRIS) != 1 {
		t.Fatalf("no alarm at DR %d = MR", rd32(r, tDR))
	}
	wr32(r, tICR, 1)
	// Rewriting MR replaces the pending alarm: only the new one fires.
	wr32(r, tMR, rd32(r, tDR)+5)
	wr32(r, tMR, rd32(r, tDR)+2)
	if n := c.pending(); n != 1 {
		t.Errorf("%d alarm timers pending, want 1", n)
	}
	c.advance(2 * time.Second)
	if rd32(r, tRIS) != 1 {
		t.Errorf("rewritten alarm did not fire")
	}
	// MR equal to the counter matches at once.
	wr32(r, tICR, 1)
	wr32(r, tMR, rd32(r, tDR))
	if rd32(r, tRIS) != 1 {
		t.Errorf("MR = DR did not match at once")
	}
}

func TestPL031AccessWidths(t *testing.T) {
	r, _, _ := newTestRTC()
	wr32(r, tLR, 0x1234_5678)
	// A byte read at offset 1 of LR, a halfword at offset 2.
	b := make([]byte, 1)
	r.Read(tLR+1, b)
	if b[0] != 0x56 {
		t.Errorf("byte at LR+1 = %#x, want 0x56", b[0])
	}
	h := make([]byte, 2)
	r.Read(tLR+2, h)
	if binary.LittleEndian.Uint16(h) != 0x1234 {
		t.Errorf("halfword at LR+2 = %#x", h)
	}
	// An 8-byte read of LR and CR.
	d := make([]byte, 8)
	r.Read(tLR, d)
	if binary.LittleEndian.Uint32(d) != 0x1234_5678 || binary.LittleEndian.Uint32(d[4:])&1 != 1 {
		t.Errorf("8-byte read at LR = % x", d)
	}
	// Narrow and unaligned writes are dropped; so are writes to DR/RIS/MIS.
	r.Write(tLR, []byte{0xff})
	r.Write(tLR+2, []byte{0xff, 0xff, 0xff, 0xff})
	r.Write(tMR, make([]byte, 8))
	if rd32(r, tLR) != 0x1234_5678 {
		t.Errorf("a narrow or unaligned write changed LR to %#x", rd32(r, tLR))
	}
	dr := rd32(r, tDR)
	wr32(r, tDR, 7)
	wr32(r, tRIS, 1)
	wr32(r, tMIS, 1)
	wr32(r, 0x800, 1)
	if rd32(r, tDR) != dr || rd32(r, tRIS) != 0 || rd32(r, tMIS) != 0 || rd32(r, 0x800) != 0 {
		t.Errorf("writes to read-only registers took effect")
	}
	if rd32(r, tICR) != 0 {
		t.Errorf("ICR (write only) reads non-zero")
	}
}

func TestPL031ResetAndClose(t *testing.T) {
	r, c, irq := newTestRTC()
	wr32(r, tLR, 42)
	wr32(r, tIMSC, 1)
	wr32(r, tMR, 42) // matches at once: line up
	if lvl, _ := irq.last(); !lvl {
		t.Fatal("line not raised")
	}
	r.Reset()
	if lvl, _ := irq.last(); lvl {
		t.Errorf("Reset left the line raised")
	}
	if rd32(r, tIMSC) != 0 || rd32(r, tRIS) != 0 || rd32(r, tMR) != 0 {
		t.Errorf("Reset kept the alarm state")
	}
	if rd32(r, tDR) != 42 {
		t.Errorf("Reset lost the time: DR %d, want 42", rd32(r, tDR))
	}
	wr32(r, tIMSC, 1)
	wr32(r, tMR, 44)
	r.Close()
	_, n := irq.last()
	c.advance(5 * time.Second)
	if _, m := irq.last(); m != n || c.pending() != 0 {
		t.Errorf("the alarm drove the line after Close (%d -> %d changes, %d timers)", n, m, c.pending())
	}
}

// TestPL031HostClock runs the device on the real clock: DR is the host's
// time now.
func TestPL031HostClock(t *testing.T) {
	r := NewPL031(HostClock{}, nil)
	before := time.Now().Unix()
	got := int64(rd32(r, tDR))
	after := time.Now().Unix()
	if got < before || got > after {
		t.Errorf("DR = %d, host time was %d..%d", got, before, after)
	}
}

// FuzzPL031 drives the registers with arbitrary accesses and checks the
// invariants: no panic, MIS = RIS & IMSC, the line follows MIS.
func FuzzPL031(f *testing.F) {
	f.Add([]byte{0x04, 4, 1, 0, 0, 0, 0x10, 4, 1, 0, 0, 0})
	f.Add([]byte{0xfe, 1, 0x08, 8, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, prog []byte) {
		r, c, irq := newTestRTC()
		for len(prog) >= 2 {
			off, n := uint64(prog[0])<<2|uint64(prog[1]>>6)<<10, int(prog[1]&7)+1
			prog = prog[2:]
			data := make([]byte, n)
			if len(prog) > 0 && prog[0]&1 == 1 {
				copy(data, prog[1:])
				r.Write(off, data)
			} else {
				r.Read(off, data)
			}
			if len(prog) > 0 {
				c.advance(time.Duration(prog[0]) * 100 * time.Millisecond)
				prog = prog[1:]
			}
			ris, imsc, mis := rd32(r, tRIS), rd32(r, tIMSC), rd32(r, tMIS)
			if mis != ris&imsc {
				t.Fatalf("MIS %d != RIS %d & IMSC %d", mis, ris, imsc)
			}
			if lvl, _ := irq.last(); lvl != (mis == 1) {
				t.Fatalf("line %v with MIS %d", lvl, mis)
			}
		}
	})
}
