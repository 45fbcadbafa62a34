package userspace

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mvm-dev/mvm/internal/kvm"
)

// Kind is the class of an exit that reached userspace (a KVM_RUN return).
type Kind uint8

// The kinds of userspace exits. Each kind has a bare key (no sub-key) in
// every Schema; sub-keys name the device, PSCI function or event type.
const (
	// KindMMIO is KVM_EXIT_MMIO; sub-key: the device (uart, virtio,
	// marker, unmapped, ...).
	KindMMIO Kind = iota
	// KindHypercall is KVM_EXIT_HYPERCALL; sub-key: the PSCI/SMCCC
	// function name.
	KindHypercall
	// KindSystemEvent is KVM_EXIT_SYSTEM_EVENT; sub-key: the event type
	// (see SystemEventName).
	KindSystemEvent
	// KindIntr is KVM_RUN returning EINTR (a signal, a kick) or
	// KVM_EXIT_INTR.
	KindIntr
	// KindFailEntry is KVM_EXIT_FAIL_ENTRY.
	KindFailEntry
	// KindInternalError is KVM_EXIT_INTERNAL_ERROR.
	KindInternalError
	// KindOther is any other exit reason.
	KindOther

	numKinds
)

// kindName is the report name of a userspace exit kind.
func kindName(k Kind) (string, bool) {
	switch k {
	case KindMMIO:
		return "MMIO", true
	case KindHypercall:
		return "HYPERCALL", true
	case KindSystemEvent:
		return "SYSTEM_EVENT", true
	case KindIntr:
		return "INTR", true
	case KindFailEntry:
		return "FAIL_ENTRY", true
	case KindInternalError:
		return "INTERNAL_ERROR", true
	case KindOther:
		return "OTHER", true
	}
	return "", false
}

