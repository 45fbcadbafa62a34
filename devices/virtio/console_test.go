//go:build linux

package virtio

import (
	"encoding/binary"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// orderLog records which port's Out got which bytes, in order.
type orderLog struct {
	mu  sync.Mutex
	log []string
}

type portOut struct {
	l    *orderLog
	name string
}

func (p portOut) Write(b []byte) (int, error) {
	p.l.mu.Lock()
	defer p.l.mu.Unlock()
	p.l.log = append(p.l.log, p.name+":"+string(b))
	return len(b), nil
}

func ctrlMsg(id uint32, event, value uint16) []byte {
	m := make([]byte, 8)
	binary.LittleEndian.PutUint32(m, id)
	binary.LittleEndian.PutUint16(m[4:], event)
	binary.LittleEndian.PutUint16(m[6:], value)
	return m
}

// TestConsolePorts drives the console as Linux's virtio_console does with
// MULTIPORT: DEVICE_READY gets one DEVICE_ADD per port; PORT_READY gets
// the host side's PORT_OPEN before the PORT_NAME; input reaches the guest
// only once it opened the port, and its end closes the host side; output
// queued on a lower port before a higher one's reaches its Out first.
func TestConsolePorts(t *testing.T) {
	var l orderLog
	con, err := NewConsole("virtio-console0", []ConsolePort{
		{Name: "in", In: strings.NewReader("hello")},
		{Name: "out", Out: portOut{&l, "out"}},
		{Name: "status", Out: portOut{&l, "status"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(con.QueueMax()); got != 8 {
		t.Fatalf("%d queues for 3 ports, want 8 (2 per port and the control pair)", got)
	}
	d := newTestDriver(t, con, 16, allFeatures)
	var cfg [8]byte
	con.ReadConfig(0, cfg[:])
	if n := binary.LittleEndian.Uint32(cfg[4:]); n != 3 {
		t.Fatalf("max_nr_ports %d, want 3", n)
	}
	// Control buffers for the device's messages, then DEVICE_READY.
	heads := map[uint32]uint64{}
	for range 12 {
		head := uint32(d.rings[ctrlRxQueue].freeDsc)
		heads[head] = d.submit(ctrlRxQueue, buf{data: make([]byte, 64), write: true})[0]
	}
	recv := func() (uint32, uint16, uint16, string) {
		t.Helper()
		id, n := d.waitUsed(ctrlRxQueue)
		m := d.ram.at(heads[id], int(n))
		if n < 8 {
			t.Fatalf("control message of %d bytes", n)
		}
		return binary.LittleEndian.Uint32(m), binary.LittleEndian.Uint16(m[4:]), binary.LittleEndian.Uint16(m[6:]), string(m[8:])
	}
	d.submit(ctrlTxQueue, buf{data: ctrlMsg(0xffffffff, ctrlDeviceReady, 1)})
	d.waitUsed(ctrlTxQueue)
	for want := uint32(0); want < 3; want++ {
		if id, ev, _, _ := recv(); id != want || ev != ctrlDeviceAdd {
			t.Fatalf("control message %d: port %d event %d, want DEVICE_ADD of port %d", want, id, ev, want)
		}
	}
	for p := uint32(0); p < 3; p++ {
		d.submit(ctrlTxQueue, buf{data: ctrlMsg(p, ctrlPortReady, 1)})
		d.waitUsed(ctrlTxQueue)
		if id, ev, v, _ := recv(); id != p || ev != ctrlPortOpen || v != 1 {
			t.Fatalf("after PORT_READY %d: port %d event %d value %d, want PORT_OPEN 1 first", p, id, ev, v)
		}
		if id, ev, _, name := recv(); id != p || ev != ctrlPortName || name != []string{"in", "out", "status"}[p] {
			t.Fatalf("after PORT_READY %d: port %d event %d name %q", p, id, ev, name)
		}
	}
	// Input: a receive buffer, then the guest opens the port.
	inAddr := d.submit(rxQueue(0), buf{data: make([]byte, 64), write: true})[0]
	d.submit(ctrlTxQueue, buf{data: ctrlMsg(0, ctrlPortOpen, 1)})
	d.waitUsed(ctrlTxQueue)
	if _, n := d.waitUsed(rxQueue(0)); string(d.ram.at(inAddr, int(n))) != "hello" {
		t.Errorf("the guest received %q, want hello", d.ram.at(inAddr, int(n)))
	}
	if id, ev, v, _ := recv(); id != 0 || ev != ctrlPortOpen || v != 0 {
		t.Errorf("after the input's end: port %d event %d value %d, want PORT_OPEN 0 (host closed)", id, ev, v)
	}
	// Output: the status port's chain is queued last but the device may
	// see it first (the notify of the lower port is still to come);
	// either way the lower port's bytes come out first.
	d.submit(txQueue(1), buf{data: []byte("output")})
	d.submit(txQueue(2), buf{data: []byte("done")})
	d.waitUsed(txQueue(1))
	d.waitUsed(txQueue(2))
	l.mu.Lock()
	got := strings.Join(l.log, ",")
	l.mu.Unlock()
	if got != "out:output,status:done" {
		t.Errorf("outputs in the order %q, want out:output,status:done", got)
	}
}

// TestConsoleRefusesNoMultiport: a driver that does not accept
// MULTIPORT would make port 0 an hvc tty; the device faults instead.
func TestConsoleRefusesNoMultiport(t *testing.T) {
	con, err := NewConsole("c", []ConsolePort{{Name: "a"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := con.Start(&Env{Features: con.Features() &^ consoleFMultiport}); err == nil {
		con.Stop()
		t.Error("Start without MULTIPORT accepted")
	}
}

func TestNewConsoleChecksPorts(t *testing.T) {
	for _, ports := range [][]ConsolePort{nil, {{Name: ""}}, {{Name: "a"}, {Name: "a"}}, make([]ConsolePort, 17)} {
		if _, err := NewConsole("c", ports); err == nil {
			t.Errorf("NewConsole(%d ports %v) accepted", len(ports), ports)
		}
	}
}

// countOut counts what reaches an Out.
type countOut struct {
	mu sync.Mutex
	n  int
}

func (c *countOut) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n += len(b)
	return len(b), nil
}

// TestConsoleHostileDriver: control messages for ports that do not exist,
// a short one, and a megabyte chain on the status port: the device runs
// on (no DEVICE_NEEDS_RESET), each is used, and mvm keeps at most
// lastPortRound bytes of the status port's round.
func TestConsoleHostileDriver(t *testing.T) {
	var status countOut
	con, err := NewConsole("c", []ConsolePort{{Name: "out", Out: &countOut{}}, {Name: "status", Out: &status}})
	if err != nil {
		t.Fatal(err)
	}
	d := newTestDriver(t, con, 16, allFeatures)
	for _, m := range [][]byte{ctrlMsg(1000, ctrlPortOpen, 1), ctrlMsg(99, ctrlPortReady, 1), ctrlMsg(0xffffffff, 0xffff, 7), {1, 2}} {
		d.submit(ctrlTxQueue, buf{data: m})
		d.waitUsed(ctrlTxQueue)
	}
	d.submit(txQueue(1), buf{data: make([]byte, 1<<20)})
	d.waitUsed(txQueue(1))
	if st := d.r32(regStatus); st&statusNeedsReset != 0 {
		t.Errorf("status %#x: the device gave up", st)
	}
	status.mu.Lock()
	defer status.mu.Unlock()
	if status.n == 0 || status.n > lastPortRound {
		t.Errorf("the status port's Out got %d bytes of a 1 MiB chain, want 1..%d", status.n, lastPortRound)
	}
}

// TestConsoleStopDrains: a chain the driver made available without a
// notify (a guest that wrote its status and powered off at once, before
// mvm's worker ran) still reaches its Out when the device stops.
func TestConsoleStopDrains(t *testing.T) {
	var l orderLog
	con, err := NewConsole("c", []ConsolePort{{Name: "out", Out: portOut{&l, "out"}}, {Name: "status", Out: portOut{&l, "status"}}})
	if err != nil {
		t.Fatal(err)
	}
	d := newTestDriver(t, con, 16, allFeatures)
	time.Sleep(50 * time.Millisecond) // the worker's first look at the rings is over
	// submit's chain, without the QueueNotify write.
	qi := txQueue(1)
	r := &d.rings[qi]
	a := d.alloc(8, 8)
	copy(d.ram.at(a, 4), "done")
	desc := d.ram.at(r.desc+16*uint64(r.freeDsc), 16)
	binary.LittleEndian.PutUint64(desc, a)
	binary.LittleEndian.PutUint32(desc[8:], 4)
	binary.LittleEndian.PutUint16(desc[12:], 0)
	binary.LittleEndian.PutUint16(d.ram.at(r.avail+4+2*uint64(r.availIdx%r.size), 2), r.freeDsc)
	r.availIdx++
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&d.ram.at(r.avail, 4)[0])), uint32(r.availIdx)<<16)
	time.Sleep(50 * time.Millisecond) // no kick: the worker does not look
	l.mu.Lock()
	before := len(l.log)
	l.mu.Unlock()
	if before != 0 {
		t.Fatal("the worker took the chain without a kick: the test shows nothing")
	}
	d.tr.Close()
	l.mu.Lock()
	defer l.mu.Unlock()
	if got := strings.Join(l.log, ","); got != "status:done" {
		t.Errorf("after Stop the Outs got %q, want status:done", got)
	}
}
