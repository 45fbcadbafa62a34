//go:build linux

package virtio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/c35s/hype/virtio/virtq"
)

// Memory is guest RAM as a device reaches it.
type Memory interface {
	// Slice returns guest-physical [addr, addr+size) as host memory, or
	// false when any byte of it is not RAM (or addr+size overflows).
	Slice(addr, size uint64) ([]byte, bool)
}

// Split virtqueue layout (virtio 1.2 section 2.7): a descriptor table of
// 16-byte entries, the driver ("available") ring {flags, idx, ring[size],
// used_event} and the device ("used") ring {flags, idx, ring[size] of
// {id, len}, avail_event}.
const (
	descSize     = 16
	usedElemSize = 8
	descAlign    = 16
	availAlign   = 2
	usedAlign    = 4
	maxQueueSize = 1 << 15 // section 2.7: Queue Size is at most 32768
	maxIndirect  = 1024    // descriptors in one indirect table
	availFNoIntr = 1       // VIRTQ_AVAIL_F_NO_INTERRUPT
)

// The descriptor flag bits are the same in split and packed rings; hype's
// virtq package names them.
const (
	descFNext     = virtq.DescFNext
	descFWrite    = virtq.DescFWrite
	descFIndirect = virtq.DescFIndirect
)

// Errors a driver can cause. ErrBroken means the queue can no longer be
// trusted (the device needs a reset); the others fail one request.
var (
	ErrBroken    = errors.New("virtqueue broken")
	errBadChain  = errors.New("malformed descriptor chain")
	errChainLoop = errors.New("descriptor chain longer than the queue (a loop?)")
)

// QueueConfig is what the driver programmed for one queue.
type QueueConfig struct {
	Size                          uint16
	DescAddr, AvailAddr, UsedAddr uint64
	// EventIdx: VIRTIO_F_EVENT_IDX was negotiated, so the driver's
	// used_event and the device's avail_event suppress interrupts and
	// notifications (virtio 1.2 section 2.7.7, 2.7.10).
	EventIdx bool
}

// Queue is one split virtqueue. Only one goroutine (the queue's worker) may
// call its methods at a time.
type Queue struct {
	mem      Memory
	size     uint16
	indirect bool // VIRTIO_F_INDIRECT_DESC negotiated
	eventIdx bool // VIRTIO_F_EVENT_IDX negotiated
	// eventWords: avail and used reach 2 bytes past the rings, so the
	// event fields' 32-bit words are inside them.
	eventWords bool
	desc       []byte
	// avail and used start at 4-byte aligned guest addresses at or below
	// the rings, so that the 16-bit fields can be read and written with
	// 32-bit atomics; availOff is where the ring itself starts.
	avail    []byte
	availOff int
	used     []byte

	lastAvail uint16 // next avail ring entry to take
	usedIdx   uint16 // next used ring entry to fill
	// signalled is usedIdx when WantsInterrupt last ran: with EVENT_IDX
	// the driver wants an interrupt once used.idx passes its used_event,
	// judged over what was pushed since then.
	signalled uint16
	// fence is only the target of a read-modify-write whose full ordering
	// the EVENT_IDX checks need (see full).
	fence atomic.Uint32
	// scratch is the chain popNext fills, its slices reused.
	scratch Chain
}

// NewQueue checks a driver's queue configuration against the layout rules
// and guest RAM and returns the queue.
func NewQueue(mem Memory, c QueueConfig, indirect bool) (*Queue, error) {
	n := uint64(c.Size)
	if n == 0 || n > maxQueueSize || n&(n-1) != 0 {
		return nil, fmt.Errorf("queue size %d is not a power of 2 in 1..%d", n, maxQueueSize)
	}
	if c.DescAddr%descAlign != 0 || c.AvailAddr%availAlign != 0 || c.UsedAddr%usedAlign != 0 {
		return nil, fmt.Errorf("queue rings at %#x/%#x/%#x are misaligned (need 16/2/4)", c.DescAddr, c.AvailAddr, c.UsedAddr)
	}
	q := &Queue{mem: mem, size: c.Size, indirect: indirect, eventIdx: c.EventIdx}
	var ok bool
	if q.desc, ok = mem.Slice(c.DescAddr, descSize*n); !ok {
		return nil, fmt.Errorf("descriptor table at %#x+%#x is not in RAM", c.DescAddr, descSize*n)
	}
	q.availOff = int(c.AvailAddr & 3)
	if q.avail, ok = mem.Slice(c.AvailAddr&^3, uint64(q.availOff)+6+2*n); !ok {
		return nil, fmt.Errorf("driver ring at %#x is not in RAM", c.AvailAddr)
	}
	if q.used, ok = mem.Slice(c.UsedAddr, 6+usedElemSize*n); !ok {
		return nil, fmt.Errorf("device ring at %#x is not in RAM", c.UsedAddr)
	}
	if c.EventIdx {
		// used_event and avail_event are 16-bit fields; they are read and
		// written through the aligned 32-bit word holding them, which
		// may reach 2 bytes past the ring (never written: see
		// setAvailEvent). Where the ring ends RAM, plain accesses.
		if a, ok := mem.Slice(c.AvailAddr&^3, uint64(q.availOff)+8+2*n); ok {
			q.avail, q.eventWords = a, true
		}
		if u, ok := mem.Slice(c.UsedAddr, 8+usedElemSize*n); ok && q.eventWords {
			q.used = u
		} else {
			q.eventWords = false
		}
	}
	return q, nil
}

