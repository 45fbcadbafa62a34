package kvmstat

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"
)

// The KVM binary statistics file (Documentation/virt/kvm/api.rst, section
// "KVM_GET_STATS_FD"; structs and flags in include/uapi/linux/kvm.h) is read
// with pread:
//
//	struct kvm_stats_header { u32 flags, name_size, num_desc, id_offset,
//	                          desc_offset, data_offset; }
//	id string:   name_size bytes at id_offset ("kvm-<pid>[/vcpu-<n>]")
//	descriptors: num_desc x { u32 flags; s16 exponent; u16 size; u32 offset;
//	                          u32 bucket_size; char name[name_size]; }
//	             at desc_offset
//	data:        each stat is `size` u64 values (CPU byte order) at
//	             data_offset + offset
//
// The descriptors never change for the life of the file descriptor, so they
// are read once; only the data block is read for every snapshot.

// Stat flag fields (KVM_STATS_{TYPE,UNIT,BASE}_{SHIFT,MASK} in
// include/uapi/linux/kvm.h): type in bits 0-3, unit in bits 4-7, base in
// bits 8-11.
const (
	statsTypeShift = 0
	statsUnitShift = 4
	statsBaseShift = 8
	statsFieldMask = 0xF
)

// StatType is a statistic's type (KVM_STATS_TYPE_*).
type StatType uint8

// Stat types.
const (
	// StatCumulative only ever increases; reports show its delta.
	StatCumulative StatType = 0
	// StatInstant is an instantaneous value.
	StatInstant StatType = 1
	// StatPeak is the peak value reached.
	StatPeak StatType = 2
	// StatLinearHist is a linear histogram: size buckets of bucket_size.
	StatLinearHist StatType = 3
	// StatLogHist is a log2 histogram: size buckets.
	StatLogHist StatType = 4
)

// String implements fmt.Stringer.
func (t StatType) String() string {
	switch t {
	case StatCumulative:
		return "cumulative"
	case StatInstant:
		return "instant"
	case StatPeak:
		return "peak"
	case StatLinearHist:
		return "linear_hist"
	case StatLogHist:
		return "log_hist"
	}
	return "type" + strconv.Itoa(int(t))
}

// StatUnit is a statistic's unit (KVM_STATS_UNIT_*).
type StatUnit uint8

// Stat units.
const (
	UnitNone    StatUnit = 0
	UnitBytes   StatUnit = 1
	UnitSeconds StatUnit = 2
	UnitCycles  StatUnit = 3
	UnitBoolean StatUnit = 4
)

// String implements fmt.Stringer.
func (u StatUnit) String() string {
	switch u {
	case UnitNone:
		return "none"
	case UnitBytes:
		return "bytes"
	case UnitSeconds:
		return "seconds"
	case UnitCycles:
		return "cycles"
	case UnitBoolean:
		return "boolean"
	}
	return "unit" + strconv.Itoa(int(u))
}

// StatBase is the base the exponent applies to (KVM_STATS_BASE_*).
type StatBase uint8

// Stat bases.
const (
	BasePow10 StatBase = 0
	BasePow2  StatBase = 1
)

// String implements fmt.Stringer.
func (b StatBase) String() string {
	switch b {
	case BasePow10:
		return "pow10"
	case BasePow2:
		return "pow2"
	}
	return "base" + strconv.Itoa(int(b))
}

// StatsHeader is struct kvm_stats_header.
type StatsHeader struct {
	Flags, NameSize, NumDesc, IDOffset, DescOffset, DataOffset uint32
}

// StatDesc is one struct kvm_stats_desc.
type StatDesc struct {
	Name       string
	Flags      uint32
	Exponent   int16
	Size       uint16
	Offset     uint32
	BucketSize uint32
}

// Type is the statistic's type.
func (d StatDesc) Type() StatType { return StatType(d.Flags >> statsTypeShift & statsFieldMask) }

// Unit is the statistic's unit.
func (d StatDesc) Unit() StatUnit { return StatUnit(d.Flags >> statsUnitShift & statsFieldMask) }

// Base is the base of the statistic's exponent.
func (d StatDesc) Base() StatBase { return StatBase(d.Flags >> statsBaseShift & statsFieldMask) }

