package devices

import (
	"sync"
	"time"
)

// Marker is the boot-marker device: a guest writes a one-byte code to its
// base address and mvm records the code with the host's monotonic time, in
// the spirit of Firecracker's boot timer (which uses code 123). See
// docs/boot-phases.md for the codes mvm gives meaning to.
type Marker struct {
	now    func() time.Time
	notify func(code byte, at time.Time)

	mu      sync.Mutex
	marks   []Mark
	dropped uint64
}

// MaxMarks bounds the marks a Marker keeps: a guest that writes the
// marker in a loop must not grow mvm's memory without end. The boot
// phases need only the first writes of each code; later ones are counted
// (Dropped).
const MaxMarks = 1024

// Mark is one boot-marker write.
type Mark struct {
	Code byte
	At   time.Time
}

// Marker codes with a meaning to mvm's boot phases.
const (
	MarkKernelStart    = 0x40 // kernel entry (Cloud Hypervisor's first code)
	MarkUserspace      = 0x41 // userspace reached (Cloud Hypervisor's second code)
	MarkFirecrackerEnd = 123  // Firecracker's "boot done" byte, accepted as userspace
)

// NewMarker returns a marker device; notify (optional) is called for every
// mark, from the writing vCPU's thread.
func NewMarker(notify func(code byte, at time.Time)) *Marker {
	return &Marker{now: time.Now, notify: notify}
}

// Name implements Device.
func (m *Marker) Name() string { return "marker" }

// Read implements Device: the device reads as zero.
func (m *Marker) Read(off uint64, data []byte) {
	for i := range data {
		data[i] = 0
	}
}

// Write implements Device: any write at offset 0 records its low byte.
func (m *Marker) Write(off uint64, data []byte) {
	if off != 0 || len(data) == 0 {
		return
	}
	at := m.now()
	m.mu.Lock()
	if len(m.marks) < MaxMarks {
		m.marks = append(m.marks, Mark{Code: data[0], At: at})
	} else {
		m.dropped++
	}
	m.mu.Unlock()
	if m.notify != nil {
		m.notify(data[0], at)
	}
}

// Dropped returns how many marks were not kept (past MaxMarks).
func (m *Marker) Dropped() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dropped
}

// Marks returns a copy of the first MaxMarks marks so far, in order.
func (m *Marker) Marks() []Mark {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Mark(nil), m.marks...)
}

// Reset forgets all marks (guest reboot).
func (m *Marker) Reset() {
	m.mu.Lock()
	m.marks, m.dropped = nil, 0
	m.mu.Unlock()
}
