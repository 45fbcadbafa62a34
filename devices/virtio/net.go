//go:build linux

package virtio

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"

	hvirtio "github.com/c35s/hype/virtio"
	"golang.org/x/sys/unix"
)

// virtio-net (virtio 1.2 section 5.1) without offloads: queue 0 receives,
// queue 1 transmits, the configuration holds the MAC address. Every packet
// carries the 12-byte struct virtio_net_hdr_v1, which a tap opened with
// IFF_VNET_HDR and a header size of 12 reads and writes as is, so frames
// move between the tap and guest memory with one readv or writev.
const (
	netFMAC       = 1 << 5 // VIRTIO_NET_F_MAC
	netHdrSize    = 12     // struct virtio_net_hdr_v1 (VERSION_1 always has num_buffers)
	netQueueSize  = 256
	netRxQ        = 0
	netTxQ        = 1
	netNumBufsOff = 10 // num_buffers in the header
)

// Net is a virtio-net device on a tap interface.
type Net struct {
	name string
	tap  *os.File
	raw  syscall.RawConn
	mac  net.HardwareAddr
	w    workers
}

// DefaultMAC is a locally administered unicast address derived from the tap
// name and the device's index, so a VM keeps its address across runs.
func DefaultMAC(tap string, index int) net.HardwareAddr {
	h := sha256.Sum256([]byte(fmt.Sprintf("mvm/net/%s/%d", tap, index)))
	mac := net.HardwareAddr(append([]byte{0x02}, h[:5]...))
	return mac
}

// OpenTap attaches a virtio-net device to an existing tap interface.
// Errors are one sentence saying what to do.
func OpenTap(name, tap string, mac net.HardwareAddr) (*Net, error) {
	if len(tap) == 0 || len(tap) >= unix.IFNAMSIZ {
		return nil, fmt.Errorf("tap name %q must be 1 to %d characters", tap, unix.IFNAMSIZ-1)
	}
	if _, err := os.Stat("/sys/class/net/" + tap); err != nil {
		return nil, fmt.Errorf("tap %s does not exist: create it first (ip tuntap add dev %s mode tap, or tunctl -t %s) and bring it up", tap, tap, tap)
	}
	if _, err := os.Stat("/sys/class/net/" + tap + "/tun_flags"); err != nil {
		return nil, fmt.Errorf("network interface %s is not a tap device: give a tap (ip tuntap add dev NAME mode tap)", tap)
	}
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/net/tun for tap %s: %w (load the tun module; mvm needs permission for /dev/net/tun)", tap, err)
	}
	ifr, err := unix.NewIfreq(tap)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("tap %s: %w", tap, err)
	}
	ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI | unix.IFF_VNET_HDR)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EPERM) {
			return nil, fmt.Errorf("no permission to attach tap %s: create it owned by this user (ip tuntap add dev %s mode tap user $USER) or run as root", tap, tap)
		}
		return nil, fmt.Errorf("attach tap %s: %w (is it a single-queue tap another process holds?)", tap, err)
	}
	if err := unix.IoctlSetPointerInt(fd, unix.TUNSETVNETHDRSZ, netHdrSize); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("tap %s: set the virtio header size: %w", tap, err)
	}
	// No offloads: the host stack hands the tap whole, checksummed frames.
	if err := unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, 0); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("tap %s: turn offloads off: %w", tap, err)
	}
	f := os.NewFile(uintptr(fd), "tap:"+tap)
	raw, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("tap %s: %w", tap, err)
	}
	return &Net{name: name, tap: f, raw: raw, mac: mac}, nil
}

// MAC is the device's address.
func (n *Net) MAC() net.HardwareAddr { return n.mac }

// Name implements Device.
func (n *Net) Name() string { return n.name }

// ID implements Device.
func (n *Net) ID() uint32 { return uint32(hvirtio.NetworkDeviceID) }

// Features implements Device.
func (n *Net) Features() uint64 { return netFMAC | hvirtio.FIndirectDesc }

// QueueMax implements Device.
func (n *Net) QueueMax() []uint16 { return []uint16{netQueueSize, netQueueSize} }

// ReadConfig implements Device: struct virtio_net_config's mac (at 0).
func (n *Net) ReadConfig(off uint64, data []byte) {
	var cfg [8]byte
	copy(cfg[:], n.mac)
	if off < uint64(len(cfg)) {
		copy(data, cfg[off:])
	}
}

