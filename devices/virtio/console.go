//go:build linux

package virtio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
)

// virtio-console (virtio 1.2 section 5.3) with VIRTIO_CONSOLE_F_MULTIPORT:
// named ports that Linux's virtio_console driver turns into character
// devices (/dev/vportNpM, named in /sys/class/virtio-ports/*/name). They
// are not ttys: bytes pass unchanged in both directions, which is what
// command mode needs for a command's stdin, stdout and stderr.
const (
	consoleDeviceID  = 3
	consoleQueueSize = 128
	// consoleFMultiport is VIRTIO_CONSOLE_F_MULTIPORT (section 5.3.3).
	consoleFMultiport = 1 << 1
	// consoleMaxPorts bounds the ports of one device: each takes two
	// queues besides the control pair.
	consoleMaxPorts = 16
)

// Control messages (section 5.3.6.2, struct virtio_console_control:
// le32 id, le16 event, le16 value), and the events mvm sends or handles.
const (
	ctrlHeaderSize  = 8
	ctrlDeviceReady = 0
	ctrlDeviceAdd   = 1
	ctrlPortReady   = 3
	ctrlPortOpen    = 6
	ctrlPortName    = 7
)

// ConsolePort is one named port of a Console.
type ConsolePort struct {
	// Name is what the guest reads in /sys/class/virtio-ports/*/name.
	Name string
	// In, when set, is read and its bytes given to the guest (the port's
	// receive queue), once the guest has opened the port — Linux drops
	// what arrives on a generic port nobody has open. At In's end (EOF or
	// an error) the host side of the port is closed: the guest's reads
	// return end-of-file once the data before it is read.
	In io.Reader
	// Out, when set, receives what the guest writes to the port; without
	// it the bytes are dropped.
	Out io.Writer
}

// Console is a multiport virtio-console. Whatever the guest queued on the
// other ports before a chain on the last port reaches their Outs before
// that chain reaches the last port's Out: put a status port last and the
// status arrives after the output it ends.
type Console struct {
	name  string
	ports []ConsolePort
	// opened[i] is closed when the guest first opens port i.
	opened   []chan struct{}
	openOnce []sync.Once

	mu      sync.Mutex // guards the control receive queue and pending
	pending [][]byte   // control messages waiting for a driver buffer

	stop chan struct{}
	wg   sync.WaitGroup
	env  *Env
	// outErr[i] is set once port i's Out failed; its later output is
	// dropped.
	outErr []atomic.Bool
}

// NewConsole returns a console with the given ports (1 to 16, names
// non-empty and unique).
func NewConsole(name string, ports []ConsolePort) (*Console, error) {
	if len(ports) == 0 || len(ports) > consoleMaxPorts {
		return nil, fmt.Errorf("virtio-console: %d ports (1 to %d)", len(ports), consoleMaxPorts)
	}
	seen := map[string]bool{}
	for _, p := range ports {
		if p.Name == "" || seen[p.Name] {
			return nil, fmt.Errorf("virtio-console: port name %q is empty or given twice", p.Name)
		}
		seen[p.Name] = true
	}
	c := &Console{name: name, ports: ports, opened: make([]chan struct{}, len(ports)), openOnce: make([]sync.Once, len(ports)), outErr: make([]atomic.Bool, len(ports))}
	for i := range c.opened {
		c.opened[i] = make(chan struct{})
	}
	return c, nil
}

// Name implements Device.
func (c *Console) Name() string { return c.name }

// ID implements Device.
func (c *Console) ID() uint32 { return consoleDeviceID }

// Features implements Device.
func (c *Console) Features() uint64 { return consoleFMultiport }

// QueueMax implements Device: port 0's receive and transmit queues, the
// control pair, then each further port's pair (section 5.3.2).
func (c *Console) QueueMax() []uint16 {
	q := make([]uint16, 2*(len(c.ports)+1))
	for i := range q {
		q[i] = consoleQueueSize
	}
	return q
}

// rxQueue and txQueue are port i's queue indexes.
func rxQueue(i int) int {
	if i == 0 {
		return 0
	}
	return 2*i + 2
}

func txQueue(i int) int { return rxQueue(i) + 1 }

const (
	ctrlRxQueue = 2 // device to driver
	ctrlTxQueue = 3 // driver to device
)

// ReadConfig implements Device: struct virtio_console_config {le16 cols,
// rows; le32 max_nr_ports; le32 emerg_wr} (section 5.3.4).
func (c *Console) ReadConfig(off uint64, data []byte) {
	var cfg [12]byte
	binary.LittleEndian.PutUint32(cfg[4:], uint32(len(c.ports)))
	if off < uint64(len(cfg)) {
		copy(data, cfg[off:])
	}
}

