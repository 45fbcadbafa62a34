//go:build linux

package virtio

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// virtio-fs (virtio 1.2 section 5.11): device ID 26; configuration
// {char tag[36]; le32 num_request_queues}; queue 0 is the high-priority
// queue, 1.. the request queues. mvm is the vhost-user frontend: virtiofsd
// serves the queues from guest RAM itself, mvm only programs it and turns
// its call eventfds into virtio-mmio interrupts (DESIGN.md section 8).
const (
	fsDeviceID      = 26
	fsTagSize       = 36
	fsRequestQueues = 1
	fsQueueSize     = 1024
	// fsFeatureMask is what mvm passes on of the backend's features: the
	// ring features its transport knows (VIRTIO_RING_F_INDIRECT_DESC 28,
	// VIRTIO_RING_F_EVENT_IDX 29). VERSION_1 the transport adds itself;
	// bit 30 is vhost-user's own, not the guest's.
	fsFeatureMask = 1<<28 | 1<<29
	// fsStopWait is how long Close waits for virtiofsd to exit after the
	// connection closes before killing it.
	fsStopWait = 5 * time.Second
)

// FSOptions says what one virtiofsd serves.
type FSOptions struct {
	Name      string // e.g. "virtio-fs0"
	Tag       string // at most 36 bytes
	Dir       string // the host directory
	ReadOnly  bool
	Virtiofsd string // the binary
	// Sandbox is virtiofsd's --sandbox: namespace (root), or none.
	Sandbox string
}

// FS is a virtio-fs device whose backend is a virtiofsd process.
type FS struct {
	opt      FSOptions
	log      *slog.Logger
	cmd      *exec.Cmd
	exited   chan struct{} // closed when cmd.Wait returned
	waitErr  error
	vu       *VhostUser
	features uint64

	calls   []*Event
	started []uint32 // queue indexes handed to the backend
	wg      sync.WaitGroup
}

// StartFS starts virtiofsd for one share and connects to it. virtiofsd
// gets a listening socket as --fd 3, bound in a private directory that is
// removed as soon as mvm has connected, so nothing is left behind however
// mvm exits.
func StartFS(opt FSOptions, log *slog.Logger) (_ *FS, err error) {
	if len(opt.Tag) == 0 || len(opt.Tag) > fsTagSize {
		return nil, fmt.Errorf("virtio-fs tag %q: 1 to %d bytes", opt.Tag, fsTagSize)
	}
	dir, err := os.MkdirTemp("", "mvm-virtiofs-")
	if err != nil {
		return nil, fmt.Errorf("runtime directory for virtiofsd: %w", err)
	}
	defer os.RemoveAll(dir)
	addr := &net.UnixAddr{Name: filepath.Join(dir, "vhost-user.sock"), Net: "unix"}
	l, err := net.ListenUnix("unix", addr)
	if err != nil {
		return nil, fmt.Errorf("virtiofsd socket: %w", err)
	}
	defer l.Close()
	lf, err := l.File()
	if err != nil {
		return nil, fmt.Errorf("virtiofsd socket: %w", err)
	}
	defer lf.Close()

	args := []string{"--fd=3", "--shared-dir=" + opt.Dir, "--sandbox=" + opt.Sandbox, "--log-level=error"}
	if opt.ReadOnly {
		args = append(args, "--readonly")
	}
	cmd := exec.Command(opt.Virtiofsd, args...)
	cmd.ExtraFiles = []*os.File{lf}
	cmd.Stderr = os.Stderr
	// Its own process group: a Ctrl-C on the terminal reaches mvm, which
	// stops virtiofsd after the guest's last requests, not both at once.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", opt.Virtiofsd, err)
	}
	f := &FS{opt: opt, log: log, cmd: cmd, exited: make(chan struct{})}
	go func() {
		f.waitErr = cmd.Wait()
		close(f.exited)
	}()
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	conn, err := net.DialUnix("unix", nil, addr)
	if err != nil {
		return nil, fmt.Errorf("connect to virtiofsd: %w", err)
	}
	f.vu, f.features, err = NewVhostUser(conn)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("virtiofsd for %s: %w%s", opt.Dir, err, f.exitNote())
	}
	for range fsRequestQueues + 1 {
		e, err := NewEvent()
		if err != nil {
			return nil, err
		}
		f.calls = append(f.calls, e)
	}
	return f, nil
}

