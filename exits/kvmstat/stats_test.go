package kvmstat

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/mvm-dev/mvm/exits"
)

// testStat describes one stat of a synthetic stats file.
type testStat struct {
	name   string
	flags  uint32
	exp    int16
	bucket uint32
	values []uint64
}

func statFlags(t StatType, u StatUnit, b StatBase) uint32 { return Flags(t, u, b) }

// buildStats lays out a stats file the way KVM does: header, id, the
// descriptors, then the data block; values are packed in descriptor order.
func buildStats(id string, nameSize int, stats []testStat) []byte {
	ne := binary.NativeEndian
	idOff := statsHeaderSize
	descOff := idOff + nameSize
	dataOff := descOff + len(stats)*(statsDescFixed+nameSize)
	var data []byte
	descs := make([]byte, 0, len(stats)*(statsDescFixed+nameSize))
	for _, s := range stats {
		d := make([]byte, statsDescFixed+nameSize)
		ne.PutUint32(d[0:], s.flags)
		ne.PutUint16(d[4:], uint16(s.exp))
		ne.PutUint16(d[6:], uint16(len(s.values)))
		ne.PutUint32(d[8:], uint32(len(data)))
		ne.PutUint32(d[12:], s.bucket)
		copy(d[statsDescFixed:], s.name)
		descs = append(descs, d...)
		for _, v := range s.values {
			data = ne.AppendUint64(data, v)
		}
	}
	out := make([]byte, statsHeaderSize)
	ne.PutUint32(out[4:], uint32(nameSize))
	ne.PutUint32(out[8:], uint32(len(stats)))
	ne.PutUint32(out[12:], uint32(idOff))
	ne.PutUint32(out[16:], uint32(descOff))
	ne.PutUint32(out[20:], uint32(dataOff))
	idb := make([]byte, nameSize)
	copy(idb, id)
	out = append(out, idb...)
	out = append(out, descs...)
	return append(out, data...)
}

func vcpuStats(exits, ioExits, waitNS uint64, hist []uint64) []testStat {
	return []testStat{
		{name: "exits", flags: statFlags(StatCumulative, UnitNone, BasePow10), values: []uint64{exits}},
		{name: "io_exits", flags: statFlags(StatCumulative, UnitNone, BasePow10), values: []uint64{ioExits}},
		{name: "halt_wait_ns", flags: statFlags(StatCumulative, UnitSeconds, BasePow10), exp: -9, values: []uint64{waitNS}},
		{name: "blocking", flags: statFlags(StatInstant, UnitBoolean, BasePow10), values: []uint64{1}},
		{name: "max_mmu_rmap_size", flags: statFlags(StatPeak, UnitNone, BasePow10), values: []uint64{exits / 2}},
		{name: "halt_wait_hist", flags: statFlags(StatLogHist, UnitSeconds, BasePow10), exp: -9, values: hist},
		{name: "pages", flags: statFlags(StatInstant, UnitBytes, BasePow2), exp: 12, values: []uint64{3}},
	}
}

func TestParseStats(t *testing.T) {
	blob := buildStats("kvm-123/vcpu-0", 48, vcpuStats(10, 4, 1500, []uint64{1, 2, 0, 5}))
	l, err := ParseStats(bytes.NewReader(blob))
	if err != nil {
		t.Fatal(err)
	}
	if l.ID != "kvm-123/vcpu-0" || l.Header.NameSize != 48 || len(l.Descs) != 7 {
		t.Fatalf("layout %+v", l)
	}
	if l.DataSize != 8*(6+4) {
		t.Errorf("data size %d", l.DataSize)
	}
	d := l.Descs[2]
	if d.Name != "halt_wait_ns" || d.Type() != StatCumulative || d.Unit() != UnitSeconds || d.Base() != BasePow10 || d.Exponent != -9 {
		t.Errorf("halt_wait_ns desc %+v", d)
	}
	if h := l.Descs[5]; h.Type() != StatLogHist || !h.IsHistogram() || h.Size != 4 || !h.IsCumulative() {
		t.Errorf("hist desc %+v", h)
	}
	snap, err := l.Read(bytes.NewReader(blob))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := snap.Value("io_exits"); !ok || v != 4 {
		t.Errorf("io_exits = %d, %v", v, ok)
	}
	if vs, ok := snap.Get("halt_wait_hist"); !ok || len(vs) != 4 || vs[3] != 5 {
		t.Errorf("hist = %v", vs)
	}
	if _, ok := snap.Value("nope"); ok {
		t.Error("unknown stat found")
	}
	if snap.Values(-1) != nil || snap.Values(99) != nil {
		t.Error("out-of-range Values")
	}
}