// Start implements Device.
func (c *Console) Start(env *Env) error {
	if env.Features&consoleFMultiport == 0 {
		// Without MULTIPORT the driver makes port 0 an hvc console (a
		// tty) and never sees the names; mvm has no use for that.
		return errors.New("virtio-console: the driver did not accept VIRTIO_CONSOLE_F_MULTIPORT")
	}
	c.env = env
	c.stop = make(chan struct{})
	c.pending = nil

	// One goroutine drains every transmit queue (the control one
	// included), so that it can keep the port order; the kicks only
	// wake it.
	wake := make(chan struct{}, 1)
	nudge := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	txs := []int{ctrlTxQueue}
	for i := range c.ports {
		txs = append(txs, txQueue(i))
	}
	for _, qi := range txs {
		if qi >= len(env.Queues) || env.Queues[qi] == nil {
			continue
		}
		k := env.Kicks[qi]
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			for k.Wait() == nil {
				nudge()
			}
		}()
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for {
			if err := c.drainTx(); err != nil {
				env.Fault(err)
				return
			}
			select {
			case <-wake:
			case <-c.stop:
				return
			}
		}
	}()
	// The control receive queue: pending messages go out when the
	// driver adds buffers.
	if q := env.Queues[ctrlRxQueue]; q != nil {
		k := env.Kicks[ctrlRxQueue]
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			for k.Wait() == nil {
				c.flushControl()
			}
		}()
	}
	for i, p := range c.ports {
		if p.In == nil {
			continue
		}
		if q := env.Queues[rxQueue(i)]; q != nil {
			c.startFeeder(i, q, env.Kicks[rxQueue(i)])
		}
	}
	return nil
}

// drainTx takes what the driver queued on every transmit queue: the
// control queue first (the driver spins until it is used), then the last
// port's chains (copied, at most lastPortRound bytes), then every
// other port's, written straight from guest memory to their Outs, and
// only then the last port's bytes to its Out. A chain on the last port
// was queued after whatever the guest had queued on the others before
// it, and those are taken after it, so they are out first.
func (c *Console) drainTx() error {
	env := c.env
	q := env.Queues[ctrlTxQueue]
	if q != nil {
		var msgs [][]byte
		used, err := drainChains(q, func(err error) { env.Problem("console control", err) }, func(ch *Chain) uint32 {
			msgs = append(msgs, gather(ch.Readable, 4096))
			return 0
		})
		if used && q.WantsInterrupt() {
			env.Interrupt()
		}
		if err != nil {
			return err
		}
		for _, m := range msgs {
			c.handleControl(m)
		}
	}
	last := len(c.ports) - 1
	var lastOut []byte
	if err := c.drainPort(last, func(b []byte) {
		if room := lastPortRound - len(lastOut); room > 0 {
			lastOut = append(lastOut, b[:min(len(b), room)]...)
		}
	}); err != nil {
		return err
	}
	for i := 0; i < last; i++ {
		if err := c.drainPort(i, func(b []byte) { c.write(i, b) }); err != nil {
			return err
		}
	}
	c.write(last, lastOut)
	return nil
}

// lastPortRound bounds what mvm copies from the last port in one round
// (it is a status port: one short line), so a hostile driver cannot make
// it allocate a queue's worth of guest RAM; the rest is dropped.
const lastPortRound = 64 << 10

// drainPort hands each readable buffer of port i's transmit queue to out.
func (c *Console) drainPort(i int, out func([]byte)) error {
	env := c.env
	qi := txQueue(i)
	if qi >= len(env.Queues) || env.Queues[qi] == nil {
		return nil
	}
	q := env.Queues[qi]
	used, err := drainChains(q, func(err error) { env.Problem("console output", err) }, func(ch *Chain) uint32 {
		for _, b := range ch.Readable {
			out(b)
		}
		return 0
	})
	if used && q.WantsInterrupt() {
		env.Interrupt()
	}
	return err
}

// write gives b to port i's Out; after an Out failed (a closed reader of
// mvm's stdout, a pipe into head) output is dropped, the guest runs on.
func (c *Console) write(i int, b []byte) {
	if len(b) == 0 || c.ports[i].Out == nil || c.outErr[i].Load() {
		return
	}
	if _, err := c.ports[i].Out.Write(b); err != nil {
		// A host-side end (the Out's owner handles it, e.g. command
		// mode's SIGPIPE), not the driver's error: not a Problem.
		c.outErr[i].Store(true)
	}
}

// gather copies up to max bytes of bufs.
func gather(bufs [][]byte, max int) []byte {
	var b []byte
	for _, x := range bufs {
		if len(b)+len(x) > max {
			x = x[:max-len(b)]
		}
		b = append(b, x...)
	}
	return b
}

