//go:build linux

package virtio

import (
	"encoding/binary"
	"io"
	"net"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// vuPeer is the backend end of a socket pair: it reads the frontend's
// requests and answers as the test says.
type vuPeer struct {
	t    *testing.T
	conn *net.UnixConn
}

type vuMsg struct {
	req, flags uint32
	payload    []byte
	fds        int
}

func newVUPair(t *testing.T) (*net.UnixConn, *vuPeer) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "vu")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return c.(*net.UnixConn)
	}
	a, b := conn(fds[0]), conn(fds[1])
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, &vuPeer{t: t, conn: b}
}

// read reads one request — its header with the ancillary data (the fds
// come with the message's first byte), then the payload the header
// announces — closing the file descriptors that came with it.
func (p *vuPeer) read() vuMsg {
	h, oob := make([]byte, vuHeaderSize), make([]byte, 4096)
	n, oobn, _, _, err := p.conn.ReadMsgUnix(h, oob)
	if err != nil || n != vuHeaderSize {
		p.t.Errorf("backend read: %d header bytes, %v", n, err)
		return vuMsg{}
	}
	m := vuMsg{req: binary.LittleEndian.Uint32(h), flags: binary.LittleEndian.Uint32(h[4:])}
	m.payload = make([]byte, binary.LittleEndian.Uint32(h[8:]))
	if _, err := io.ReadFull(p.conn, m.payload); err != nil {
		p.t.Errorf("request %d: payload: %v", m.req, err)
	}
	if oobn > 0 {
		scms, _ := unix.ParseSocketControlMessage(oob[:oobn])
		for _, s := range scms {
			fds, _ := unix.ParseUnixRights(&s)
			m.fds += len(fds)
			for _, fd := range fds {
				unix.Close(fd)
			}
		}
	}
	return m
}

func (p *vuPeer) reply(req uint32, payload []byte) {
	if _, err := p.conn.Write(vuEncode(req, vuVersion|vuReply, payload)); err != nil {
		p.t.Errorf("backend write: %v", err)
	}
}

