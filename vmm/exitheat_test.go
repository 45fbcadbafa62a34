package vmm

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/mvm-dev/mvm/runsummary"
)

// TestExitHeatConserves: however the exits are spread over time and
// vCPUs, every exit lands in exactly one bucket of its vCPU, the bucket
// holds its time (counted from the heat map's origin whatever origin its
// vCPU's offsets count from), and the number of buckets stays bounded.
func TestExitHeatConserves(t *testing.T) {
	origin := time.Now()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, span := range []time.Duration{time.Microsecond, 50 * time.Millisecond, 3 * time.Second, 10 * time.Minute} {
		const ncpu = 5
		h := newExitHeat(origin, ncpu)
		// Each vCPU's own origin: created after the VM's, 0-4 ms apart.
		var shift [ncpu]time.Duration
		for id := range ncpu {
			shift[id] = time.Duration(id) * time.Millisecond
			h.setOrigin(id, origin.Add(shift[id]))
		}
		var offs [ncpu][]time.Duration
		for i := 0; i < 2000; i++ {
			id := rng.IntN(ncpu)
			off := time.Duration(rng.Int64N(int64(span)))
			offs[id] = append(offs[id], off)
			h.add(id, off-shift[id])
		}
		got := h.result()
		if got == nil {
			t.Fatalf("span %v: no heat map", span)
		}
		if got.BucketNS < int64(heatFirstWidth) || len(got.Counts) != ncpu {
			t.Fatalf("span %v: bucket %d ns, %d rows", span, got.BucketNS, len(got.Counts))
		}
		for id := range ncpu {
			row := got.Counts[id]
			if len(row) > runsummary.HeatBuckets {
				t.Errorf("span %v vCPU %d: %d buckets, more than %d", span, id, len(row), runsummary.HeatBuckets)
			}
			want := make([]uint64, len(row))
			for _, off := range offs[id] {
				b := int(int64(off) / got.BucketNS)
				if b >= len(row) {
					t.Fatalf("span %v vCPU %d: exit at %v is past the last bucket", span, id, off)
				}
				want[b]++
			}
			for b := range row {
				if row[b] != want[b] {
					t.Errorf("span %v vCPU %d bucket %d: %d exits, want %d", span, id, b, row[b], want[b])
				}
			}
		}
		// The buckets are as fine as the bound allows: half the width
		// would not have held the last exit.
		if got.BucketNS > int64(heatFirstWidth) && int64(span) < got.BucketNS/2*runsummary.HeatBuckets/2 {
			t.Errorf("span %v: bucket width %v is coarser than needed", span, time.Duration(got.BucketNS))
		}
	}
}

func TestExitHeatEmptyAndOutOfRange(t *testing.T) {
	origin := time.Now()
	h := newExitHeat(origin, 2)
	if h.result() != nil {
		t.Error("a heat map without exits")
	}
	h.setOrigin(2, origin)
	h.add(-1, 0)
	h.add(2, 0)
	if h.result() != nil {
		t.Error("exits of vCPUs that do not exist were counted")
	}
	h.add(1, -time.Second) // before the origin: first bucket
	got := h.result()
	if got == nil || got.Counts[1][0] != 1 || got.Counts[0][0] != 0 {
		t.Errorf("heat %+v", got)
	}
	var nilHeat *exitHeat
	nilHeat.setOrigin(0, origin)
	nilHeat.add(0, 0)
	if nilHeat.result() != nil {
		t.Error("nil recorder produced a map")
	}
}