// Size is the number of descriptors.
func (q *Queue) Size() uint16 { return q.size }

// load16 reads the little-endian 16-bit field at off of b (4-byte aligned
// host memory) with a 32-bit load-acquire of the word holding it: on arm64
// that is LDAR, which orders every later read of the ring after it — the
// read barrier virtio 1.2 section 2.7.13 asks the device for.
func load16(b []byte, off int) uint16 {
	w := atomic.LoadUint32((*uint32)(unsafe.Pointer(&b[off&^3])))
	return uint16(w >> (8 * (off & 3)))
}

// Chain is one descriptor chain taken from the driver ring: the buffers the
// device may read, then those it may write, as host memory aliasing guest RAM.
type Chain struct {
	Head     uint16
	Readable [][]byte
	Writable [][]byte
}

// ReadableLen and WritableLen are the total bytes of each side.
func (c *Chain) ReadableLen() int { return totalLen(c.Readable) }
func (c *Chain) WritableLen() int { return totalLen(c.Writable) }

func totalLen(bufs [][]byte) int {
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	return n
}

// Pending reports whether the driver has made buffers available that Pop
// has not taken.
func (q *Queue) Pending() bool {
	return load16(q.avail, q.availOff+2) != q.lastAvail
}

// Pop takes the next available chain. It returns (nil, nil) when there is
// none. A chain it cannot parse comes back with an error and its Head set,
// so the caller can return it (Push with 0 bytes) and go on; ErrBroken means
// the driver ring itself is inconsistent and the queue must not be used.
func (q *Queue) Pop() (*Chain, error) {
	return q.pop(&Chain{})
}

// popNext is Pop into the queue's own chain, whose buffer lists are
// reused: the chain is valid until the next popNext, for a caller that
// is done with each chain before it takes the next (drainChains). A
// 254-buffer chain otherwise grew two fresh lists each time.
func (q *Queue) popNext() (*Chain, error) {
	c := &q.scratch
	c.Readable, c.Writable = c.Readable[:0], c.Writable[:0]
	return q.pop(c)
}

func (q *Queue) pop(c *Chain) (*Chain, error) {
	idx := load16(q.avail, q.availOff+2)
	if idx == q.lastAvail {
		return nil, nil
	}
	if uint16(idx-q.lastAvail) > q.size {
		return nil, fmt.Errorf("%w: driver ring index jumped from %d to %d with %d descriptors", ErrBroken, q.lastAvail, idx, q.size)
	}
	slot := q.availOff + 4 + 2*int(q.lastAvail%q.size)
	head := binary.LittleEndian.Uint16(q.avail[slot:])
	q.lastAvail++
	c.Head = head
	if head >= q.size {
		return c, fmt.Errorf("%w: head %d is outside the %d-entry table", errBadChain, head, q.size)
	}
	return c, q.walk(c, q.desc, head, int(q.size), true)
}

