//go:build linux

package tracepoint

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// DefaultRingPages is the default size of a thread's ring buffer in pages
// (1 MiB with 4 KiB pages: about 8000 x86 kvm_exit samples between drains).
const DefaultRingPages = 256

// Session samples a set of tracepoints on chosen threads. Each attached
// thread gets one perf event per tracepoint (PERF_TYPE_TRACEPOINT,
// sample_period 1, sample_type SampleType, CLOCK_MONOTONIC timestamps),
// all writing into one ring buffer (PERF_EVENT_IOC_SET_OUTPUT), so a
// thread's records come out in the order it produced them.
type Session struct {
	events    []*Format
	typeField []Field
	dataPages int

	mu     sync.Mutex
	rings  []*ring
	closed bool
	// scratch reassembles records that wrap; used under mu only.
	scratch []byte
}

type ring struct {
	tid  int
	fds  []int // one per event; fds[0] owns the mapping
	mem  []byte
	data []byte
	meta *unix.PerfEventMmapPage
	// hup: the thread exited (poll reported POLLHUP); keep draining, stop
	// polling.
	hup bool
}

// NewSession prepares sampling of events. ringPages is the number of data
// pages per thread, a power of two (0: DefaultRingPages).
func NewSession(events []*Format, ringPages int) (*Session, error) {
	if len(events) == 0 {
		return nil, errors.New("tracepoint: session without events")
	}
	if ringPages == 0 {
		ringPages = DefaultRingPages
	}
	if ringPages < 1 || ringPages&(ringPages-1) != 0 {
		return nil, fmt.Errorf("tracepoint: ring of %d pages is not a power of two", ringPages)
	}
	s := &Session{events: events, dataPages: ringPages}
	for _, ev := range events {
		f, ok := ev.Field("common_type")
		if !ok {
			return nil, fmt.Errorf("tracepoint: %s has no common_type field", ev)
		}
		s.typeField = append(s.typeField, f)
	}
	return s, nil
}

// Events are the session's tracepoints.
func (s *Session) Events() []*Format { return s.events }

// Attach starts sampling thread tid (a thread id, as from gettid).
func (s *Session) Attach(tid int) error { return s.open(tid, -1, false) }

// AttachInherited starts sampling process pid on CPU cpu together with
// every thread and child it creates from then on (perf_event_attr.inherit),
// into one ring for that CPU: the kernel refuses to mmap an inherited event
// that follows a task on every CPU (perf_mmap: cpu == -1 with inherit), so
// a whole process is followed as perf record follows a command, with one
// event per CPU. Records of one thread can then sit in several rings; the
// Aggregator orders each batch by time. Call it for every online CPU
// before pid starts threads.
func (s *Session) AttachInherited(pid, cpu int) error {
	if cpu < 0 {
		return fmt.Errorf("tracepoint: inherited events need a CPU, not %d", cpu)
	}
	return s.open(pid, cpu, true)
}

