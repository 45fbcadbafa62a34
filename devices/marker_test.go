package devices

import (
	"sync"
	"testing"
	"time"
)

func TestMarkerRecordsInOrder(t *testing.T) {
	var notified []Mark
	m := NewMarker(func(code byte, at time.Time) { notified = append(notified, Mark{code, at}) })
	codes := []byte{MarkKernelStart, 0x00, 0xff, MarkUserspace, MarkFirecrackerEnd, MarkKernelStart}
	before := time.Now()
	for _, c := range codes {
		m.Write(0, []byte{c})
	}
	after := time.Now()
	marks := m.Marks()
	if len(marks) != len(codes) {
		t.Fatalf("%d marks, want %d", len(marks), len(codes))
	}
	for i, mk := range marks {
		if mk.Code != codes[i] {
			t.Errorf("mark %d code = %#x, want %#x", i, mk.Code, codes[i])
		}
		if mk.At.Before(before) || mk.At.After(after) {
			t.Errorf("mark %d at %v, outside the writes' window [%v, %v]", i, mk.At, before, after)
		}
		if i > 0 && mk.At.Before(marks[i-1].At) {
			t.Errorf("mark %d at %v is before mark %d at %v", i, mk.At, i-1, marks[i-1].At)
		}
	}
	if len(notified) != len(marks) {
		t.Fatalf("notify called %d times for %d marks", len(notified), len(marks))
	}
	for i := range marks {
		if notified[i] != marks[i] {
			t.Errorf("notify %d got %+v, recorded %+v", i, notified[i], marks[i])
		}
	}
}

func TestMarkerUsesItsClock(t *testing.T) {
	m := NewMarker(nil) // notify is optional
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	tick := 0
	m.now = func() time.Time { tick++; return t0.Add(time.Duration(tick) * time.Millisecond) }
	for _, c := range []byte{1, 2, 3} {
		m.Write(0, []byte{c})
	}
	marks := m.Marks()
	for i, mk := range marks {
		if want := t0.Add(time.Duration(i+1) * time.Millisecond); !mk.At.Equal(want) || mk.Code != byte(i+1) {
			t.Errorf("mark %d = {%d %v}, want {%d %v}", i, mk.Code, mk.At, i+1, want)
		}
	}
	if len(marks) != 3 {
		t.Errorf("%d marks, want 3", len(marks))
	}
}

func TestMarkerWidthsAndOffsets(t *testing.T) {
	m := NewMarker(nil)
	// Only the low byte of a wider write at offset 0 is the code.
	m.Write(0, []byte{0x41, 0x99, 0x98, 0x97})
	m.Write(0, []byte{0x7b, 0, 0, 0, 0, 0, 0, 0})
	// Writes elsewhere in the page, and empty writes, are ignored.
	for _, off := range []uint64{1, 2, 4, 8, 0xff8, 0xfff} {
		m.Write(off, []byte{0x55})
	}
	m.Write(0, nil)
	marks := m.Marks()
	if len(marks) != 2 || marks[0].Code != 0x41 || marks[1].Code != 0x7b {
		t.Errorf("marks = %+v, want codes 0x41, 0x7b", marks)
	}
}

func TestMarkerReadsZero(t *testing.T) {
	m := NewMarker(nil)
	m.Write(0, []byte{0x41})
	for _, n := range []int{1, 2, 4, 8} {
		for _, off := range []uint64{0, 4, 0xff8} {
			b := make([]byte, n)
			for i := range b {
				b[i] = 0xa5
			}
			m.Read(off, b)
			for i, c := range b {
				if c != 0 {
					t.Errorf("%d-byte read at %#x: byte %d = %#x, want 0", n, off, i, c)
				}
			}
		}
	}
	if len(m.Marks()) != 1 {
		t.Error("reads changed the marks")
	}
}

func TestMarkerResetAndCopy(t *testing.T) {
	m := NewMarker(nil)
	m.Write(0, []byte{1})
	m.Write(0, []byte{2})
	got := m.Marks()
	got[0].Code = 0xee // must not reach the device's record
	if m.Marks()[0].Code != 1 {
		t.Error("Marks returned the device's own slice, not a copy")
	}
	m.Reset()
	if n := len(m.Marks()); n != 0 {
		t.Errorf("%d marks after Reset, want 0", n)
	}
	m.Write(0, []byte{3})
	if marks := m.Marks(); len(marks) != 1 || marks[0].Code != 3 {
		t.Errorf("after Reset and a write: %+v, want one mark with code 3", marks)
	}
}

func TestMarkerConcurrentWrites(t *testing.T) {
	var mu sync.Mutex
	seen := map[byte]int{}
	m := NewMarker(func(code byte, at time.Time) { mu.Lock(); seen[code]++; mu.Unlock() })
	const writers, each = 8, 100 // 800 marks, under MaxMarks
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				m.Write(0, []byte{byte(w)})
				if i%20 == 0 {
					m.Marks()
				}
			}
		}(w)
	}
	wg.Wait()
	counts := map[byte]int{}
	for _, mk := range m.Marks() {
		counts[mk.Code]++
	}
	for w := 0; w < writers; w++ {
		if counts[byte(w)] != each || seen[byte(w)] != each {
			t.Errorf("code %d: %d recorded, %d notified, want %d", w, counts[byte(w)], seen[byte(w)], each)
		}
	}
}

// A guest writing the marker in a loop: the first MaxMarks marks are
// kept, in order, the rest counted, and every write is still notified.
func TestMarkerBounded(t *testing.T) {
	notified := 0
	m := NewMarker(func(byte, time.Time) { notified++ })
	const writes = MaxMarks + 500
	for i := 0; i < writes; i++ {
		m.Write(0, []byte{byte(i)})
	}
	marks := m.Marks()
	if len(marks) != MaxMarks {
		t.Fatalf("%d marks kept, want %d", len(marks), MaxMarks)
	}
	if marks[MaxMarks-1].Code != byte((MaxMarks-1)%256) {
		t.Errorf("last kept mark has code %d, want %d (the first writes are kept)", marks[MaxMarks-1].Code, byte((MaxMarks-1)%256))
	}
	if d := m.Dropped(); d != 500 {
		t.Errorf("Dropped %d, want 500", d)
	}
	if notified != writes {
		t.Errorf("%d notifications, want %d", notified, writes)
	}
	m.Reset()
	if m.Dropped() != 0 || len(m.Marks()) != 0 {
		t.Errorf("after Reset: %d marks, %d dropped", len(m.Marks()), m.Dropped())
	}
}