// String is the kind's name as reports print it.
func (k Kind) String() string {
	if n, ok := kindName(k); ok {
		return n
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Kinds lists every kind in order.
func Kinds() []Kind {
	ks := make([]Kind, numKinds)
	for i := range ks {
		ks[i] = Kind(i)
	}
	return ks
}

// KindOf classifies a kvm_run.exit_reason (KVM_EXIT_*).
func KindOf(kvmExitReason uint32) Kind {
	switch kvmExitReason {
	case kvm.ExitMMIO:
		return KindMMIO
	case kvm.ExitHypercall:
		return KindHypercall
	case kvm.ExitSystemEvent:
		return KindSystemEvent
	case kvm.ExitIntr:
		return KindIntr
	case kvm.ExitFailEntry:
		return KindFailEntry
	case kvm.ExitInternalError:
		return KindInternalError
	}
	return KindOther
}

// SystemEventName names a kvm_run.system_event.type (KVM_SYSTEM_EVENT_* in
// include/uapi/linux/kvm.h).
func SystemEventName(typ uint32) string {
	switch typ {
	case kvm.SystemEventShutdown:
		return "SHUTDOWN"
	case kvm.SystemEventReset:
		return "RESET"
	case kvm.SystemEventCrash:
		return "CRASH"
	case kvm.SystemEventWakeup:
		return "WAKEUP"
	case kvm.SystemEventSuspend:
		return "SUSPEND"
	case kvm.SystemEventSEVTerm:
		return "SEV_TERM"
	case kvm.SystemEventTDXFatal:
		return "TDX_FATAL"
	}
	return fmt.Sprintf("TYPE_%d", typ)
}

// Key identifies a (kind, sub-key) pair registered in a Schema. It is a
// small index, so Recorder.Record is an array access.
type Key uint16

// MaxKeys bounds the keys of a Schema (each costs every recorder ~350 bytes).
const MaxKeys = 1024

// NumBuckets is the number of log2 histogram buckets per key. Bucket 0
// counts 0 ns; bucket i >= 1 counts durations d with 2^(i-1) <= d < 2^i ns;
// the last bucket also takes everything longer (2^38 ns is about 4.6 min).
const NumBuckets = 40

// BucketUpperNS is the exclusive upper bound of bucket i in nanoseconds
// (math.MaxUint64 for the last, open bucket).
func BucketUpperNS(i int) uint64 {
	if i < 0 {
		return 0
	}
	if i >= NumBuckets-1 {
		return math.MaxUint64
	}
	return 1 << uint(i)
}

// bucketOf is the bucket of a duration in nanoseconds.
func bucketOf(ns uint64) int {
	b := bits.Len64(ns)
	if b >= NumBuckets {
		b = NumBuckets - 1
	}
	return b
}

// KeyInfo describes a registered key.
type KeyInfo struct {
	Key  Key
	Kind Kind
	// Sub is the sub-key ("" for the kind's bare key).
	Sub string
	// Name is how reports and metrics label the key: "MMIO/uart", or
	// the kind alone for a bare key ("INTR").
	Name string
}

// Schema is the set of keys that recorders count. Register every sub-key
// (devices, PSCI functions, system event types) before creating the first
// recorder: NewRecorder freezes the schema, so the keys are fixed and
// every recorder is one flat array.
type Schema struct {
	mu     sync.Mutex
	frozen bool
	keys   []KeyInfo
	index  map[kindSub]Key
}

type kindSub struct {
	kind Kind
	sub  string
}

// ErrSchemaFrozen is returned by Register after NewRecorder was called.
var ErrSchemaFrozen = errors.New("exits: schema is frozen (a recorder exists)")

// NewSchema returns a schema holding the bare key of every kind; the bare
// key of kind k is Key(k).
func NewSchema() *Schema {
	s := &Schema{index: make(map[kindSub]Key)}
	for _, k := range Kinds() {
		s.keys = append(s.keys, KeyInfo{Key: Key(k), Kind: k, Name: k.String()})
		s.index[kindSub{k, ""}] = Key(k)
	}
	return s
}

// KindKey is the bare key of a kind (for exits without a sub-key). An
// invalid kind maps to KindOther's key.
func KindKey(k Kind) Key {
	if k >= numKinds {
		return Key(KindOther)
	}
	return Key(k)
}

// Register adds (kind, sub) and returns its key; registering the same pair
// twice returns the same key. It fails once a recorder exists, for an
// invalid kind, or past MaxKeys keys.
func (s *Schema) Register(kind Kind, sub string) (Key, error) {
	if kind >= numKinds {
		return 0, fmt.Errorf("exits: register %q: invalid kind %d", sub, kind)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if k, ok := s.index[kindSub{kind, sub}]; ok {
		return k, nil
	}
	if s.frozen {
		return 0, fmt.Errorf("register %s/%s: %w", kind, sub, ErrSchemaFrozen)
	}
	if len(s.keys) >= MaxKeys {
		return 0, fmt.Errorf("exits: register %s/%s: more than %d keys", kind, sub, MaxKeys)
	}
	k := Key(len(s.keys))
	s.keys = append(s.keys, KeyInfo{Key: k, Kind: kind, Sub: sub, Name: kind.String() + "/" + sub})
	s.index[kindSub{kind, sub}] = k
	return k, nil
}

// Lookup returns the key of (kind, sub) if registered.
func (s *Schema) Lookup(kind Kind, sub string) (Key, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.index[kindSub{kind, sub}]
	return k, ok
}

// Keys returns every registered key in key order.
func (s *Schema) Keys() []KeyInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]KeyInfo(nil), s.keys...)
}

// freeze fixes the key set and returns it; the slice is never appended to
// afterwards, so recorders may share it without the lock.
func (s *Schema) freeze() []KeyInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.frozen = true
	return s.keys[:len(s.keys):len(s.keys)]
}

// VCPUState is what a vCPU's goroutine is doing, for the vcpu_state metric.
type VCPUState uint32

// vCPU states.
const (
	// StateCreated: the vCPU exists and has not run yet.
	StateCreated VCPUState = iota
	// StateOff: powered off, waiting in userspace for a power-on (PSCI
	// CPU_ON).
	StateOff
	// StateRunning: inside KVM_RUN.
	StateRunning
	// StateStopped: the vCPU's loop has ended.
	StateStopped

	numVCPUStates
)

// vcpuStateNames lists the state names in state order.
func vcpuStateNames() [numVCPUStates]string {
	return [numVCPUStates]string{"created", "off", "running", "stopped"}
}

// String names the state as the metric's state label spells it.
func (s VCPUState) String() string {
	if s < numVCPUStates {
		return vcpuStateNames()[s]
	}
	return fmt.Sprintf("state%d", uint32(s))
}

// VCPUStates lists every state in order.
func VCPUStates() []VCPUState {
	ss := make([]VCPUState, numVCPUStates)
	for i := range ss {
		ss[i] = VCPUState(i)
	}
	return ss
}