// exitNote says how virtiofsd ended, if it did within a moment.
func (f *FS) exitNote() string {
	select {
	case <-f.exited:
		return fmt.Sprintf(" (virtiofsd exited: %v)", f.waitErr)
	case <-time.After(500 * time.Millisecond):
		return ""
	}
}

// Name implements Device.
func (f *FS) Name() string { return f.opt.Name }

// ID implements Device.
func (f *FS) ID() uint32 { return fsDeviceID }

// Features implements Device.
func (f *FS) Features() uint64 { return f.features & fsFeatureMask }

// QueueMax implements Device.
func (f *FS) QueueMax() []uint16 {
	q := make([]uint16, fsRequestQueues+1)
	for i := range q {
		q[i] = fsQueueSize
	}
	return q
}

// ReadConfig implements Device.
func (f *FS) ReadConfig(off uint64, data []byte) {
	var cfg [fsTagSize + 4]byte
	copy(cfg[:], f.opt.Tag)
	cfg[fsTagSize] = fsRequestQueues
	if off < uint64(len(cfg)) {
		copy(data, cfg[off:])
	}
}

// Start implements Device: hand the features, guest RAM and every enabled
// queue to virtiofsd, and forward its call eventfds to the driver. On an
// error (the transport then marks the device DEVICE_NEEDS_RESET) what was
// started is stopped again, so a later DRIVER_OK starts from nothing.
func (f *FS) Start(env *Env) error {
	err := f.start(env)
	if err != nil {
		f.Stop()
	}
	return err
}

func (f *FS) start(env *Env) error {
	shm, ok := env.Mem.(SharedMemory)
	if !ok {
		return errors.New("virtio-fs: guest RAM is not shared memory")
	}
	if err := f.vu.SetFeatures(env.Features | f.features&vuFProtocolFeatures); err != nil {
		return fmt.Errorf("virtiofsd: SET_FEATURES: %w", err)
	}
	if err := f.vu.SetMemTable(shm.SharedRegions()); err != nil {
		return fmt.Errorf("virtiofsd: %w", err)
	}
	for i, q := range env.Queues {
		if q == nil {
			continue
		}
		s := VringSetup{
			Index: uint32(i), Num: uint32(q.Size()),
			Desc: hostAddr(q.desc), Avail: hostAddr(q.avail) + uint64(q.availOff), Used: hostAddr(q.used),
			Kick: env.Kicks[i].Fd(), Call: f.calls[i].Fd(),
		}
		if err := f.vu.StartVring(s); err != nil {
			return fmt.Errorf("virtiofsd: %w", err)
		}
		f.started = append(f.started, uint32(i))
		call := f.calls[i]
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			// virtio-mmio's interrupt handler in Linux looks at
			// InterruptStatus first, so the call goes through the
			// transport, which sets the used-buffer bit and raises the SPI.
			for call.Wait() == nil {
				env.Interrupt()
			}
		}()
	}
	return nil
}

// hostAddr is the address of guest memory b in mvm's address space, which
// SET_VRING_ADDR speaks (virtiofsd translates it through the memory table).
func hostAddr(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(&b[0]))) }

// Stop implements Device: stop every ring in the backend, then the
// interrupt forwarders.
func (f *FS) Stop() {
	for _, i := range f.started {
		if err := f.vu.StopVring(i); err != nil && f.log != nil {
			f.log.Warn("virtio-fs: stopping a queue", "device", f.opt.Name, "err", err)
		}
	}
	f.started = nil
	for _, c := range f.calls {
		c.Interrupt()
	}
	f.wg.Wait()
	for _, c := range f.calls {
		c.Resume()
	}
}

// Close implements Device: close the connection, after which virtiofsd
// exits (it has written everything the guest sent it to the host
// directory by then); kill it if it does not.
func (f *FS) Close() error {
	if f.vu != nil {
		f.vu.Close()
	}
	var err error
	if f.cmd != nil && f.cmd.Process != nil {
		select {
		case <-f.exited:
		case <-time.After(fsStopWait):
			f.cmd.Process.Kill()
			<-f.exited
			err = fmt.Errorf("%s: virtiofsd did not exit within %v of the disconnect; killed", f.opt.Name, fsStopWait)
		}
	}
	for _, c := range f.calls {
		c.Close()
	}
	f.calls = nil
	return err
}