// walk follows a chain through table (the queue's table, or an indirect
// one) starting at i, appending its buffers to c. At most max descriptors
// are visited, which ends any loop.
func (q *Queue) walk(c *Chain, table []byte, i uint16, max int, top bool) error {
	n := uint16(len(table) / descSize)
	for visited := 0; ; visited++ {
		if visited >= max {
			return errChainLoop
		}
		d := table[int(i)*descSize:]
		addr := binary.LittleEndian.Uint64(d)
		length := binary.LittleEndian.Uint32(d[8:])
		flags := binary.LittleEndian.Uint16(d[12:])
		next := binary.LittleEndian.Uint16(d[14:])
		if flags&descFIndirect != 0 {
			// Section 2.7.5.3.1: only in the queue's own table, never
			// with NEXT, a whole number of descriptors.
			if !q.indirect || !top || flags&descFNext != 0 || length == 0 || length%descSize != 0 || length/descSize > maxIndirect {
				return fmt.Errorf("%w: bad indirect descriptor (len %d, flags %#x)", errBadChain, length, flags)
			}
			sub, ok := q.mem.Slice(addr, uint64(length))
			if !ok {
				return fmt.Errorf("%w: indirect table at %#x+%#x is not in RAM", errBadChain, addr, length)
			}
			return q.walk(c, sub, 0, int(length/descSize), false)
		}
		buf, ok := q.mem.Slice(addr, uint64(length))
		if !ok {
			return fmt.Errorf("%w: buffer at %#x+%#x is not in RAM", errBadChain, addr, length)
		}
		if flags&descFWrite != 0 {
			c.Writable = append(c.Writable, buf)
		} else {
			// Section 2.7.4.2: readable buffers come before writable ones.
			if len(c.Writable) > 0 {
				return fmt.Errorf("%w: a device-readable buffer follows a writable one", errBadChain)
			}
			c.Readable = append(c.Readable, buf)
		}
		if flags&descFNext == 0 {
			return nil
		}
		if next >= n {
			return fmt.Errorf("%w: next %d is outside the %d-entry table", errBadChain, next, n)
		}
		i = next
	}
}

// Push returns chain head to the driver with written bytes written into
// its writable buffers. The index is published with a store-release after
// the element, so the driver never sees the index before the element.
func (q *Queue) Push(head uint16, written uint32) {
	e := q.used[4+usedElemSize*int(q.usedIdx%q.size):]
	binary.LittleEndian.PutUint32(e, uint32(head))
	binary.LittleEndian.PutUint32(e[4:], written)
	q.usedIdx++
	// used.flags and used.idx share the first word; flags stay 0 (the
	// device always wants notifications).
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&q.used[0])), uint32(q.usedIdx)<<16)
}

// WantsInterrupt reports whether the driver wants an interrupt for what
// Push returned since the last call. Without EVENT_IDX: unless it has set
// VIRTQ_AVAIL_F_NO_INTERRUPT; the load follows Push's store-release in
// order (LDAR after STLR), so a driver that re-enables interrupts and then
// checks used.idx cannot miss both. With EVENT_IDX: when used.idx moved
// past the driver's used_event (section 2.7.10: the driver wants an
// interrupt once the entry at used_event is used), the same test as
// Linux's vring_need_event.
func (q *Queue) WantsInterrupt() bool {
	old := q.signalled
	q.signalled = q.usedIdx
	if !q.eventIdx {
		return load16(q.avail, q.availOff)&availFNoIntr == 0
	}
	// used.idx was stored (Push) before used_event is read: a driver that
	// writes used_event and then reads used.idx sees one or the other.
	q.full()
	return needEvent(q.usedEvent(), q.usedIdx, old)
}

// usedEvent is the driver's used_event (after avail.ring).
func (q *Queue) usedEvent() uint16 {
	off := q.availOff + 4 + 2*int(q.size)
	if q.eventWords {
		return load16(q.avail, off)
	}
	return binary.LittleEndian.Uint16(q.avail[off:])
}

// setAvailEvent writes the device's avail_event (after used.ring). Its
// 32-bit word is 4-aligned and its upper half is not the device's (2 bytes
// past the ring): a compare-and-swap changes only the lower half.
func (q *Queue) setAvailEvent(v uint16) {
	off := 4 + usedElemSize*int(q.size)
	if !q.eventWords {
		binary.LittleEndian.PutUint16(q.used[off:], v)
		return
	}
	w := (*uint32)(unsafe.Pointer(&q.used[off]))
	for {
		old := atomic.LoadUint32(w)
		if atomic.CompareAndSwapUint32(w, old, old&^0xffff|uint32(v)) {
			return
		}
	}
}

// needEvent is section 2.7.10's condition: whether an index moving from old
// to new passed event (event in [old, new), modulo 2^16).
func needEvent(event, new, old uint16) bool {
	return new-event-1 < new-old
}

// ArmNotify, with EVENT_IDX, asks the driver to notify when it makes the
// next buffer available (avail_event = the next entry to take) and then
// reports whether buffers arrived meanwhile, which the caller must take
// before it waits for a notification. Without EVENT_IDX the driver always
// notifies and it reports false.
func (q *Queue) ArmNotify() bool {
	if !q.eventIdx {
		return false
	}
	q.setAvailEvent(q.lastAvail)
	// avail_event is stored before avail.idx is read again: a driver
	// that writes avail.idx and then reads avail_event sees one or the
	// other, so no buffer is left without a notification.
	q.full()
	return q.Pending()
}

// full orders every memory access before it before every access after it:
// a read-modify-write with acquire and release semantics (on arm64 an
// LDADDAL, or an LDAXR/STLXR loop), what a store followed by a load of
// another location needs.
func (q *Queue) full() { q.fence.Add(1) }