// Start implements Device.
func (n *Net) Start(env *Env) error {
	if env.Queues[netRxQ] == nil || env.Queues[netTxQ] == nil {
		return errors.New("virtio-net needs both its receive and transmit queues")
	}
	n.tap.SetReadDeadline(time.Time{})
	n.w.serve(env, netTxQ, func(q *Queue) (bool, error) {
		return drainChains(q, func(err error) { env.Problem("net transmit", err) }, func(c *Chain) uint32 {
			n.transmit(env, c)
			return 0
		})
	})
	n.w.wg.Add(1)
	go func() {
		defer n.w.wg.Done()
		n.receive(env)
	}()
	return nil
}

// transmit writes one guest frame (header included) to the tap. A tap that
// cannot take it drops it, as a full NIC queue would.
func (n *Net) transmit(env *Env, c *Chain) {
	if c.ReadableLen() < netHdrSize {
		env.Problem("net transmit", errors.New("frame shorter than the virtio-net header"))
		return
	}
	iov := nonEmpty(c.Readable)
	if len(iov) > maxIOV {
		env.Problem("net transmit", fmt.Errorf("frame in %d pieces", len(iov)))
		return
	}
	n.raw.Write(func(fd uintptr) bool {
		_, err := unix.Writev(int(fd), iov)
		if err != nil && err != unix.EAGAIN && err != unix.EINTR {
			env.Problem("net transmit", err)
		}
		return true // never wait: drop instead
	})
}

// receive moves frames from the tap into receive buffers until stopped:
// it waits for a buffer (the receive queue's kick), then for a frame.
func (n *Net) receive(env *Env) {
	q, kick := env.Queues[netRxQ], env.Kicks[netRxQ]
	pendingIRQ := false
	flush := func() {
		if pendingIRQ && q.WantsInterrupt() {
			env.Interrupt()
		}
		pendingIRQ = false
	}
	for !env.stopping.Load() {
		c, err := q.Pop()
		if errors.Is(err, ErrBroken) {
			flush()
			env.Fault(err)
			return
		}
		if c == nil {
			flush()
			if kick.Wait() != nil {
				return
			}
			continue
		}
		if err != nil || c.WritableLen() < netHdrSize || len(c.Readable) > 0 {
			if err == nil {
				err = errors.New("receive buffer not device-writable or shorter than the header")
			}
			env.Problem("net receive", err)
			q.Push(c.Head, 0)
			pendingIRQ = true
			continue
		}
		iov := nonEmpty(c.Writable)
		if len(iov) > maxIOV {
			iov = iov[:maxIOV]
		}
		got := 0
		var rerr error
		first := true
		err = n.raw.Read(func(fd uintptr) bool {
			k, err := unix.Readv(int(fd), iov)
			if err == unix.EAGAIN {
				// Nothing now: let the driver see what it has before
				// waiting for the tap.
				if first {
					first = false
					flush()
				}
				return false
			}
			got, rerr = k, err
			return true
		})
		if err != nil { // interrupted by Stop (read deadline) or tap gone
			return
		}
		if rerr != nil || got < netHdrSize {
			if rerr != nil && rerr != unix.EINTR {
				env.Problem("net receive", rerr)
			}
			q.Push(c.Head, 0)
			pendingIRQ = true
			continue
		}
		// Without VIRTIO_NET_F_MRG_RXBUF a frame takes one buffer
		// (section 5.1.6.4: num_buffers is 1).
		var one [2]byte
		binary.LittleEndian.PutUint16(one[:], 1)
		writeAt(c.Writable, netNumBufsOff, one[:])
		q.Push(c.Head, uint32(got))
		pendingIRQ = true
	}
}

// writeAt copies src into bufs at byte offset off of their concatenation.
func writeAt(bufs [][]byte, off int, src []byte) {
	for _, b := range bufs {
		if off >= len(b) {
			off -= len(b)
			continue
		}
		k := copy(b[off:], src)
		src = src[k:]
		off = 0
		if len(src) == 0 {
			return
		}
	}
}

// Stop implements Device: the receive worker is woken from the tap by a
// read deadline, the transmit worker by its kick.
func (n *Net) Stop() {
	n.tap.SetReadDeadline(time.Unix(1, 0))
	n.w.wait()
}

// Close implements Device.
func (n *Net) Close() error { return n.tap.Close() }
