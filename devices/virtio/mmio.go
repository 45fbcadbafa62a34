//go:build linux

package virtio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	hvirtio "github.com/c35s/hype/virtio"
)

// Device is one virtio device behind a Transport.
type Device interface {
	// Name names the device in logs and profiles, e.g. "virtio-blk0".
	Name() string
	// ID is the virtio device ID (virtio 1.2 section 5).
	ID() uint32
	// Features are the feature bits the device offers besides
	// VIRTIO_F_VERSION_1, which the transport always offers and requires.
	Features() uint64
	// QueueMax is the largest size of each of the device's queues.
	QueueMax() []uint16
	// ReadConfig fills data from the device configuration space at off;
	// bytes past its end read as zero.
	ReadConfig(off uint64, data []byte)
	// Start begins servicing the queues after the driver set DRIVER_OK.
	Start(env *Env) error
	// Stop returns once none of the device's goroutines touches guest
	// memory or the queues; the transport has interrupted env's kicks.
	Stop()
	// Close releases the device's host resources (after Stop).
	Close() error
}

// Env is what a started device works with.
type Env struct {
	// Queues are indexed like QueueMax; nil where the driver did not
	// enable a queue.
	Queues []*Queue
	// Kicks are the queues' notification events; Wait on them returns an
	// error once the device is being stopped.
	Kicks []*Event
	// Features are the negotiated feature bits.
	Features uint64
	// Mem is guest RAM (a vhost-user device hands it to its backend).
	Mem Memory
	// Interrupt tells the driver that used buffers are waiting.
	Interrupt func()
	// Fault reports a driver error the device cannot continue from: the
	// device is marked DEVICE_NEEDS_RESET, the error logged once.
	Fault func(error)
	// Problem reports a driver error that failed one request (logged
	// once per kind, counted).
	Problem func(kind string, err error)

	stopping atomic.Bool // set before the kicks are interrupted
}

// virtio-mmio registers (virtio 1.2 section 4.2.2, Table 4.1).
const (
	regMagic         = 0x000
	regVersion       = 0x004
	regDeviceID      = 0x008
	regVendorID      = 0x00c
	regDevFeatures   = 0x010
	regDevFeatSel    = 0x014
	regDrvFeatures   = 0x020
	regDrvFeatSel    = 0x024
	regQueueSel      = 0x030
	regQueueNumMax   = 0x034
	regQueueNum      = 0x038
	regQueueReady    = 0x044
	regQueueNotify   = 0x050
	regIntStatus     = 0x060
	regIntACK        = 0x064
	regStatus        = 0x070
	regQueueDescLo   = 0x080
	regQueueDescHi   = 0x084
	regQueueDriverLo = 0x090
	regQueueDriverHi = 0x094
	regQueueDeviceLo = 0x0a0
	regQueueDeviceHi = 0x0a4
	regSHMSel        = 0x0ac
	regSHMLenLo      = 0x0b0
	regSHMLenHi      = 0x0b4
	regSHMBaseLo     = 0x0b8
	regSHMBaseHi     = 0x0bc
	regQueueReset    = 0x0c0
	regConfigGen     = 0x0fc
	regConfig        = 0x100

	// QueueNotifyOffset is where a driver writes a queue index to notify
	// the device; the VMM registers an ioeventfd there.
	QueueNotifyOffset = regQueueNotify
	// RegionSize is the MMIO window of one device (4 KiB, as hype's
	// virtio-mmio bus lays devices out).
	RegionSize = 0x1000
)

// Device status bits (section 2.1).
const (
	statusAcknowledge = 1
	statusDriver      = 2
	statusDriverOK    = 4
	statusFeaturesOK  = 8
	statusNeedsReset  = 64
	statusFailed      = 128
)

// Interrupt status bits (section 4.2.2, InterruptStatus).
const (
	intUsedBuffer   = 1
	intConfigChange = 2
)

// vendorID is what mvm reports as the subsystem vendor ("mvm" in ASCII,
// like QEMU's 0x554d4551 "QEMU"); Linux ignores it.
const vendorID = 0x006d766d

type queueRegs struct {
	num                     uint32
	ready                   bool
	desc, driver, deviceAdr uint64
}

// Transport is one virtio-mmio device: the register file a driver programs,
// the feature negotiation, and the device's start and stop. It implements
// the MMIO device interface of mvm's bus (package devices). Guest register
// accesses come from vCPU threads; nothing here blocks on the device's
// workers except Stop, which they never wait for in turn.
type Transport struct {
	dev   Device
	mem   Memory
	irq   func()
	log   *slog.Logger
	kicks []*Event

	intStatus  atomic.Uint32
	needsReset atomic.Bool
	problems   atomic.Uint64
	logged     sync.Map // problem kind -> struct{}

	mu       sync.Mutex
	status   uint32
	devSel   uint32
	drvSel   uint32
	drvFeat  uint64
	queueSel uint32
	queues   []queueRegs
	running  bool
	env      *Env
	gen      uint32
}

