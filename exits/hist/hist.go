// Package hist is a bounded log-linear histogram of durations in
// nanoseconds: every power of two is split into 16 equal sub-buckets, so a
// percentile read from it is within 1/32 (about 3%) of the true sample
// value, whatever the number of samples, in a fixed 4.3 KiB per histogram.
// It is what the exit profile's p50/p90/p99 come from: nothing stores the
// samples themselves.
package hist

import (
	"fmt"
	"math"
	"math/bits"
)

const (
	// subBits is log2 of the sub-buckets per power of two.
	subBits  = 4
	subCount = 1 << subBits
	// maxShift bounds the range: values of 2^(maxShift+subBits+1) ns (about
	// 137 s) and more share the last bucket (Max stays exact).
	maxShift = 32
	// NumBuckets is the number of counters of a histogram.
	NumBuckets = (maxShift+1)*subCount + subCount
)

// H is a histogram. The zero value is empty and ready to use. It is not
// safe for concurrent use; its owner serializes Add and reads.
type H struct {
	counts   [NumBuckets]uint64
	n        uint64
	sum      uint64
	min, max uint64
}

// index is the bucket of v: values below 16 have a bucket each; above,
// the bucket is the power of two (shift) and the 4 bits below the leading
// one.
func index(v uint64) int {
	if v < subCount {
		return int(v)
	}
	shift := bits.Len64(v) - 1 - subBits
	if shift > maxShift {
		return NumBuckets - 1
	}
	mant := int(v>>uint(shift)) & (subCount - 1)
	return (shift+1)*subCount + mant
}

// bounds is the range [lo, lo+width) of bucket i.
func bounds(i int) (lo, width uint64) {
	if i < subCount {
		return uint64(i), 1
	}
	shift := uint(i/subCount - 1)
	mant := uint64(i % subCount)
	return (subCount + mant) << shift, 1 << shift
}

// Add counts one sample.
func (h *H) Add(v uint64) {
	h.counts[index(v)]++
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.n++
	h.sum += v
}

// Merge adds o's samples into h.
func (h *H) Merge(o *H) {
	if o == nil || o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
}

// Count is the number of samples; Sum their total; Min and Max the
// exact extremes (0 when empty).
func (h *H) Count() uint64 { return h.n }

// Sum is the total of the samples.
func (h *H) Sum() uint64 { return h.sum }

// Min is the smallest sample (0 when empty).
func (h *H) Min() uint64 { return h.min }

// Max is the largest sample (0 when empty).
func (h *H) Max() uint64 { return h.max }

// Quantile returns the q-quantile (0 < q <= 1) in the nearest-rank sense:
// the value of the ceil(q*n)-th smallest sample, estimated as the middle
// of its bucket and clamped to [Min, Max]. 0 when empty.
func (h *H) Quantile(q float64) uint64 {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	var cum uint64
	for i, c := range h.counts {
		cum += c
		if cum >= rank {
			lo, w := bounds(i)
			v := lo + w/2
			if i == NumBuckets-1 {
				v = h.max
			}
			return min(max(v, h.min), h.max)
		}
	}
	return h.max
}

// Index is the bucket a value falls in (0 <= Index < NumBuckets), for a
// source that counts buckets itself (exits/bpfagg computes the same index
// in a BPF program and checks it against this one).
func Index(v uint64) int { return index(v) }

// FromBuckets builds a histogram from per-bucket counts (indices as
// Index; len(counts) <= NumBuckets) and the exact sum, minimum and maximum
// of the samples counted.
func FromBuckets(counts []uint64, sum, minV, maxV uint64) (*H, error) {
	if len(counts) > NumBuckets {
		return nil, fmt.Errorf("hist: %d buckets, at most %d", len(counts), NumBuckets)
	}
	h := &H{sum: sum, min: minV, max: maxV}
	for i, c := range counts {
		h.counts[i] = c
		h.n += c
	}
	if h.n == 0 {
		return &H{}, nil
	}
	return h, nil
}
