package tracepoint

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// perf ABI values (include/uapi/linux/perf_event.h).
const (
	// sample_type bits the events are opened with.
	sampleTID  = 1 << 1
	sampleTime = 1 << 2
	sampleCPU  = 1 << 7
	sampleRaw  = 1 << 10
	// SampleType is what every sample carries, in this order:
	// { u32 pid, tid; } { u64 time; } { u32 cpu, res; } { u32 size; char data[size]; }.
	SampleType = sampleTID | sampleTime | sampleCPU | sampleRaw

	// enum perf_event_type.
	recordLost   = 2
	recordSample = 9

	headerSize = 8 // struct perf_event_header { u32 type; u16 misc; u16 size; }
)

// RecordKind says what a Record is.
type RecordKind int

// Record kinds.
const (
	// RecordSample is a PERF_RECORD_SAMPLE of a tracepoint.
	RecordSample RecordKind = iota
	// RecordLost is a PERF_RECORD_LOST: the ring was full and Lost
	// records were dropped.
	RecordLost
)

// Record is one decoded ring buffer record.
type Record struct {
	Kind RecordKind
	// PID, TID, Time (CLOCK_MONOTONIC ns) and CPU come from the sample,
	// or for a lost record from its sample_id trailer (sample_id_all).
	PID, TID uint32
	Time     uint64
	CPU      uint32
	// Raw is the tracepoint's raw record (starting with common_type).
	// It aliases a buffer that is reused: copy what must outlive the
	// callback.
	Raw []byte
	// Lost is the number of records dropped (RecordLost).
	Lost uint64
}

// ErrCorrupt reports a ring buffer record that cannot be parsed; the rest of
// the buffer is skipped.
var ErrCorrupt = errors.New("corrupt perf ring buffer record")

// walkRing visits the records between tail and head of a ring's data area
// (whose length is a power of two; the positions are free-running byte
// counters as in struct perf_event_mmap_page). A record that wraps around
// the end of the area is reassembled in *scratch. fn gets the record type
// and body (after the header). It returns the new tail: head, or where a
// corrupt record was found (with ErrCorrupt; the caller then skips to head).
func walkRing(data []byte, tail, head uint64, scratch *[]byte, fn func(typ uint32, body []byte)) (uint64, error) {
	size := uint64(len(data))
	if size == 0 || size&(size-1) != 0 {
		return tail, fmt.Errorf("%w: data area of %d bytes is not a power of two", ErrCorrupt, size)
	}
	if head-tail > size {
		return tail, fmt.Errorf("%w: head %d is %d bytes past tail %d in a %d byte ring", ErrCorrupt, head, head-tail, tail, size)
	}
	ne := binary.NativeEndian
	for tail < head {
		if head-tail < headerSize {
			return tail, fmt.Errorf("%w: %d stray bytes at the end", ErrCorrupt, head-tail)
		}
		rec := ringSlice(data, tail, headerSize, scratch)
		typ := ne.Uint32(rec[0:])
		n := uint64(ne.Uint16(rec[6:]))
		if n < headerSize || n > head-tail {
			return tail, fmt.Errorf("%w: record of %d bytes with %d available", ErrCorrupt, n, head-tail)
		}
		rec = ringSlice(data, tail, n, scratch)
		fn(typ, rec[headerSize:])
		tail += n
	}
	return tail, nil
}

// ringSlice returns n bytes at position pos of the ring, copying into
// scratch when they wrap around the end.
func ringSlice(data []byte, pos, n uint64, scratch *[]byte) []byte {
	size := uint64(len(data))
	off := pos & (size - 1)
	if off+n <= size {
		return data[off : off+n]
	}
	if uint64(cap(*scratch)) < n {
		*scratch = make([]byte, n)
	}
	b := (*scratch)[:n]
	k := copy(b, data[off:])
	copy(b[k:], data[:n-uint64(k)])
	return b
}

// decodeSample parses a PERF_RECORD_SAMPLE body laid out by SampleType.
func decodeSample(body []byte) (Record, error) {
	ne := binary.NativeEndian
	if len(body) < 4+4+8+4+4+4 {
		return Record{}, fmt.Errorf("%w: sample of %d bytes", ErrCorrupt, len(body))
	}
	r := Record{
		Kind: RecordSample,
		PID:  ne.Uint32(body[0:]),
		TID:  ne.Uint32(body[4:]),
		Time: ne.Uint64(body[8:]),
		CPU:  ne.Uint32(body[16:]),
	}
	n := uint64(ne.Uint32(body[24:]))
	if n > uint64(len(body)-28) {
		return Record{}, fmt.Errorf("%w: raw size %d in a %d byte sample", ErrCorrupt, n, len(body))
	}
	r.Raw = body[28 : 28+n]
	return r, nil
}

// decodeLost parses a PERF_RECORD_LOST body: { u64 id; u64 lost; } followed
// by the sample_id trailer, which for SampleType is { u32 pid, tid; }
// { u64 time; } { u32 cpu, res; }.
func decodeLost(body []byte) (Record, error) {
	ne := binary.NativeEndian
	if len(body) < 16 {
		return Record{}, fmt.Errorf("%w: lost record of %d bytes", ErrCorrupt, len(body))
	}
	r := Record{Kind: RecordLost, Lost: ne.Uint64(body[8:])}
	if len(body) >= 16+24 {
		t := body[16:]
		r.PID, r.TID = ne.Uint32(t[0:]), ne.Uint32(t[4:])
		r.Time = ne.Uint64(t[8:])
		r.CPU = ne.Uint32(t[16:])
	}
	return r, nil
}