// NewTransport puts dev behind a virtio-mmio register file. irq raises the
// device's (edge-triggered) interrupt; mem is guest RAM. It creates one
// notification event per queue (see Kicks).
func NewTransport(dev Device, mem Memory, irq func(), log *slog.Logger) (*Transport, error) {
	t := &Transport{dev: dev, mem: mem, irq: irq, log: log, queues: make([]queueRegs, len(dev.QueueMax()))}
	for range t.queues {
		k, err := NewEvent()
		if err != nil {
			t.Close()
			return nil, err
		}
		t.kicks = append(t.kicks, k)
	}
	return t, nil
}

// Name implements the bus's Device interface.
func (t *Transport) Name() string { return t.dev.Name() }

// Device is the device behind the transport.
func (t *Transport) Device() Device { return t.dev }

// Kicks are the queues' notification events, by queue index: register each
// as an ioeventfd on QueueNotifyOffset with the queue index as datamatch.
func (t *Transport) Kicks() []*Event { return t.kicks }

// Problems counts the driver errors seen (each kind is logged once).
func (t *Transport) Problems() uint64 { return t.problems.Load() }

// problem logs a driver error once per kind and counts it.
func (t *Transport) problem(kind string, err error) {
	t.problems.Add(1)
	if _, seen := t.logged.LoadOrStore(kind, struct{}{}); !seen && t.log != nil {
		t.log.Warn("virtio driver error (logged once per kind)", "device", t.dev.Name(), "kind", kind, "err", err)
	}
}

func (t *Transport) features() uint64 { return t.dev.Features() | hvirtio.FVersion1 }