// IsHistogram reports a linear or log histogram.
func (d StatDesc) IsHistogram() bool {
	t := d.Type()
	return t == StatLinearHist || t == StatLogHist
}

// IsCumulative reports whether a delta over an interval is meaningful
// (cumulative counters and histograms only grow).
func (d StatDesc) IsCumulative() bool { return d.Type() == StatCumulative || d.IsHistogram() }

// Scale is the factor turning a raw value into the unit: base^exponent
// (halt_wait_ns: seconds, 10^-9).
func (d StatDesc) Scale() float64 {
	if d.Base() == BasePow2 {
		return math.Ldexp(1, int(d.Exponent))
	}
	return math.Pow(10, float64(d.Exponent))
}

// Format renders one raw value with its unit: "1.5ms", "4KiB", "17",
// "1234 cycles", "true".
func (d StatDesc) Format(v uint64) string {
	x := float64(v) * d.Scale()
	switch d.Unit() {
	case UnitSeconds:
		if x < math.MaxInt64/1e9 {
			return time.Duration(math.Round(x * 1e9)).String()
		}
		return strconv.FormatFloat(x, 'g', 6, 64) + "s"
	case UnitBytes:
		return formatBytes(x)
	case UnitCycles:
		return formatNumber(v, x, d.Exponent) + " cycles"
	case UnitBoolean:
		return strconv.FormatBool(v != 0)
	}
	return formatNumber(v, x, d.Exponent)
}

func formatNumber(raw uint64, scaled float64, exp int16) string {
	if exp == 0 {
		return strconv.FormatUint(raw, 10)
	}
	return strconv.FormatFloat(scaled, 'g', 6, 64)
}

func formatBytes(x float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	i := 0
	for x >= 1024 && i < len(units)-1 {
		x /= 1024
		i++
	}
	if x == math.Trunc(x) {
		return strconv.FormatFloat(x, 'f', 0, 64) + units[i]
	}
	return strconv.FormatFloat(x, 'f', 1, 64) + units[i]
}

// BucketRange is the range [lo, hi) of histogram bucket i in raw units (hi
// is +Inf for the last bucket). LINEAR_HIST bucket i covers
// [i*bucket_size, (i+1)*bucket_size); LOG_HIST bucket 0 covers [0, 1) and
// bucket i >= 1 covers [2^(i-1), 2^i) (api.rst, KVM_GET_STATS_FD).
func (d StatDesc) BucketRange(i int) (lo, hi float64) {
	last := i >= int(d.Size)-1
	switch d.Type() {
	case StatLinearHist:
		bs := float64(d.BucketSize)
		lo = float64(i) * bs
		hi = lo + bs
	case StatLogHist:
		if i > 0 {
			lo = math.Ldexp(1, i-1)
		}
		hi = math.Ldexp(1, i)
	default:
		return 0, math.Inf(1)
	}
	if last {
		hi = math.Inf(1)
	}
	return lo, hi
}

// Limits that keep a corrupt or hostile stats file from making the parser
// allocate without bound. Real files: name_size 48, under 100 descriptors,
// a few KiB of data.
const (
	maxStatsNameSize  = 4096
	maxStatsDescBytes = 4 << 20
	maxStatsDataBytes = 4 << 20
	statsHeaderSize   = 24
	statsDescFixed    = 16
)

// ErrStatsFormat wraps every error about a malformed stats file.
var ErrStatsFormat = errors.New("malformed KVM stats file")

// StatsLayout is the parsed header, id and descriptors of a stats file.
type StatsLayout struct {
	Header StatsHeader
	// ID is the file's id string, "kvm-<pid>" or "kvm-<pid>/vcpu-<n>".
	ID    string
	Descs []StatDesc
	// DataSize is the number of bytes of the data block the descriptors
	// cover, what Read reads.
	DataSize int
	byName   map[string]int
}

