package vmm

import (
	"time"

	"github.com/mvm-dev/mvm/runsummary"
)

// The exit heat map: every vCPU's KVM_RUN returns counted in time buckets
// from the VMM start, so a report can draw when each vCPU exited, without
// keeping one record per exit.

// heatFirstWidth is a run's first bucket width; rows widen from it to fit
// the run in runsummary.HeatBuckets buckets.
const heatFirstWidth = time.Millisecond

// exitHeat is the recorder: each row is written only by its vCPU's thread
// and read after every vCPU loop has stopped.
type exitHeat struct {
	origin time.Time
	rows   []heatRow
}

type heatRow struct {
	// shift is the row's vCPU origin after the heat map's: add takes
	// offsets from the vCPU's origin (vcpu.Handler.Exited), so an exit
	// is counted without building a time.Time.
	shift  time.Duration
	width  time.Duration
	counts [runsummary.HeatBuckets]uint64
}

func newExitHeat(origin time.Time, ncpu int) *exitHeat {
	h := &exitHeat{origin: origin, rows: make([]heatRow, ncpu)}
	for i := range h.rows {
		h.rows[i].width = heatFirstWidth
	}
	return h
}

// setOrigin says where vCPU id's offsets (add) count from; until it is
// called, from the heat map's origin.
func (h *exitHeat) setOrigin(id int, origin time.Time) {
	if h == nil || id < 0 || id >= len(h.rows) {
		return
	}
	h.rows[id].shift = origin.Sub(h.origin)
}

// add counts one exit of vCPU id at offset off from its origin
// (setOrigin).
func (h *exitHeat) add(id int, off time.Duration) {
	if h == nil || id < 0 || id >= len(h.rows) {
		return
	}
	h.rows[id].add(off + h.rows[id].shift)
}

func (r *heatRow) add(off time.Duration) {
	if off < 0 {
		off = 0
	}
	for off >= r.width*runsummary.HeatBuckets {
		r.widen()
	}
	r.counts[off/r.width]++
}

// widen doubles the bucket width, summing each pair of buckets.
func (r *heatRow) widen() {
	for i := 0; i < runsummary.HeatBuckets/2; i++ {
		r.counts[i] = r.counts[2*i] + r.counts[2*i+1]
	}
	clear(r.counts[runsummary.HeatBuckets/2:])
	r.width *= 2
}

// result brings every row to the widest row's bucket width and trims the
// empty tail; nil when nothing was counted.
func (h *exitHeat) result() *runsummary.ExitHeat {
	if h == nil || len(h.rows) == 0 {
		return nil
	}
	rows := make([]heatRow, len(h.rows))
	copy(rows, h.rows)
	width := heatFirstWidth
	for _, r := range rows {
		width = max(width, r.width)
	}
	used := 0
	for i := range rows {
		for rows[i].width < width {
			rows[i].widen()
		}
		for b, c := range rows[i].counts {
			if c > 0 {
				used = max(used, b+1)
			}
		}
	}
	if used == 0 {
		return nil
	}
	out := &runsummary.ExitHeat{BucketNS: int64(width), Counts: make([][]uint64, len(rows))}
	for i := range rows {
		out.Counts[i] = append([]uint64(nil), rows[i].counts[:used]...)
	}
	return out
}