func TestVhostUserHandshake(t *testing.T) {
	front, peer := newVUPair(t)
	const backendFeatures = 1<<32 | 1<<30 | 1<<29 | 1<<28
	done := make(chan []vuMsg)
	go func() {
		var got []vuMsg
		m := peer.read()
		got = append(got, m)
		peer.reply(m.req, u64(backendFeatures))
		m = peer.read()
		got = append(got, m)
		peer.reply(m.req, u64(vuProtoReplyAck|1<<9)) // REPLY_ACK and CONFIG
		got = append(got, peer.read(), peer.read())  // SET_PROTOCOL_FEATURES, SET_OWNER
		done <- got
	}()
	v, feat, err := NewVhostUser(front)
	if err != nil {
		t.Fatal(err)
	}
	got := <-done
	if feat != backendFeatures || !v.replyAck {
		t.Errorf("features %#x replyAck %v, want %#x true", feat, v.replyAck, uint64(backendFeatures))
	}
	wantReq := []uint32{vuGetFeatures, vuGetProtocolFeatures, vuSetProtocolFeatures, vuSetOwner}
	for i, m := range got {
		if m.req != wantReq[i] || m.flags != vuVersion {
			t.Errorf("message %d: request %d flags %#x, want %d flags 1", i, m.req, m.flags, wantReq[i])
		}
	}
	if p := got[2].payload; len(p) != 8 || binary.LittleEndian.Uint64(p) != vuProtoReplyAck {
		t.Errorf("SET_PROTOCOL_FEATURES payload %x, want only REPLY_ACK", p)
	}

	// With REPLY_ACK, SET_MEM_TABLE asks for an acknowledgement and
	// carries one fd per region; a non-zero status is an error.
	memfd, err := unix.MemfdCreate("t", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(memfd)
	regions := []SharedRegion{{GuestAddr: 0x4000_0000, Size: 1 << 20, UserAddr: 0x7f00_0000_0000, Fd: memfd}, {GuestAddr: 0x8000_0000, Size: 1 << 21, UserAddr: 0x7f10_0000_0000, Fd: memfd, Offset: 1 << 20}}
	msgs := make(chan vuMsg, 1)
	go func() {
		m := peer.read()
		msgs <- m
		peer.reply(m.req, u64(1))
	}()
	if err := v.SetMemTable(regions); err == nil || !strings.Contains(err.Error(), "status 1") {
		t.Errorf("SET_MEM_TABLE refused by the backend: error %v", err)
	}
	m := <-msgs
	if m.req != vuSetMemTable || m.flags != vuVersion|vuNeedReply || m.fds != 2 || len(m.payload) != 8+2*32 {
		t.Errorf("SET_MEM_TABLE: request %d flags %#x fds %d payload %d bytes", m.req, m.flags, m.fds, len(m.payload))
	} else {
		le := binary.LittleEndian
		if le.Uint32(m.payload) != 2 || le.Uint64(m.payload[8+32:]) != 0x8000_0000 || le.Uint64(m.payload[8+32+24:]) != 1<<20 {
			t.Errorf("SET_MEM_TABLE payload %x", m.payload)
		}
	}
	if err := v.SetMemTable(nil); err == nil {
		t.Error("SET_MEM_TABLE with no region accepted")
	}

	// A ring: NUM, ADDR {index, flags, desc, used, avail, log}, BASE,
	// KICK and CALL with one fd each, ENABLE; each acknowledged.
	kick, _ := NewEvent()
	call, _ := NewEvent()
	defer kick.Close()
	defer call.Close()
	ring := make(chan []vuMsg, 1)
	go func() {
		var got []vuMsg
		for range 6 {
			m := peer.read()
			got = append(got, m)
			peer.reply(m.req, u64(0))
		}
		ring <- got
	}()
	if err := v.StartVring(VringSetup{Index: 1, Num: 256, Desc: 0x1000, Avail: 0x2000, Used: 0x3000, Kick: kick.Fd(), Call: call.Fd()}); err != nil {
		t.Fatal(err)
	}
	steps := <-ring
	wantReq = []uint32{vuSetVringNum, vuSetVringAddr, vuSetVringBase, vuSetVringKick, vuSetVringCall, vuSetVringEnable}
	for i, m := range steps {
		wantFds := 0
		if m.req == vuSetVringKick || m.req == vuSetVringCall {
			wantFds = 1
		}
		if m.req != wantReq[i] || m.fds != wantFds {
			t.Errorf("ring message %d: request %d with %d fds, want %d with %d", i, m.req, m.fds, wantReq[i], wantFds)
		}
	}
	le := binary.LittleEndian
	if a := steps[1].payload; len(a) != 40 || le.Uint32(a) != 1 || le.Uint64(a[8:]) != 0x1000 || le.Uint64(a[16:]) != 0x3000 || le.Uint64(a[24:]) != 0x2000 {
		t.Errorf("SET_VRING_ADDR payload %x: want index 1, desc 0x1000, used 0x3000, avail 0x2000", a)
	}
	if n := steps[0].payload; le.Uint32(n) != 1 || le.Uint32(n[4:]) != 256 {
		t.Errorf("SET_VRING_NUM payload %x", n)
	}
	if e := steps[5].payload; le.Uint32(e[4:]) != 1 {
		t.Errorf("SET_VRING_ENABLE payload %x, want enable 1", e)
	}

	// GET_VRING_BASE: a reply to another request is an error, and so is
	// the backend hanging up.
	go func() {
		m := peer.read()
		peer.reply(m.req+1, vringState(1, 7))
		peer.read()
		peer.conn.Close()
	}()
	if err := v.StopVring(1); err == nil || !strings.Contains(err.Error(), "reply to request") {
		t.Errorf("mismatched reply: %v", err)
	}
	if err := v.StopVring(1); err == nil {
		t.Error("StopVring on a closed connection succeeded")
	}
}

func TestParseReply(t *testing.T) {
	h := func(req, flags, size uint32) []byte {
		b := binary.LittleEndian.AppendUint32(nil, req)
		b = binary.LittleEndian.AppendUint32(b, flags)
		return binary.LittleEndian.AppendUint32(b, size)
	}
	body := func(n int) ([]byte, error) { return make([]byte, n), nil }
	if b, err := parseReply(h(11, vuVersion|vuReply, 8), 11, body); err != nil || len(b) != 8 {
		t.Errorf("good reply: %d bytes, %v", len(b), err)
	}
	for _, c := range []struct {
		name string
		h    []byte
		want string
	}{
		{"other request", h(12, vuVersion|vuReply, 8), "reply to request 12"},
		{"not a reply", h(11, vuVersion, 8), "not a version 1 reply"},
		{"version 2", h(11, 2|vuReply, 8), "not a version 1 reply"},
		{"huge", h(11, vuVersion|vuReply, 1<<30), "at most"},
	} {
		if _, err := parseReply(c.h, 11, body); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// FuzzParseReply: whatever a backend sends as a reply header, mvm never
// reads more than vuMaxPayload bytes for it and never panics.
func FuzzParseReply(f *testing.F) {
	f.Add([]byte{11, 0, 0, 0, 5, 0, 0, 0, 8, 0, 0, 0})
	f.Add(make([]byte, vuHeaderSize))
	f.Fuzz(func(t *testing.T, h []byte) {
		if len(h) < vuHeaderSize {
			return
		}
		parseReply(h[:vuHeaderSize], 11, func(n int) ([]byte, error) {
			if n < 0 || n > vuMaxPayload {
				t.Fatalf("asked to read %d bytes", n)
			}
			return nil, nil
		})
	})
}

func TestFSReadConfig(t *testing.T) {
	f := &FS{opt: FSOptions{Tag: "data"}}
	var cfg [40]byte
	f.ReadConfig(0, cfg[:])
	if string(cfg[:4]) != "data" || cfg[4] != 0 || binary.LittleEndian.Uint32(cfg[36:]) != fsRequestQueues {
		t.Errorf("config space %x: want tag data NUL-padded, num_request_queues %d", cfg, fsRequestQueues)
	}
	// Reads at odd offsets and past the end (a driver's garbage) give
	// the bytes there or zeros.
	b := []byte{0xff, 0xff, 0xff, 0xff}
	f.ReadConfig(1, b)
	if string(b) != "ata\x00" {
		t.Errorf("config at 1: %q", b)
	}
	b = []byte{0xff, 0xff}
	f.ReadConfig(39, b)
	if b[0] != 0 || b[1] != 0xff {
		t.Errorf("config at 39 (last byte): %x; want the byte there and the rest untouched (the transport zeroes it)", b)
	}
	f.ReadConfig(1<<40, b)
	if f.Features()&^fsFeatureMask != 0 {
		t.Error("features beyond the mask")
	}
}