// slot holds one key's numbers. Only the owning vCPU goroutine writes; the
// fields are atomics so that readers (a metrics scrape, the final report)
// may read concurrently without a lock and without a data race.
type slot struct {
	count   atomic.Uint64
	sum     atomic.Uint64
	min     atomic.Uint64
	max     atomic.Uint64
	buckets [NumBuckets]atomic.Uint64
}

// Recorder counts one vCPU's userspace exits. Record and SetState must only
// be called by the vCPU's own goroutine (the single writer); Snapshot and
// State may be called from anywhere at any time.
type Recorder struct {
	vcpu  int
	keys  []KeyInfo
	slots []slot
	state atomic.Uint32
}

// NewRecorder freezes the schema and returns a recorder for vCPU vcpu.
func (s *Schema) NewRecorder(vcpu int) *Recorder {
	keys := s.freeze()
	r := &Recorder{vcpu: vcpu, keys: keys, slots: make([]slot, len(keys))}
	for i := range r.slots {
		r.slots[i].min.Store(math.MaxUint64)
	}
	return r
}

// VCPU is the vCPU index the recorder was made for.
func (r *Recorder) VCPU() int { return r.vcpu }

// Record counts one exit of key k that took d to handle. It never
// allocates, never blocks and takes no lock; a key the schema does not know
// is counted as KindOther's bare key, a negative duration as zero.
//
// Each update is a plain load of the owner's own value followed by an
// atomic store: with a single writer no read-modify-write instruction is
// needed, and the stores make the values safe to read concurrently. A
// concurrent reader may see count and sum of the same exit a moment apart,
// which a scrape tolerates; the final report reads after the vCPU stopped.
func (r *Recorder) Record(k Key, d time.Duration) {
	if int(k) >= len(r.slots) {
		k = Key(KindOther)
		if int(k) >= len(r.slots) {
			return
		}
	}
	var ns uint64
	if d > 0 {
		ns = uint64(d)
	}
	s := &r.slots[k]
	s.count.Store(s.count.Load() + 1)
	s.sum.Store(s.sum.Load() + ns)
	if ns < s.min.Load() {
		s.min.Store(ns)
	}
	if ns > s.max.Load() {
		s.max.Store(ns)
	}
	b := &s.buckets[bucketOf(ns)]
	b.Store(b.Load() + 1)
}

// SetState records what the vCPU goroutine is doing now.
func (r *Recorder) SetState(st VCPUState) { r.state.Store(uint32(st)) }

// State is the last state set.
func (r *Recorder) State() VCPUState { return VCPUState(r.state.Load()) }

// KeyStats are one key's numbers at a point in time.
type KeyStats struct {
	KeyInfo
	Count uint64
	// SumNS, MinNS, MaxNS: total, shortest and longest handling time.
	SumNS, MinNS, MaxNS uint64
	// Buckets is the log2 histogram of handling times (see NumBuckets).
	Buckets [NumBuckets]uint64
}

// MeanNS is the mean handling time (0 without exits).
func (k KeyStats) MeanNS() uint64 {
	if k.Count == 0 {
		return 0
	}
	return k.SumNS / k.Count
}

// RecorderSnapshot is a copy of a recorder's numbers.
type RecorderSnapshot struct {
	VCPU  int
	State VCPUState
	// Keys holds every key with at least one exit, in key order.
	Keys []KeyStats
}

// Snapshot copies the recorder's numbers. It allocates; call it from
// readers, not from the hot path.
func (r *Recorder) Snapshot() RecorderSnapshot {
	snap := RecorderSnapshot{VCPU: r.vcpu, State: r.State()}
	for i := range r.slots {
		s := &r.slots[i]
		n := s.count.Load()
		if n == 0 {
			continue
		}
		ks := KeyStats{
			KeyInfo: r.keys[i],
			Count:   n,
			SumNS:   s.sum.Load(),
			MinNS:   s.min.Load(),
			MaxNS:   s.max.Load(),
		}
		if ks.MinNS == math.MaxUint64 { // count seen before min was stored
			ks.MinNS = 0
		}
		for j := range s.buckets {
			ks.Buckets[j] = s.buckets[j].Load()
		}
		snap.Keys = append(snap.Keys, ks)
	}
	return snap
}
