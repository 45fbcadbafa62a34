//go:build linux

package tracepoint

import (
	"encoding/binary"
	"errors"
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mvm-dev/mvm/exits"
)

var ne = binary.NativeEndian

// record builds a perf record: header, then body padded to 8 bytes.
func record(typ uint32, body []byte) []byte {
	n := headerSize + len(body)
	n = (n + 7) &^ 7
	b := make([]byte, n)
	ne.PutUint32(b[0:], typ)
	ne.PutUint16(b[6:], uint16(n))
	copy(b[headerSize:], body)
	return b
}

// sampleBody lays out a SampleType sample: pid, tid, time, cpu, res, size, raw.
func sampleBody(pid, tid uint32, time uint64, cpu uint32, raw []byte) []byte {
	b := make([]byte, 28+len(raw))
	ne.PutUint32(b[0:], pid)
	ne.PutUint32(b[4:], tid)
	ne.PutUint64(b[8:], time)
	ne.PutUint32(b[16:], cpu)
	ne.PutUint32(b[24:], uint32(len(raw)))
	copy(b[28:], raw)
	return b
}

func lostBody(lost uint64, tid uint32, time uint64, cpu uint32) []byte {
	b := make([]byte, 16+24)
	ne.PutUint64(b[0:], 77) // id
	ne.PutUint64(b[8:], lost)
	ne.PutUint32(b[16:], 1)
	ne.PutUint32(b[20:], tid)
	ne.PutUint64(b[24:], time)
	ne.PutUint32(b[32:], cpu)
	return b
}

// fakeRing is a ring backed by ordinary memory, written the way the kernel
// writes a perf mmap ring.
type fakeRing struct {
	*ring
	head uint64
}

func newFakeRing(dataPages int) *fakeRing {
	page := os.Getpagesize()
	mem := make([]byte, (1+dataPages)*page)
	r := &ring{tid: 4242, mem: mem, meta: (*unix.PerfEventMmapPage)(unsafe.Pointer(&mem[0]))}
	r.meta.Data_offset = uint64(page)
	r.meta.Data_size = uint64(dataPages * page)
	r.data = mem[page:]
	return &fakeRing{ring: r}
}

func (f *fakeRing) write(rec []byte) {
	size := uint64(len(f.data))
	for i, b := range rec {
		f.data[(f.head+uint64(i))&(size-1)] = b
	}
	f.head += uint64(len(rec))
	f.meta.Data_head = f.head
}

// rawKVM builds a raw tracepoint record of a format with field values.
func rawKVM(t *testing.T, f *Format, size int, vals map[string]uint64) []byte {
	t.Helper()
	raw := make([]byte, size)
	ct, _ := f.Field("common_type")
	ne.PutUint16(raw[ct.Offset:], uint16(f.ID))
	for name, v := range vals {
		fd, ok := f.Field(name)
		if !ok {
			t.Fatalf("%s has no %s", f, name)
		}
		switch fd.Size {
		case 4:
			ne.PutUint32(raw[fd.Offset:], uint32(v))
		case 8:
			ne.PutUint64(raw[fd.Offset:], v)
		}
	}
	return raw
}