// ParseStats reads the header, id and descriptors of a stats file.
func ParseStats(r io.ReaderAt) (*StatsLayout, error) {
	var hb [statsHeaderSize]byte
	if err := readFull(r, hb[:], 0); err != nil {
		return nil, fmt.Errorf("read stats header: %w", err)
	}
	ne := binary.NativeEndian
	h := StatsHeader{
		Flags:      ne.Uint32(hb[0:]),
		NameSize:   ne.Uint32(hb[4:]),
		NumDesc:    ne.Uint32(hb[8:]),
		IDOffset:   ne.Uint32(hb[12:]),
		DescOffset: ne.Uint32(hb[16:]),
		DataOffset: ne.Uint32(hb[20:]),
	}
	if h.NameSize == 0 || h.NameSize > maxStatsNameSize {
		return nil, fmt.Errorf("%w: name_size %d", ErrStatsFormat, h.NameSize)
	}
	descSize := uint64(statsDescFixed) + uint64(h.NameSize)
	total := descSize * uint64(h.NumDesc)
	if total > maxStatsDescBytes {
		return nil, fmt.Errorf("%w: %d descriptors of %d bytes", ErrStatsFormat, h.NumDesc, descSize)
	}
	l := &StatsLayout{Header: h, byName: make(map[string]int, h.NumDesc)}

	id := make([]byte, h.NameSize)
	if err := readFull(r, id, int64(h.IDOffset)); err != nil {
		return nil, fmt.Errorf("read stats id at %d: %w", h.IDOffset, err)
	}
	l.ID = cString(id)

	block := make([]byte, total)
	if err := readFull(r, block, int64(h.DescOffset)); err != nil {
		return nil, fmt.Errorf("read %d stats descriptors at %d: %w", h.NumDesc, h.DescOffset, err)
	}
	l.Descs = make([]StatDesc, 0, h.NumDesc)
	for i := uint64(0); i < uint64(h.NumDesc); i++ {
		b := block[i*descSize : (i+1)*descSize]
		d := StatDesc{
			Flags:      ne.Uint32(b[0:]),
			Exponent:   int16(ne.Uint16(b[4:])),
			Size:       ne.Uint16(b[6:]),
			Offset:     ne.Uint32(b[8:]),
			BucketSize: ne.Uint32(b[12:]),
			Name:       cString(b[statsDescFixed:]),
		}
		if d.Size == 0 {
			return nil, fmt.Errorf("%w: stat %q has size 0", ErrStatsFormat, d.Name)
		}
		end := uint64(d.Offset) + 8*uint64(d.Size)
		if end > maxStatsDataBytes {
			return nil, fmt.Errorf("%w: stat %q ends at data byte %d", ErrStatsFormat, d.Name, end)
		}
		if int(end) > l.DataSize {
			l.DataSize = int(end)
		}
		if _, dup := l.byName[d.Name]; !dup {
			l.byName[d.Name] = len(l.Descs)
		}
		l.Descs = append(l.Descs, d)
	}
	return l, nil
}

// Index returns the descriptor index of a stat by name.
func (l *StatsLayout) Index(name string) (int, bool) {
	i, ok := l.byName[name]
	return i, ok
}

// Read takes a snapshot: one read of the data block.
func (l *StatsLayout) Read(r io.ReaderAt) (*StatsSnapshot, error) {
	data := make([]byte, l.DataSize)
	if err := readFull(r, data, int64(l.Header.DataOffset)); err != nil {
		return nil, fmt.Errorf("read %d bytes of stats data at %d: %w", l.DataSize, l.Header.DataOffset, err)
	}
	return l.Decode(data)
}

// Decode makes a snapshot from a data block already read.
func (l *StatsLayout) Decode(data []byte) (*StatsSnapshot, error) {
	if len(data) < l.DataSize {
		return nil, fmt.Errorf("%w: data block is %d bytes, descriptors need %d", ErrStatsFormat, len(data), l.DataSize)
	}
	s := &StatsSnapshot{Layout: l, values: make([][]uint64, len(l.Descs))}
	ne := binary.NativeEndian
	for i, d := range l.Descs {
		vs := make([]uint64, d.Size)
		for j := range vs {
			off := int(d.Offset) + 8*j
			vs[j] = ne.Uint64(data[off:])
		}
		s.values[i] = vs
	}
	return s, nil
}

// StatsSnapshot is the values of every stat of a layout at one moment.
type StatsSnapshot struct {
	Layout *StatsLayout
	values [][]uint64
}

// Values returns the values of descriptor i (len = its size).
func (s *StatsSnapshot) Values(i int) []uint64 {
	if i < 0 || i >= len(s.values) {
		return nil
	}
	return s.values[i]
}