// Read implements a guest register read.
func (t *Transport) Read(off uint64, data []byte) {
	clear(data)
	if off >= regConfig {
		t.dev.ReadConfig(off-regConfig, data)
		return
	}
	if len(data) != 4 || off%4 != 0 {
		t.problem("register access", fmt.Errorf("%d-byte read at %#x (registers are 32-bit)", len(data), off))
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var v uint32
	switch off {
	case regMagic:
		v = hvirtio.MagicValue
	case regVersion:
		v = hvirtio.Version
	case regDeviceID:
		v = t.dev.ID()
	case regVendorID:
		v = vendorID
	case regDevFeatures:
		if t.devSel < 2 {
			v = uint32(t.features() >> (32 * t.devSel))
		}
	case regQueueNumMax:
		if q := int(t.queueSel); q < len(t.queues) {
			v = uint32(t.dev.QueueMax()[q])
		}
	case regQueueReady:
		if q := t.selected(); q != nil && q.ready {
			v = 1
		}
	case regIntStatus:
		v = t.intStatus.Load()
	case regStatus:
		v = t.status
		if t.needsReset.Load() {
			v |= statusNeedsReset
		}
	case regSHMLenLo, regSHMLenHi, regSHMBaseLo, regSHMBaseHi:
		v = 0xffff_ffff // no shared memory regions (all ones: section 4.2.2)
	case regConfigGen:
		v = t.gen
	}
	binary.LittleEndian.PutUint32(data, v)
}

func (t *Transport) selected() *queueRegs {
	if int(t.queueSel) < len(t.queues) {
		return &t.queues[t.queueSel]
	}
	return nil
}

// Write implements a guest register write.
func (t *Transport) Write(off uint64, data []byte) {
	if off >= regConfig {
		// Nothing in mvm's devices' configuration is writable.
		return
	}
	if len(data) != 4 || off%4 != 0 {
		t.problem("register access", fmt.Errorf("%d-byte write at %#x (registers are 32-bit)", len(data), off))
		return
	}
	v := binary.LittleEndian.Uint32(data)
	if off == regQueueNotify {
		// What KVM's ioeventfd did not catch (none registered, or a value
		// that is not a queue index).
		if int(v) < len(t.kicks) {
			t.kicks[v].Signal()
		} else {
			t.problem("queue notify", fmt.Errorf("notify of queue %d, the device has %d", v, len(t.kicks)))
		}
		return
	}
	if off == regIntACK {
		t.intStatus.And(^v)
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch off {
	case regDevFeatSel:
		t.devSel = v
	case regDrvFeatSel:
		t.drvSel = v
	case regDrvFeatures:
		if t.status&statusFeaturesOK != 0 || t.drvSel > 1 {
			t.problem("features", fmt.Errorf("driver features written after FEATURES_OK or with selector %d", t.drvSel))
			return
		}
		shift := 32 * t.drvSel
		t.drvFeat = t.drvFeat&^(0xffff_ffff<<shift) | uint64(v)<<shift
	case regQueueSel:
		t.queueSel = v
	case regQueueNum, regQueueDescLo, regQueueDescHi, regQueueDriverLo, regQueueDriverHi, regQueueDeviceLo, regQueueDeviceHi:
		q := t.selected()
		if q == nil || q.ready || t.running {
			t.problem("queue setup", fmt.Errorf("write at %#x for queue %d that is absent, ready or running", off, t.queueSel))
			return
		}
		switch off {
		case regQueueNum:
			q.num = v
		case regQueueDescLo:
			q.desc = q.desc&^0xffff_ffff | uint64(v)
		case regQueueDescHi:
			q.desc = q.desc&0xffff_ffff | uint64(v)<<32
		case regQueueDriverLo:
			q.driver = q.driver&^0xffff_ffff | uint64(v)
		case regQueueDriverHi:
			q.driver = q.driver&0xffff_ffff | uint64(v)<<32
		case regQueueDeviceLo:
			q.deviceAdr = q.deviceAdr&^0xffff_ffff | uint64(v)
		case regQueueDeviceHi:
			q.deviceAdr = q.deviceAdr&0xffff_ffff | uint64(v)<<32
		}
	case regQueueReady:
		q := t.selected()
		if q == nil || t.running {
			t.problem("queue setup", fmt.Errorf("QueueReady for queue %d that is absent or running", t.queueSel))
			return
		}
		q.ready = v&1 != 0
	case regStatus:
		t.writeStatus(v)
	case regSHMSel, regQueueReset:
		// No shared memory, no VIRTIO_F_RING_RESET offered.
	default:
		t.problem("register access", fmt.Errorf("write to read-only or unknown register %#x", off))
	}
}

// writeStatus drives the device status state machine (section 3.1.1).
func (t *Transport) writeStatus(v uint32) {
	if v == 0 {
		t.resetLocked()
		return
	}
	if v&^t.status&statusFeaturesOK != 0 {
		want := t.drvFeat
		if want&^t.features() != 0 || want&hvirtio.FVersion1 == 0 {
			// Leave FEATURES_OK clear: the driver reads it back and gives up.
			t.problem("features", fmt.Errorf("driver accepted features %#x, device offers %#x (VERSION_1 required)", want, t.features()))
			v &^= statusFeaturesOK
		}
	}
	if t.status&^v != 0 {
		t.problem("status", fmt.Errorf("status %#x clears bits of %#x without a reset", v, t.status))
		v |= t.status
	}
	t.status = v & 0xff &^ statusNeedsReset
	if v&statusFailed != 0 {
		t.stopLocked()
		return
	}
	if v&statusDriverOK != 0 && !t.running {
		if t.status&statusFeaturesOK == 0 {
			t.problem("status", errors.New("DRIVER_OK without FEATURES_OK"))
			t.needsReset.Store(true)
			return
		}
		t.startLocked()
	}
}

func (t *Transport) startLocked() {
	env := &Env{
		Queues:    make([]*Queue, len(t.queues)),
		Kicks:     t.kicks,
		Features:  t.drvFeat,
		Mem:       t.mem,
		Interrupt: func() { t.raise(intUsedBuffer) },
		Fault:     t.fault,
		Problem:   t.problem,
	}
	indirect := t.drvFeat&hvirtio.FIndirectDesc != 0
	eventIdx := t.drvFeat&hvirtio.FEventIdx != 0
	max := t.dev.QueueMax()
	for i, r := range t.queues {
		if !r.ready {
			continue
		}
		if r.num > uint32(max[i]) {
			t.fault(fmt.Errorf("queue %d: size %d is above the maximum %d", i, r.num, max[i]))
			return
		}
		q, err := NewQueue(t.mem, QueueConfig{Size: uint16(r.num), DescAddr: r.desc, AvailAddr: r.driver, UsedAddr: r.deviceAdr, EventIdx: eventIdx}, indirect)
		if err != nil {
			t.fault(fmt.Errorf("queue %d: %w", i, err))
			return
		}
		env.Queues[i] = q
	}
	if err := t.dev.Start(env); err != nil {
		t.fault(err)
		return
	}
	t.running, t.env = true, env
}

// fault marks the device DEVICE_NEEDS_RESET and tells the driver through a
// configuration-change interrupt (section 2.1.2). Workers call it, so it
// takes no lock.
func (t *Transport) fault(err error) {
	t.problem("device needs reset", err)
	if !t.needsReset.Swap(true) {
		t.raise(intConfigChange)
	}
}

func (t *Transport) raise(bit uint32) {
	t.intStatus.Or(bit)
	t.irq()
}

// stopLocked stops the device's workers: interrupt every kick so waits
// return, wait for the device, then re-arm the kicks.
func (t *Transport) stopLocked() {
	if !t.running {
		return
	}
	t.env.stopping.Store(true)
	for _, k := range t.kicks {
		k.Interrupt()
	}
	t.dev.Stop()
	for _, k := range t.kicks {
		k.Resume()
	}
	t.running, t.env = false, nil
}

func (t *Transport) resetLocked() {
	t.stopLocked()
	t.status, t.devSel, t.drvSel, t.drvFeat, t.queueSel = 0, 0, 0, 0, 0
	clear(t.queues)
	t.intStatus.Store(0)
	t.needsReset.Store(false)
	t.gen++
}

// Reset puts the device in its power-on state (a VM reboot).
func (t *Transport) Reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.resetLocked()
}

// Close stops the device and releases everything: the device's host
// resources (a disk is synced) and the notification events.
func (t *Transport) Close() error {
	t.mu.Lock()
	t.stopLocked()
	t.mu.Unlock()
	err := t.dev.Close()
	for _, k := range t.kicks {
		k.Close()
	}
	return err
}
