package userspace

import (
	"errors"
	"testing"
	"time"
)

func TestSchemaRegister(t *testing.T) {
	s := NewSchema()
	for _, k := range Kinds() {
		if KindKey(k) != Key(k) {
			t.Fatalf("bare key of %v = %d", k, KindKey(k))
		}
		if got, ok := s.Lookup(k, ""); !ok || got != Key(k) {
			t.Fatalf("lookup bare %v = %d, %v", k, got, ok)
		}
	}
	uart, err := s.Register(KindMMIO, "uart")
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.Register(KindMMIO, "uart")
	if err != nil || again != uart {
		t.Fatalf("re-register = %d, %v; want %d", again, err, uart)
	}
	cpuOn, _ := s.Register(KindHypercall, "CPU_ON")
	if cpuOn == uart {
		t.Fatal("distinct pairs share a key")
	}
	if _, err := s.Register(Kind(200), "x"); err == nil {
		t.Error("invalid kind accepted")
	}
	if KindKey(Kind(200)) != Key(KindOther) {
		t.Error("invalid kind's bare key is not OTHER")
	}
	keys := s.Keys()
	if got := keys[uart].Name; got != "MMIO/uart" {
		t.Errorf("name %q", got)
	}
	if got := keys[KindIntr].Name; got != "INTR" {
		t.Errorf("bare name %q", got)
	}

	s.NewRecorder(0)
	if _, err := s.Register(KindMMIO, "virtio"); !errors.Is(err, ErrSchemaFrozen) {
		t.Errorf("register after NewRecorder: %v", err)
	}
	if k, err := s.Register(KindMMIO, "uart"); err != nil || k != uart {
		t.Errorf("re-register known pair after freeze: %d, %v", k, err)
	}
}

func TestSchemaMaxKeys(t *testing.T) {
	s := NewSchema()
	var err error
	for i := 0; i < MaxKeys && err == nil; i++ {
		_, err = s.Register(KindMMIO, string(rune('a'+i%26))+time.Duration(i).String())
	}
	if err == nil {
		t.Fatal("registered more than MaxKeys keys")
	}
	if len(s.Keys()) != MaxKeys {
		t.Fatalf("%d keys", len(s.Keys()))
	}
}

func TestRecorder(t *testing.T) {
	s := NewSchema()
	uart, _ := s.Register(KindMMIO, "uart")
	off, _ := s.Register(KindHypercall, "SYSTEM_OFF")
	r := s.NewRecorder(3)
	if r.VCPU() != 3 || r.State() != StateCreated {
		t.Fatalf("new recorder: vcpu %d state %v", r.VCPU(), r.State())
	}
	r.SetState(StateRunning)
	r.Record(uart, 100*time.Nanosecond)
	r.Record(uart, 300*time.Nanosecond)
	r.Record(uart, 0)
	r.Record(off, 5*time.Microsecond)
	r.Record(KindKey(KindIntr), -time.Second) // negative counts as 0
	r.Record(Key(60000), time.Nanosecond)     // unknown key: OTHER
	snap := r.Snapshot()
	if snap.VCPU != 3 || snap.State != StateRunning {
		t.Fatalf("snapshot vcpu %d state %v", snap.VCPU, snap.State)
	}
	got := map[string]KeyStats{}
	for _, k := range snap.Keys {
		got[k.Name] = k
	}
	if len(got) != 4 {
		t.Fatalf("keys %v", got)
	}
	u := got["MMIO/uart"]
	if u.Count != 3 || u.SumNS != 400 || u.MinNS != 0 || u.MaxNS != 300 || u.MeanNS() != 133 {
		t.Errorf("uart %+v", u)
	}
	// 0 ns -> bucket 0; 100 ns (bit length 7) -> bucket 7; 300 ns -> 9.
	if u.Buckets[0] != 1 || u.Buckets[7] != 1 || u.Buckets[9] != 1 {
		t.Errorf("uart buckets %v", u.Buckets)
	}
	if o := got["HYPERCALL/SYSTEM_OFF"]; o.Count != 1 || o.SumNS != 5000 || o.Kind != KindHypercall || o.Sub != "SYSTEM_OFF" {
		t.Errorf("hypercall %+v", o)
	}
	if i := got["INTR"]; i.Count != 1 || i.SumNS != 0 {
		t.Errorf("intr %+v", i)
	}
	if o := got["OTHER"]; o.Count != 1 || o.SumNS != 1 {
		t.Errorf("other %+v", o)
	}
	if (KeyStats{}).MeanNS() != 0 {
		t.Error("mean of nothing")
	}
}

func TestBuckets(t *testing.T) {
	for _, tc := range []struct {
		ns     uint64
		bucket int
	}{{0, 0}, {1, 1}, {2, 2}, {3, 2}, {4, 3}, {1023, 10}, {1024, 11}, {1 << 38, 39}, {1 << 62, 39}, {^uint64(0), 39}} {
		if b := bucketOf(tc.ns); b != tc.bucket {
			t.Errorf("bucketOf(%d) = %d, want %d", tc.ns, b, tc.bucket)
		}
		if b := bucketOf(tc.ns); b < NumBuckets-1 && tc.ns >= BucketUpperNS(b) {
			t.Errorf("%d ns is not below bucket %d's bound %d", tc.ns, b, BucketUpperNS(b))
		}
	}
	if BucketUpperNS(-1) != 0 || BucketUpperNS(NumBuckets-1) != ^uint64(0) {
		t.Error("bucket bounds at the edges")
	}
}

// Record and SetState, the run loop's per-exit path, do not allocate. (The
// concurrent writers and scrapes run under -race in exits/metrics.)
func TestRecordDoesNotAllocate(t *testing.T) {
	s := NewSchema()
	k, _ := s.Register(KindMMIO, "uart")
	r := s.NewRecorder(0)
	if a := testing.AllocsPerRun(1000, func() {
		r.SetState(StateOff)
		r.Record(k, 1234)
		r.SetState(StateRunning)
	}); a != 0 {
		t.Fatalf("Record allocates %v times per call", a)
	}
}

// BenchmarkRecord measures the hot-path cost of counting one exit.
func BenchmarkRecord(b *testing.B) {
	s := NewSchema()
	keys := make([]Key, 8)
	for i := range keys {
		keys[i], _ = s.Register(KindMMIO, string(rune('a'+i)))
	}
	r := s.NewRecorder(0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.Record(keys[i&7], time.Duration(i&0xffff))
	}
}

func TestKindsAndNames(t *testing.T) {
	want := map[uint32]Kind{3: KindHypercall, 6: KindMMIO, 9: KindFailEntry, 10: KindIntr, 17: KindInternalError, 24: KindSystemEvent, 2: KindOther, 5: KindOther}
	for r, k := range want {
		if KindOf(r) != k {
			t.Errorf("KindOf(%d) = %v, want %v", r, KindOf(r), k)
		}
	}
	if Kind(99).String() != "Kind(99)" || VCPUState(99).String() != "state99" {
		t.Error("out-of-range names")
	}
	for typ, name := range map[uint32]string{1: "SHUTDOWN", 2: "RESET", 3: "CRASH", 5: "SUSPEND", 42: "TYPE_42"} {
		if SystemEventName(typ) != name {
			t.Errorf("SystemEventName(%d) = %q", typ, SystemEventName(typ))
		}
	}
	if len(VCPUStates()) != int(numVCPUStates) || VCPUStates()[StateRunning].String() != "running" {
		t.Error("vCPU states")
	}
}