// Get returns the values of a stat by name.
func (s *StatsSnapshot) Get(name string) ([]uint64, bool) {
	i, ok := s.Layout.Index(name)
	if !ok {
		return nil, false
	}
	return s.values[i], true
}

// Value returns the first (for scalars: the only) value of a stat.
func (s *StatsSnapshot) Value(name string) (uint64, bool) {
	vs, ok := s.Get(name)
	if !ok || len(vs) == 0 {
		return 0, false
	}
	return vs[0], true
}

// StatDelta is one stat over an interval.
type StatDelta struct {
	Desc StatDesc
	// Values is after-before for cumulative stats and histograms and the
	// after value for instant and peak stats. A cumulative value that went
	// down (a counter reset) reports its after value.
	Values []uint64
	// After is the value at the end of the interval.
	After []uint64
}

// Value is the first (for scalars: the only) delta value.
func (d StatDelta) Value() uint64 {
	if len(d.Values) == 0 {
		return 0
	}
	return d.Values[0]
}

// Sum is the total of all values (a histogram's sample count).
func (d StatDelta) Sum() uint64 {
	var t uint64
	for _, v := range d.Values {
		t += v
	}
	return t
}

// Delta computes every stat's change from before to after. Both snapshots
// must come from the same layout (the same stats file).
func Delta(before, after *StatsSnapshot) ([]StatDelta, error) {
	if before == nil || after == nil {
		return nil, errors.New("kvmstat: stats delta needs two snapshots")
	}
	if before.Layout != after.Layout && !sameLayout(before.Layout, after.Layout) {
		return nil, errors.New("kvmstat: stats delta of snapshots with different layouts")
	}
	out := make([]StatDelta, len(after.Layout.Descs))
	for i, d := range after.Layout.Descs {
		a, b := after.values[i], before.values[i]
		vs := make([]uint64, len(a))
		for j := range a {
			vs[j] = a[j]
			if d.IsCumulative() && a[j] >= b[j] {
				vs[j] = a[j] - b[j]
			}
		}
		out[i] = StatDelta{Desc: d, Values: vs, After: append([]uint64(nil), a...)}
	}
	return out, nil
}

func sameLayout(a, b *StatsLayout) bool {
	if a == nil || b == nil || len(a.Descs) != len(b.Descs) {
		return false
	}
	for i := range a.Descs {
		if a.Descs[i] != b.Descs[i] {
			return false
		}
	}
	return true
}

// readFull reads len(p) bytes at off; a short read is an error.
func readFull(r io.ReaderAt, p []byte, off int64) error {
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: short read, %d of %d bytes at offset %d", ErrStatsFormat, n, len(p), off)
	}
	return err
}

func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// Labeled is a stats snapshot with the vcpu label it is reported under
// ("0", "1", ... or "vm").
type Labeled struct {
	VCPU     string
	Snapshot *StatsSnapshot
}

// Flags composes a descriptor's flags word from its type, unit and base.
func Flags(t StatType, u StatUnit, b StatBase) uint32 {
	return uint32(t)<<statsTypeShift | uint32(u)<<statsUnitShift | uint32(b)<<statsBaseShift
}

// SnapshotOf makes a snapshot from descriptors and their values (one slice
// of Size values per descriptor), for callers that have the numbers from
// somewhere other than a stats file, and for tests.
func SnapshotOf(descs []StatDesc, values [][]uint64) (*StatsSnapshot, error) {
	if len(descs) != len(values) {
		return nil, fmt.Errorf("%w: %d descriptors, %d value sets", ErrStatsFormat, len(descs), len(values))
	}
	l := &StatsLayout{Descs: descs, byName: make(map[string]int, len(descs))}
	s := &StatsSnapshot{Layout: l, values: make([][]uint64, len(descs))}
	for i, d := range descs {
		if len(values[i]) != int(d.Size) {
			return nil, fmt.Errorf("%w: stat %q has size %d and %d values", ErrStatsFormat, d.Name, d.Size, len(values[i]))
		}
		if _, dup := l.byName[d.Name]; !dup {
			l.byName[d.Name] = i
		}
		s.values[i] = append([]uint64(nil), values[i]...)
	}
	return s, nil
}