// handleControl answers one control message from the driver.
func (c *Console) handleControl(m []byte) {
	if len(m) < ctrlHeaderSize {
		c.env.Problem("console control", fmt.Errorf("%d-byte control message (want %d)", len(m), ctrlHeaderSize))
		return
	}
	id := binary.LittleEndian.Uint32(m)
	event := binary.LittleEndian.Uint16(m[4:])
	value := binary.LittleEndian.Uint16(m[6:])
	switch event {
	case ctrlDeviceReady:
		if value != 1 {
			return
		}
		for i := range c.ports {
			c.sendControl(uint32(i), ctrlDeviceAdd, 0, nil)
		}
	case ctrlPortReady:
		if int(id) >= len(c.ports) || value != 1 {
			return
		}
		// Host side open before the name: a guest that waits for the
		// name in sysfs finds the port connected, so its first read
		// does not see end-of-file.
		c.sendControl(id, ctrlPortOpen, 1, nil)
		c.sendControl(id, ctrlPortName, 0, []byte(c.ports[id].Name))
	case ctrlPortOpen:
		if int(id) < len(c.ports) && value == 1 {
			c.openOnce[id].Do(func() { close(c.opened[id]) })
		}
	}
}

// sendControl queues a control message for the driver.
func (c *Console) sendControl(id uint32, event, value uint16, extra []byte) {
	m := make([]byte, ctrlHeaderSize+len(extra))
	binary.LittleEndian.PutUint32(m, id)
	binary.LittleEndian.PutUint16(m[4:], event)
	binary.LittleEndian.PutUint16(m[6:], value)
	copy(m[ctrlHeaderSize:], extra)
	c.mu.Lock()
	c.pending = append(c.pending, m)
	c.mu.Unlock()
	c.flushControl()
}

// flushControl puts pending control messages into the driver's buffers,
// one message per buffer (the driver reads one message from each).
func (c *Console) flushControl() {
	env := c.env
	q := env.Queues[ctrlRxQueue]
	if q == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	used := false
	for len(c.pending) > 0 {
		ch, err := q.Pop()
		if errors.Is(err, ErrBroken) {
			env.Fault(err)
			return
		}
		if ch == nil {
			break
		}
		if err != nil {
			env.Problem("console control buffer", err)
			q.Push(ch.Head, 0)
			used = true
			continue
		}
		m := c.pending[0]
		if ch.WritableLen() < len(m) {
			env.Problem("console control buffer", fmt.Errorf("%d-byte buffer for a %d-byte message", ch.WritableLen(), len(m)))
			q.Push(ch.Head, 0)
			used = true
			continue
		}
		q.Push(ch.Head, uint32(scatter(ch.Writable, m)))
		c.pending = c.pending[1:]
		used = true
	}
	if used && q.WantsInterrupt() {
		env.Interrupt()
	}
}

// startFeeder gives port i's In to the guest. A reader goroutine blocks
// in In (it cannot be interrupted, and is not waited for: it touches no
// guest memory); the feeder, which fills the receive queue, is.
func (c *Console) startFeeder(i int, q *Queue, kick *Event) {
	type chunk struct {
		b   []byte
		eof bool
	}
	chunks := make(chan chunk)
	readerStop := c.stop
	go func() {
		select {
		case <-c.opened[i]:
		case <-readerStop:
			return
		}
		for {
			buf := make([]byte, 32<<10)
			n, err := c.ports[i].In.Read(buf)
			if n > 0 {
				select {
				case chunks <- chunk{b: buf[:n]}:
				case <-readerStop:
					return
				}
			}
			if err != nil {
				select {
				case chunks <- chunk{eof: true}:
				case <-readerStop:
				}
				return
			}
		}
	}()
	// Buffers become available through kicks; the feeder waits on them
	// in a goroutine of its own so that it can also wait for input.
	avail := make(chan struct{}, 1)
	c.wg.Add(2)
	go func() {
		defer c.wg.Done()
		for kick.Wait() == nil {
			select {
			case avail <- struct{}{}:
			default:
			}
		}
	}()
	go func() {
		defer c.wg.Done()
		for {
			var ch chunk
			select {
			case ch = <-chunks:
			case <-c.stop:
				return
			}
			if ch.eof {
				c.sendControl(uint32(i), ctrlPortOpen, 0, nil)
				return
			}
			for b := ch.b; len(b) > 0; {
				chain, err := q.Pop()
				if errors.Is(err, ErrBroken) {
					c.env.Fault(err)
					return
				}
				if chain == nil {
					select {
					case <-avail:
					case <-c.stop:
						return
					}
					continue
				}
				n := 0
				if err != nil {
					c.env.Problem("console input buffer", err)
				} else {
					n = scatter(chain.Writable, b)
					b = b[n:]
				}
				q.Push(chain.Head, uint32(n))
				if q.WantsInterrupt() {
					c.env.Interrupt()
				}
			}
		}
	}()
}

// Stop implements Device. What the guest queued for output before it
// stopped (a status written just before its power-off) is drained once
// more, after the workers are gone and while guest RAM is still there.
func (c *Console) Stop() {
	if c.stop != nil {
		close(c.stop)
		c.wg.Wait()
		c.stop = nil
		if err := c.drainTx(); err != nil {
			c.env.Fault(err)
		}
	}
}

// Close implements Device.
func (c *Console) Close() error { return nil }
