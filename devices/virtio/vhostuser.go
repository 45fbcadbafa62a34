//go:build linux

package virtio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// The frontend side of vhost-user (QEMU docs/interop/vhost-user.rst):
// requests over a Unix stream socket, each a 12-byte header {u32 request;
// u32 flags; u32 size} and size bytes of payload, file descriptors in
// SCM_RIGHTS ancillary data.
const (
	vuGetFeatures         = 1
	vuSetFeatures         = 2
	vuSetOwner            = 3
	vuSetMemTable         = 5
	vuSetVringNum         = 8
	vuSetVringAddr        = 9
	vuSetVringBase        = 10
	vuGetVringBase        = 11
	vuSetVringKick        = 12
	vuSetVringCall        = 13
	vuGetProtocolFeatures = 15
	vuSetProtocolFeatures = 16
	vuSetVringEnable      = 18

	vuVersion   = 0x1 // flags bits 0-1: protocol version 1
	vuReply     = 0x4 // flags bit 2: a reply
	vuNeedReply = 0x8 // flags bit 3: ask for a REPLY_ACK

	vuHeaderSize = 12
	// vuMaxPayload bounds a reply's size field: no reply mvm asks for is
	// longer than a vring address (40 bytes), and a backend's garbage
	// must not make mvm allocate gigabytes.
	vuMaxPayload = 4096
	// vuMaxRegions is the number of memory regions SET_MEM_TABLE carries
	// (VHOST_MEMORY_BASELINE_NREGIONS in the specification).
	vuMaxRegions = 8

	// VHOST_USER_F_PROTOCOL_FEATURES: the backend has the
	// GET/SET_PROTOCOL_FEATURES requests; once it is negotiated, rings
	// start disabled until SET_VRING_ENABLE.
	vuFProtocolFeatures = 1 << 30
	// VHOST_USER_PROTOCOL_F_REPLY_ACK (bit 3): need_reply is honoured.
	vuProtoReplyAck = 1 << 3
)

// vuTimeout bounds one request's round trip; virtiofsd answers in
// microseconds, but it sets up its sandbox before its first answer and the
// lab's emulated CPUs are slow.
const vuTimeout = 30 * time.Second

// VhostUser is a connection to a vhost-user backend. Its methods are not
// safe for concurrent use (the transport serialises them).
type VhostUser struct {
	conn     *net.UnixConn
	replyAck bool
}

// NewVhostUser takes over conn, asks the backend for its features and
// negotiates REPLY_ACK when offered, then claims ownership (SET_OWNER).
// It returns the backend's virtio feature bits.
func NewVhostUser(conn *net.UnixConn) (*VhostUser, uint64, error) {
	v := &VhostUser{conn: conn}
	features, err := v.getU64(vuGetFeatures)
	if err != nil {
		return nil, 0, fmt.Errorf("GET_FEATURES: %w", err)
	}
	if features&vuFProtocolFeatures != 0 {
		proto, err := v.getU64(vuGetProtocolFeatures)
		if err != nil {
			return nil, 0, fmt.Errorf("GET_PROTOCOL_FEATURES: %w", err)
		}
		want := proto & vuProtoReplyAck
		if err := v.send(vuSetProtocolFeatures, u64(want), nil, false); err != nil {
			return nil, 0, fmt.Errorf("SET_PROTOCOL_FEATURES: %w", err)
		}
		v.replyAck = want != 0
	}
	if err := v.send(vuSetOwner, nil, nil, false); err != nil {
		return nil, 0, fmt.Errorf("SET_OWNER: %w", err)
	}
	return v, features, nil
}

func u64(x uint64) []byte { return binary.LittleEndian.AppendUint64(nil, x) }

// vringState is the {u32 index; u32 num} payload.
func vringState(index, num uint32) []byte {
	b := binary.LittleEndian.AppendUint32(nil, index)
	return binary.LittleEndian.AppendUint32(b, num)
}

// encode builds a request's header and payload.
func vuEncode(req, flags uint32, payload []byte) []byte {
	b := make([]byte, vuHeaderSize, vuHeaderSize+len(payload))
	binary.LittleEndian.PutUint32(b[0:], req)
	binary.LittleEndian.PutUint32(b[4:], flags)
	binary.LittleEndian.PutUint32(b[8:], uint32(len(payload)))
	return append(b, payload...)
}

// send sends a request with fds; with REPLY_ACK negotiated and ack set it
// asks for and checks the backend's acknowledgement (a u64, 0 = success).
func (v *VhostUser) send(req uint32, payload []byte, fds []int, ack bool) error {
	flags := uint32(vuVersion)
	ack = ack && v.replyAck
	if ack {
		flags |= vuNeedReply
	}
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	v.conn.SetDeadline(time.Now().Add(vuTimeout))
	defer v.conn.SetDeadline(time.Time{})
	if _, _, err := v.conn.WriteMsgUnix(vuEncode(req, flags, payload), oob, nil); err != nil {
		return err
	}
	if !ack {
		return nil
	}
	body, err := v.reply(req)
	if err != nil {
		return err
	}
	if len(body) != 8 {
		return fmt.Errorf("acknowledgement of %d bytes, want 8", len(body))
	}
	if st := binary.LittleEndian.Uint64(body); st != 0 {
		return fmt.Errorf("backend refused the request (status %d)", st)
	}
	return nil
}

// call sends a request that has a reply and returns the reply's payload.
func (v *VhostUser) call(req uint32, payload []byte) ([]byte, error) {
	v.conn.SetDeadline(time.Now().Add(vuTimeout))
	defer v.conn.SetDeadline(time.Time{})
	if _, err := v.conn.Write(vuEncode(req, vuVersion, payload)); err != nil {
		return nil, err
	}
	return v.reply(req)
}