func (s *Session) open(tid, cpu int, inherit bool) (err error) {
	if tid <= 0 {
		// perf_event_open takes pid 0 as "the calling thread": never
		// let a missing TID silently profile the wrong thread.
		return fmt.Errorf("tracepoint: attach to invalid thread id %d", tid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("tracepoint: attach to a closed session")
	}
	r := &ring{tid: tid}
	defer func() {
		if err != nil {
			r.close()
		}
	}()
	page := os.Getpagesize()
	dataBytes := s.dataPages * page
	for i, ev := range s.events {
		attr := unix.PerfEventAttr{
			Type:        unix.PERF_TYPE_TRACEPOINT,
			Config:      ev.ID,
			Sample:      1, // sample_period: every event
			Sample_type: SampleType,
			// use_clockid: timestamps on CLOCK_MONOTONIC, comparable
			// with the VMM's own clock. sample_id_all: lost records
			// carry tid and time. watermark: wake poll() when a quarter
			// of the ring is filled rather than per event.
			Bits:    unix.PerfBitUseClockID | unix.PerfBitSampleIDAll | unix.PerfBitWatermark,
			Clockid: unix.CLOCK_MONOTONIC,
			Wakeup:  uint32(dataBytes / 4),
		}
		if inherit {
			attr.Bits |= unix.PerfBitInherit
		}
		attr.Size = uint32(unsafe.Sizeof(attr))
		fd, err := unix.PerfEventOpen(&attr, tid, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
		if err != nil {
			return fmt.Errorf("perf_event_open %s for thread %d: %w", ev, tid, err)
		}
		r.fds = append(r.fds, fd)
		if i == 0 {
			mem, err := unix.Mmap(fd, 0, (1+s.dataPages)*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
			if err != nil {
				return fmt.Errorf("mmap %d pages of perf ring for thread %d: %w", 1+s.dataPages, tid, err)
			}
			r.mem = mem
			r.meta = (*unix.PerfEventMmapPage)(unsafe.Pointer(&mem[0]))
			off, size := int(r.meta.Data_offset), int(r.meta.Data_size)
			if off == 0 || size == 0 { // kernels before 4.1 leave them 0
				off, size = page, dataBytes
			}
			if off+size > len(mem) {
				return fmt.Errorf("perf ring of thread %d: data area %d+%d past the %d byte mapping", tid, off, size, len(mem))
			}
			r.data = mem[off : off+size]
			continue
		}
		if err := unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_SET_OUTPUT, r.fds[0]); err != nil {
			return fmt.Errorf("PERF_EVENT_IOC_SET_OUTPUT %s for thread %d: %w", ev, tid, err)
		}
	}
	s.rings = append(s.rings, r)
	return nil
}

// Drain reads every record available in every ring and calls fn for each
// sample and lost record, in ring order. It does not block.
func (s *Session) Drain(fn func(ev *Format, rec Record)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, r := range s.rings {
		if err := s.drainRing(r, fn); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (s *Session) drainRing(r *ring, fn func(*Format, Record)) error {
	// Data_head is written by the kernel; the atomic load orders the
	// reads of the records after it (the kernel's smp_store_release
	// pairs with it), and the atomic store of Data_tail tells the kernel
	// the space is free only after we are done reading.
	head := atomic.LoadUint64(&r.meta.Data_head)
	tail := atomic.LoadUint64(&r.meta.Data_tail)
	var decodeErr error
	newTail, err := walkRing(r.data, tail, head, &s.scratch, func(typ uint32, body []byte) {
		switch typ {
		case recordSample:
			rec, err := decodeSample(body)
			if err != nil {
				decodeErr = err
				return
			}
			if ev := s.eventOf(rec.Raw); ev != nil {
				fn(ev, rec)
			}
		case recordLost:
			rec, err := decodeLost(body)
			if err != nil {
				decodeErr = err
				return
			}
			if rec.TID == 0 {
				rec.TID = uint32(r.tid)
			}
			fn(nil, rec)
		}
	})
	if err != nil {
		newTail = head // skip what cannot be parsed
	}
	atomic.StoreUint64(&r.meta.Data_tail, newTail)
	if err == nil {
		err = decodeErr
	}
	if err != nil {
		return fmt.Errorf("drain perf ring of thread %d: %w", r.tid, err)
	}
	return nil
}

// eventOf finds the event a raw record belongs to by its common_type.
func (s *Session) eventOf(raw []byte) *Format {
	for i, ev := range s.events {
		if t, ok := s.typeField[i].Uint(raw); ok && t == ev.ID {
			return ev
		}
	}
	return nil
}

// Poll waits up to timeout for a ring to fill past its watermark or for an
// attached thread to exit. Rings of exited threads are not polled again
// (their records stay readable by Drain).
func (s *Session) Poll(timeout time.Duration) error {
	s.mu.Lock()
	var pfds []unix.PollFd
	var rs []*ring
	for _, r := range s.rings {
		if !r.hup {
			pfds = append(pfds, unix.PollFd{Fd: int32(r.fds[0]), Events: unix.POLLIN})
			rs = append(rs, r)
		}
	}
	s.mu.Unlock()
	if len(pfds) == 0 {
		time.Sleep(timeout)
		return nil
	}
	_, err := unix.Poll(pfds, int(timeout/time.Millisecond))
	if err != nil && !errors.Is(err, unix.EINTR) {
		return fmt.Errorf("poll perf rings: %w", err)
	}
	s.mu.Lock()
	for i, p := range pfds {
		if p.Revents&(unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0 {
			rs[i].hup = true
		}
	}
	s.mu.Unlock()
	return nil
}

// Counts returns, per event, how many times it fired on the attached
// threads: the events' own counters (read(2)), which include samples the
// ring dropped.
func (s *Session) Counts() ([]uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	counts := make([]uint64, len(s.events))
	var buf [8]byte
	for _, r := range s.rings {
		for i, fd := range r.fds {
			n, err := unix.Read(fd, buf[:])
			if err != nil {
				return nil, fmt.Errorf("read %s counter of thread %d: %w", s.events[i], r.tid, err)
			}
			if n != len(buf) {
				return nil, fmt.Errorf("read %s counter of thread %d: %d bytes", s.events[i], r.tid, n)
			}
			counts[i] += binary.NativeEndian.Uint64(buf[:])
		}
	}
	return counts, nil
}

// Close stops sampling and releases every ring.
func (s *Session) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	var errs []error
	for _, r := range s.rings {
		errs = append(errs, r.close())
	}
	s.rings = nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close tracepoint session: %w", err)
	}
	return nil
}

func (r *ring) close() error {
	var errs []error
	if r.mem != nil {
		errs = append(errs, unix.Munmap(r.mem))
		r.mem, r.data, r.meta = nil, nil, nil
	}
	for _, fd := range r.fds {
		errs = append(errs, unix.Close(fd))
	}
	r.fds = nil
	return errors.Join(errs...)
}