func TestStatsDelta(t *testing.T) {
	b1 := buildStats("kvm-1/vcpu-0", 48, vcpuStats(10, 4, 1500, []uint64{1, 2, 0, 5}))
	b2 := buildStats("kvm-1/vcpu-0", 48, vcpuStats(25, 9, 2_001_500, []uint64{1, 3, 4, 5}))
	l, err := ParseStats(bytes.NewReader(b1))
	if err != nil {
		t.Fatal(err)
	}
	s1, err := l.Read(bytes.NewReader(b1))
	if err != nil {
		t.Fatal(err)
	}
	s2, err := l.Read(bytes.NewReader(b2))
	if err != nil {
		t.Fatal(err)
	}
	ds, err := Delta(s1, s2)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]StatDelta{}
	for _, d := range ds {
		byName[d.Desc.Name] = d
	}
	if d := byName["exits"]; d.Value() != 15 || d.After[0] != 25 {
		t.Errorf("exits delta %+v", d)
	}
	if d := byName["io_exits"]; d.Value() != 5 {
		t.Errorf("io_exits delta %+v", d)
	}
	if d := byName["max_mmu_rmap_size"]; d.Value() != 12 { // peak: the after value
		t.Errorf("peak %+v", d)
	}
	if d := byName["blocking"]; d.Value() != 1 {
		t.Errorf("instant %+v", d)
	}
	if d := byName["halt_wait_hist"]; d.Sum() != 5 || d.Values[1] != 1 || d.Values[2] != 4 {
		t.Errorf("hist delta %+v", d)
	}
	if got := byName["halt_wait_ns"].Desc.Format(byName["halt_wait_ns"].Value()); got != "2ms" {
		t.Errorf("pretty halt_wait_ns = %q", got)
	}

	rows := Rows("0", ds)
	if len(rows) != 7 || rows[0].Name != "exits" || rows[0].Delta != 15 || rows[0].Value != 25 || rows[0].Source != exits.SourceKVMStats {
		t.Errorf("stat rows %+v", rows[0])
	}
	if rows[5].Delta != 5 || rows[5].Pretty != "5 samples" || len(rows[5].Buckets) != 4 || rows[5].Value != 13 {
		t.Errorf("hist row %+v", rows[5])
	}
	tot := TotalRows(append(rows, Rows("1", ds)...))
	for _, r := range tot {
		if r.Name == "exits" && (r.Delta != 30 || r.VCPU != exits.TotalVCPU || r.Pretty != "30") {
			t.Errorf("total exits %+v", r)
		}
		if r.Name == "halt_wait_ns" && r.Pretty != "4ms" {
			t.Errorf("total halt_wait_ns %+v", r)
		}
		if r.Name == "blocking" || r.Name == "max_mmu_rmap_size" {
			t.Errorf("non-cumulative stat %q summed", r.Name)
		}
		if r.Name == "halt_wait_hist" && r.Buckets[2] != 8 {
			t.Errorf("total hist %+v", r)
		}
	}

	// A counter that went down (a reset) reports its after value.
	s3, _ := l.Read(bytes.NewReader(b1))
	back, _ := Delta(s2, s3)
	if back[0].Value() != 10 {
		t.Errorf("decreasing counter delta %d", back[0].Value())
	}

	other, err := ParseStats(bytes.NewReader(buildStats("x", 48, vcpuStats(1, 1, 1, []uint64{1})[:2])))
	if err != nil {
		t.Fatal(err)
	}
	os, _ := other.Read(bytes.NewReader(buildStats("x", 48, vcpuStats(1, 1, 1, []uint64{1})[:2])))
	if _, err := Delta(s1, os); err == nil {
		t.Error("delta across layouts accepted")
	}
	if _, err := Delta(nil, s1); err == nil {
		t.Error("delta with nil accepted")
	}
	// Equal layouts parsed twice are compatible.
	l2, _ := ParseStats(bytes.NewReader(b2))
	s4, _ := l2.Read(bytes.NewReader(b2))
	if _, err := Delta(s1, s4); err != nil {
		t.Errorf("delta across equal layouts: %v", err)
	}
}

func TestStatFormat(t *testing.T) {
	for _, tc := range []struct {
		d    StatDesc
		v    uint64
		want string
	}{
		{StatDesc{Flags: statFlags(StatCumulative, UnitNone, BasePow10)}, 42, "42"},
		{StatDesc{Flags: statFlags(StatCumulative, UnitSeconds, BasePow10), Exponent: -9}, 1500, "1.5µs"},
		{StatDesc{Flags: statFlags(StatCumulative, UnitSeconds, BasePow10), Exponent: -6}, 2_000_000, "2s"},
		{StatDesc{Flags: statFlags(StatCumulative, UnitSeconds, BasePow10), Exponent: 3}, math.MaxUint64, "1.84467e+22s"},
		{StatDesc{Flags: statFlags(StatInstant, UnitBytes, BasePow2), Exponent: 12}, 3, "12KiB"},
		{StatDesc{Flags: statFlags(StatInstant, UnitBytes, BasePow10)}, 1536, "1.5KiB"},
		{StatDesc{Flags: statFlags(StatCumulative, UnitCycles, BasePow10)}, 7, "7 cycles"},
		{StatDesc{Flags: statFlags(StatInstant, UnitBoolean, BasePow10)}, 1, "true"},
		{StatDesc{Flags: statFlags(StatInstant, UnitNone, BasePow10), Exponent: 2}, 3, "300"},
		{StatDesc{Flags: statFlags(StatInstant, UnitNone, BasePow2), Exponent: -1}, 3, "1.5"},
	} {
		if got := tc.d.Format(tc.v); got != tc.want {
			t.Errorf("Format(%d) with %+v = %q, want %q", tc.v, tc.d, got, tc.want)
		}
	}
	for _, s := range []string{StatType(9).String(), StatUnit(9).String(), StatBase(9).String()} {
		if !strings.HasSuffix(s, "9") {
			t.Errorf("unknown enum name %q", s)
		}
	}
}

