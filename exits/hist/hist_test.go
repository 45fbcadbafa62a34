package hist

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// oracle is the nearest-rank quantile of sorted samples.
func oracle(sorted []uint64, q float64) uint64 {
	r := int(math.Ceil(q * float64(len(sorted))))
	r = min(max(r, 1), len(sorted))
	return sorted[r-1]
}

// TestQuantilesAgainstSortedSamples: synthetic exit-latency traces (log-
// normal around 50 µs, a bimodal mix, tiny exact values, and heavy tails)
// against the sorted-sample oracle, within the histogram's error bound.
func TestQuantilesAgainstSortedSamples(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	traces := map[string]func() uint64{
		"lognormal": func() uint64 { return uint64(math.Exp(rng.NormFloat64()*1.2 + math.Log(50_000))) },
		"bimodal": func() uint64 {
			if rng.IntN(10) == 0 {
				return 2_000_000 + rng.Uint64N(500_000)
			}
			return 30_000 + rng.Uint64N(5_000)
		},
		"small":  func() uint64 { return rng.Uint64N(40) },
		"pareto": func() uint64 { return uint64(1000 / math.Pow(1-rng.Float64(), 1/1.1)) },
	}
	for name, gen := range traces {
		for _, n := range []int{1, 7, 100, 10_000, 200_000} {
			var h H
			samples := make([]uint64, n)
			for i := range samples {
				samples[i] = gen()
				h.Add(samples[i])
			}
			slices.Sort(samples)
			if h.Count() != uint64(n) || h.Min() != samples[0] || h.Max() != samples[n-1] {
				t.Fatalf("%s/%d: count %d min %d max %d", name, n, h.Count(), h.Min(), h.Max())
			}
			for _, q := range []float64{0.5, 0.9, 0.99, 0.999, 1} {
				got, want := h.Quantile(q), oracle(samples, q)
				// The estimate is the middle of the bucket holding
				// the sample: off by at most half a bucket, 1/32 of
				// the value (exact below 16).
				if diff := math.Abs(float64(got) - float64(want)); diff > float64(want)/32+0.5 {
					t.Errorf("%s n=%d q=%g: got %d, sorted samples say %d (off %.1f%%)", name, n, q, got, want, 100*diff/float64(want))
				}
			}
		}
	}
}

func TestMergeEqualsOneHistogram(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var a, b, all H
	for i := 0; i < 5000; i++ {
		v := rng.Uint64N(1 << 30)
		all.Add(v)
		if i%3 == 0 {
			a.Add(v)
		} else {
			b.Add(v)
		}
	}
	a.Merge(&b)
	a.Merge(nil)
	if a != all {
		t.Error("merged histogram differs from the one fed every sample")
	}
}

func TestBucketsCoverEveryValue(t *testing.T) {
	// Every value lands in a bucket whose bounds contain it, buckets are
	// contiguous, and huge values share the last one.
	prevEnd := uint64(0)
	for i := 0; i < NumBuckets-1; i++ {
		lo, w := bounds(i)
		if lo != prevEnd {
			t.Fatalf("bucket %d starts at %d, previous ended at %d", i, lo, prevEnd)
		}
		if index(lo) != i || index(lo+w-1) != i {
			t.Fatalf("bucket %d [%d,%d) maps back to %d/%d", i, lo, lo+w, index(lo), index(lo+w-1))
		}
		prevEnd = lo + w
	}
	for _, v := range []uint64{prevEnd, prevEnd * 5, math.MaxUint64} {
		if index(v) != NumBuckets-1 {
			t.Errorf("index(%d) = %d, want the last bucket", v, index(v))
		}
	}
	var h H
	h.Add(math.MaxUint64)
	h.Add(3)
	if h.Quantile(1) != math.MaxUint64 || h.Quantile(0.5) != 3 {
		t.Errorf("extremes: p100 %d p50 %d", h.Quantile(1), h.Quantile(0.5))
	}
	var empty H
	if empty.Quantile(0.5) != 0 {
		t.Error("empty histogram has a median")
	}
}

func BenchmarkAdd(b *testing.B) {
	var h H
	for i := 0; i < b.N; i++ {
		h.Add(uint64(i) * 7919)
	}
}

// TestFromBuckets: a histogram rebuilt from another's bucket counts, sum
// and extremes (as a source counting buckets elsewhere hands them over)
// gives the same percentiles; Index is the bucket Add uses.
func TestFromBuckets(t *testing.T) {
	var h H
	for i := uint64(1); i < 5000; i++ {
		h.Add(i * i % 7919 * 1000)
	}
	counts := make([]uint64, NumBuckets)
	for v := uint64(0); v < 1<<40; v = v*3 + 1 {
		if Index(v) != index(v) {
			t.Fatalf("Index(%d) = %d, index %d", v, Index(v), index(v))
		}
	}
	copy(counts, h.counts[:])
	g, err := FromBuckets(counts, h.Sum(), h.Min(), h.Max())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []float64{0.01, 0.5, 0.9, 0.99, 1} {
		if g.Quantile(q) != h.Quantile(q) {
			t.Errorf("q%v: rebuilt %d, original %d", q, g.Quantile(q), h.Quantile(q))
		}
	}
	if g.Count() != h.Count() {
		t.Errorf("count %d, want %d", g.Count(), h.Count())
	}
	if _, err := FromBuckets(make([]uint64, NumBuckets+1), 0, 0, 0); err == nil {
		t.Error("too many buckets accepted")
	}
}