func TestWalkRingWrap(t *testing.T) {
	data := make([]byte, 64)
	var scratch []byte
	// Place a 24-byte record so that it wraps: tail at 56.
	rec := record(recordSample, []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	start := uint64(64*3 + 56)
	for i, b := range rec {
		data[(start+uint64(i))&63] = b
	}
	var got [][]byte
	tail, err := walkRing(data, start, start+uint64(len(rec)), &scratch, func(typ uint32, body []byte) {
		if typ != recordSample {
			t.Errorf("type %d", typ)
		}
		got = append(got, append([]byte(nil), body...))
	})
	if err != nil || tail != start+24 || len(got) != 1 || got[0][0] != 1 || got[0][15] != 16 {
		t.Fatalf("tail %d err %v got %v", tail, err, got)
	}

	// Corrupt: a size smaller than the header, a size past head, a head
	// beyond the ring.
	bad := make([]byte, 64)
	ne.PutUint16(bad[6:], 4)
	if _, err := walkRing(bad, 0, 16, &scratch, func(uint32, []byte) {}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("tiny record: %v", err)
	}
	ne.PutUint16(bad[6:], 40)
	if _, err := walkRing(bad, 0, 16, &scratch, func(uint32, []byte) {}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("record past head: %v", err)
	}
	if _, err := walkRing(bad, 0, 200, &scratch, func(uint32, []byte) {}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("head past ring: %v", err)
	}
	if _, err := walkRing(bad, 0, 4, &scratch, func(uint32, []byte) {}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("stray bytes: %v", err)
	}
	if _, err := walkRing(make([]byte, 48), 0, 8, &scratch, func(uint32, []byte) {}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("non power of two: %v", err)
	}
	if _, err := decodeSample(make([]byte, 10)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("short sample: %v", err)
	}
	s := sampleBody(1, 2, 3, 4, nil)
	ne.PutUint32(s[24:], 1000)
	if _, err := decodeSample(s); !errors.Is(err, ErrCorrupt) {
		t.Errorf("raw size past end: %v", err)
	}
	if _, err := decodeLost(make([]byte, 8)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("short lost: %v", err)
	}
	if r, err := decodeLost(make([]byte, 16)); err != nil || r.TID != 0 {
		t.Errorf("lost without sample_id: %+v %v", r, err)
	}
}

// TestProfilerDrainArm64 pushes arm64 kvm_entry/kvm_exit samples through a
// ring laid out exactly as the kernel's, across the wrap point, and checks
// the profiler names and pairs them: the arm64 decoding path, tested on any
// host.
func TestProfilerDrainArm64(t *testing.T) {
	entry, err := ParseFormat("kvm", []byte(arm64KVMEntryFormat))
	if err != nil {
		t.Fatal(err)
	}
	exit, err := ParseFormat("kvm", []byte(arm64KVMExitFormat))
	if err != nil {
		t.Fatal(err)
	}
	sess, err := NewSession([]*Format{entry, exit}, 1)
	if err != nil {
		t.Fatal(err)
	}
	fr := newFakeRing(1)
	sess.rings = append(sess.rings, fr.ring)
	namer, err := exits.NamerForFields(func(n string) bool { _, ok := exit.Field(n); return ok })
	if err != nil {
		t.Fatal(err)
	}
	code, _ := exit.Field("ret")
	sub, _ := exit.Field("esr_ec")
	p := &Profiler{sess: sess, agg: NewAggregator(namer), entry: entry, exit: exit, code: code, sub: sub}
	p.agg.SetVCPU(4242, 3)

	// Fill most of the ring and drain, so the next records wrap.
	page := uint64(os.Getpagesize())
	now := uint64(1_000_000)
	var want int
	for fr.head < page-200 {
		fr.write(record(recordSample, sampleBody(1, 4242, now, 0, rawKVM(t, entry, 16, map[string]uint64{"vcpu_pc": 0x1000}))))
		now += 100
		fr.write(record(recordSample, sampleBody(1, 4242, now, 0, rawKVM(t, exit, 24, map[string]uint64{"ret": 2, "esr_ec": 0x24}))))
		now += 50
		want++
	}
	if err := p.Drain(); err != nil {
		t.Fatal(err)
	}
	if fr.meta.Data_tail != fr.head {
		t.Fatalf("tail %d, head %d", fr.meta.Data_tail, fr.head)
	}
	for i := 0; i < 10; i++ {
		fr.write(record(recordSample, sampleBody(1, 4242, now, 1, rawKVM(t, entry, 16, nil))))
		now += 1000
		fr.write(record(recordSample, sampleBody(1, 4242, now, 1, rawKVM(t, exit, 24, map[string]uint64{"ret": 0x8000_0000 | 2, "esr_ec": 0x16}))))
		now += 10
	}
	fr.write(record(recordLost, lostBody(5, 4242, now, 1)))
	fr.write(record(recordSample, sampleBody(1, 4242, now+1, 1, rawKVM(t, exit, 24, map[string]uint64{"ret": 0}))))
	// A record of an event the session did not open is ignored.
	fr.write(record(recordSample, sampleBody(1, 4242, now+2, 1, []byte{0xff, 0xff, 0, 0})))
	if err := p.Drain(); err != nil {
		t.Fatal(err)
	}
	if fr.head <= page {
		t.Fatalf("records did not wrap: head %d", fr.head)
	}
	v := p.Aggregator().Snapshot()
	if len(v) != 1 || v[0].VCPU != 3 {
		t.Fatalf("snapshot %+v", v)
	}
	got := map[string]exits.ReasonStats{}
	for _, r := range v[0].Reasons {
		got[r.Reason] = r
	}
	if d := got["DABT_LOW"]; d.Count != uint64(want) || d.GuestSumNS != uint64(want)*100 || d.HandleCount != uint64(want) || d.HandleSumNS != uint64(want)*50 {
		t.Errorf("DABT_LOW %+v (want %d)", d, want)
	}
	if h := got["HVC64"]; h.Count != 10 || h.GuestMinNS != 1000 || h.GuestMaxNS != 1000 || h.HandleCount != 9 {
		t.Errorf("HVC64 %+v", h)
	}
	if irq := got["IRQ"]; irq.Count != 1 || irq.GuestCount != 0 {
		t.Errorf("IRQ after lost records %+v", irq)
	}
	if v[0].Lost != 5 {
		t.Errorf("lost %d", v[0].Lost)
	}
	if p.Namer().Arch() != "arm64" {
		t.Error("namer")
	}

	// A corrupt record skips the rest of the ring and reports it.
	bad := record(recordSample, sampleBody(1, 4242, now, 1, nil))
	ne.PutUint16(bad[6:], 2)
	fr.write(bad)
	if err := p.Drain(); !errors.Is(err, ErrCorrupt) {
		t.Errorf("corrupt ring: %v", err)
	}
	if fr.meta.Data_tail != fr.head {
		t.Error("corrupt data not skipped")
	}
}

func FuzzWalkRing(f *testing.F) {
	f.Add(record(recordSample, sampleBody(1, 2, 3, 4, []byte{1, 2})), uint16(0))
	f.Add(record(recordLost, lostBody(1, 2, 3, 4)), uint16(60))
	f.Fuzz(func(t *testing.T, b []byte, tail uint16) {
		data := make([]byte, 128)
		copy(data, b)
		var scratch []byte
		head := uint64(tail) + uint64(len(b)%129)
		walkRing(data, uint64(tail), head, &scratch, func(typ uint32, body []byte) {
			switch typ {
			case recordSample:
				decodeSample(body)
			case recordLost:
				decodeLost(body)
			}
		})
	})
}

func TestSessionArgs(t *testing.T) {
	if _, err := NewSession(nil, 0); err == nil {
		t.Error("session without events")
	}
	f, _ := ParseFormat("kvm", []byte(arm64KVMEntryFormat))
	if _, err := NewSession([]*Format{f}, 3); err == nil {
		t.Error("ring of 3 pages accepted")
	}
	noType := &Format{System: "x", Name: "y", ID: 1, Fields: []Field{{Name: "a", Size: 4}}}
	if _, err := NewSession([]*Format{noType}, 1); err == nil {
		t.Error("format without common_type accepted")
	}
	s, err := NewSession([]*Format{f}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Attach(0); err == nil {
		t.Error("attach to thread 0 (the caller) accepted")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Attach(1); err == nil {
		t.Error("attach after close accepted")
	}
	if len(s.Events()) != 1 {
		t.Error("events")
	}
}