func TestBucketRange(t *testing.T) {
	lin := StatDesc{Flags: statFlags(StatLinearHist, UnitNone, BasePow10), Size: 4, BucketSize: 10}
	for i, want := range [][2]float64{{0, 10}, {10, 20}, {20, 30}, {30, math.Inf(1)}} {
		if lo, hi := lin.BucketRange(i); lo != want[0] || hi != want[1] {
			t.Errorf("linear bucket %d = [%v, %v)", i, lo, hi)
		}
	}
	lg := StatDesc{Flags: statFlags(StatLogHist, UnitNone, BasePow10), Size: 4}
	for i, want := range [][2]float64{{0, 1}, {1, 2}, {2, 4}, {4, math.Inf(1)}} {
		if lo, hi := lg.BucketRange(i); lo != want[0] || hi != want[1] {
			t.Errorf("log bucket %d = [%v, %v)", i, lo, hi)
		}
	}
	if lo, hi := (StatDesc{}).BucketRange(0); lo != 0 || !math.IsInf(hi, 1) {
		t.Error("scalar bucket range")
	}
}

func TestParseStatsErrors(t *testing.T) {
	good := buildStats("kvm-1", 48, vcpuStats(1, 1, 1, []uint64{1}))
	ne := binary.NativeEndian
	mutate := func(f func(b []byte)) []byte {
		b := bytes.Clone(good)
		f(b)
		return b
	}
	for name, blob := range map[string][]byte{
		"empty":          nil,
		"short header":   good[:10],
		"name size 0":    mutate(func(b []byte) { ne.PutUint32(b[4:], 0) }),
		"huge name size": mutate(func(b []byte) { ne.PutUint32(b[4:], 1<<20) }),
		"huge num_desc":  mutate(func(b []byte) { ne.PutUint32(b[8:], 1<<30) }),
		"id past end":    mutate(func(b []byte) { ne.PutUint32(b[12:], 1<<30) }),
		"descs past end": mutate(func(b []byte) { ne.PutUint32(b[16:], uint32(len(good))) }),
		"size 0":         mutate(func(b []byte) { ne.PutUint16(b[statsHeaderSize+48+6:], 0) }),
		"huge offset":    mutate(func(b []byte) { ne.PutUint32(b[statsHeaderSize+48+8:], 1<<31) }),
	} {
		if _, err := ParseStats(bytes.NewReader(blob)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
	// Data block shorter than the descriptors say.
	l, err := ParseStats(bytes.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Read(bytes.NewReader(good[:len(good)-8])); !errors.Is(err, ErrStatsFormat) {
		t.Errorf("short data: %v", err)
	}
	if _, err := l.Decode(make([]byte, 3)); err == nil {
		t.Error("short decode accepted")
	}
	if _, err := ParseStats(failingReader{}); err == nil || errors.Is(err, ErrStatsFormat) {
		t.Errorf("read error not passed through: %v", err)
	}
}

type failingReader struct{}

func (failingReader) ReadAt([]byte, int64) (int, error) { return 0, io.ErrClosedPipe }

// FuzzParseStats: no input may make the parser panic or allocate without
// bound; whatever parses must also read and delta.
func FuzzParseStats(f *testing.F) {
	f.Add(buildStats("kvm-1/vcpu-0", 48, vcpuStats(10, 4, 1500, []uint64{1, 2, 0, 5})))
	f.Add(buildStats("kvm-1", 8, []testStat{{name: "a", values: []uint64{1}}}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, blob []byte) {
		l, err := ParseStats(bytes.NewReader(blob))
		if err != nil {
			return
		}
		s, err := l.Read(bytes.NewReader(blob))
		if err != nil {
			return
		}
		ds, err := Delta(s, s)
		if err != nil {
			t.Fatalf("delta of a snapshot with itself: %v", err)
		}
		for _, r := range append(Rows("0", ds), TotalRows(Rows("0", ds))...) {
			_ = r.Pretty
		}
		for i, d := range l.Descs {
			_ = d.Format(s.Values(i)[0])
			d.BucketRange(int(d.Size))
		}
	})
}