// reply reads one reply to req.
func (v *VhostUser) reply(req uint32) ([]byte, error) {
	var h [vuHeaderSize]byte
	if _, err := io.ReadFull(v.conn, h[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("the backend closed the connection")
		}
		return nil, err
	}
	return parseReply(h[:], req, func(n int) ([]byte, error) {
		b := make([]byte, n)
		_, err := io.ReadFull(v.conn, b)
		return b, err
	})
}

// parseReply checks a reply header against the request and reads its
// payload through body.
func parseReply(h []byte, req uint32, body func(int) ([]byte, error)) ([]byte, error) {
	got, flags, size := binary.LittleEndian.Uint32(h[0:]), binary.LittleEndian.Uint32(h[4:]), binary.LittleEndian.Uint32(h[8:])
	switch {
	case got != req:
		return nil, fmt.Errorf("reply to request %d when %d was asked", got, req)
	case flags&vuReply == 0 || flags&3 != vuVersion:
		return nil, fmt.Errorf("reply flags %#x: not a version 1 reply", flags)
	case size > vuMaxPayload:
		return nil, fmt.Errorf("reply of %d bytes (at most %d expected)", size, vuMaxPayload)
	}
	return body(int(size))
}

func (v *VhostUser) getU64(req uint32) (uint64, error) {
	b, err := v.call(req, nil)
	if err != nil {
		return 0, err
	}
	if len(b) != 8 {
		return 0, fmt.Errorf("reply of %d bytes, want 8", len(b))
	}
	return binary.LittleEndian.Uint64(b), nil
}

// SetFeatures tells the backend the virtio features the driver accepted.
func (v *VhostUser) SetFeatures(f uint64) error {
	return v.send(vuSetFeatures, u64(f), nil, true)
}

// SharedRegion is one region of guest RAM as a backend maps it: the
// region's guest-physical base and size, where mvm mapped it, and the
// memfd and offset that hold it.
type SharedRegion struct {
	GuestAddr, Size, UserAddr uint64
	Fd                        int
	Offset                    uint64
}

// SharedMemory is guest RAM that other processes can map.
type SharedMemory interface {
	SharedRegions() []SharedRegion
}

// SetMemTable gives the backend guest RAM: {u32 nregions; u32 padding}
// then per region {guest_phys_addr, memory_size, userspace_addr,
// mmap_offset}, one fd each.
func (v *VhostUser) SetMemTable(regions []SharedRegion) error {
	if len(regions) == 0 || len(regions) > vuMaxRegions {
		return fmt.Errorf("SET_MEM_TABLE: %d memory regions (1 to %d fit)", len(regions), vuMaxRegions)
	}
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(regions)))
	b = binary.LittleEndian.AppendUint32(b, 0)
	var fds []int
	for _, r := range regions {
		for _, x := range []uint64{r.GuestAddr, r.Size, r.UserAddr, r.Offset} {
			b = binary.LittleEndian.AppendUint64(b, x)
		}
		fds = append(fds, r.Fd)
	}
	if err := v.send(vuSetMemTable, b, fds, true); err != nil {
		return fmt.Errorf("SET_MEM_TABLE: %w", err)
	}
	return nil
}

// VringSetup is what the backend needs for one queue: its size, the ring
// addresses in mvm's address space, and the kick and call eventfds.
type VringSetup struct {
	Index             uint32
	Num               uint32
	Desc, Avail, Used uint64
	Kick, Call        int
}

// StartVring programs and enables one ring: SET_VRING_NUM, SET_VRING_ADDR
// {index, flags, desc, used, avail, log}, SET_VRING_BASE 0, KICK, CALL,
// and SET_VRING_ENABLE.
func (v *VhostUser) StartVring(s VringSetup) error {
	addr := binary.LittleEndian.AppendUint32(nil, s.Index)
	addr = binary.LittleEndian.AppendUint32(addr, 0)
	for _, x := range []uint64{s.Desc, s.Used, s.Avail, 0} {
		addr = binary.LittleEndian.AppendUint64(addr, x)
	}
	steps := []struct {
		name    string
		req     uint32
		payload []byte
		fd      int
	}{
		{"SET_VRING_NUM", vuSetVringNum, vringState(s.Index, s.Num), -1},
		{"SET_VRING_ADDR", vuSetVringAddr, addr, -1},
		{"SET_VRING_BASE", vuSetVringBase, vringState(s.Index, 0), -1},
		{"SET_VRING_KICK", vuSetVringKick, u64(uint64(s.Index)), s.Kick},
		{"SET_VRING_CALL", vuSetVringCall, u64(uint64(s.Index)), s.Call},
		{"SET_VRING_ENABLE", vuSetVringEnable, vringState(s.Index, 1), -1},
	}
	for _, st := range steps {
		var fds []int
		if st.fd >= 0 {
			fds = []int{st.fd}
		}
		if err := v.send(st.req, st.payload, fds, true); err != nil {
			return fmt.Errorf("queue %d: %s: %w", s.Index, st.name, err)
		}
	}
	return nil
}

// StopVring stops one ring (GET_VRING_BASE), returning once the backend
// no longer touches it.
func (v *VhostUser) StopVring(index uint32) error {
	b, err := v.call(vuGetVringBase, vringState(index, 0))
	if err != nil {
		return fmt.Errorf("queue %d: GET_VRING_BASE: %w", index, err)
	}
	if len(b) != 8 {
		return fmt.Errorf("queue %d: GET_VRING_BASE: reply of %d bytes, want 8", index, len(b))
	}
	return nil
}

// Close closes the connection; a backend such as virtiofsd then exits.
func (v *VhostUser) Close() error { return v.conn.Close() }
