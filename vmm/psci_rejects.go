package vmm

import (
	"cmp"
	"slices"
	"sync"

	"github.com/mvm-dev/mvm/psci"
	"github.com/mvm-dev/mvm/runsummary"
)

// psciRejects counts refused PSCI calls by function and result. The keys
// are bounded (psci.Name has at most 64 unknown names, and only a few
// functions can refuse, with two codes), so a guest cannot grow it.
// Refused calls are not a hot path: one mutex.
type psciRejects struct {
	mu sync.Mutex
	n  map[psciRejectKey]uint64
}

type psciRejectKey struct {
	fn     string
	status psci.Status
}

func newPSCIRejects() *psciRejects { return &psciRejects{n: map[psciRejectKey]uint64{}} }

// add counts one call of fid refused with s and reports whether it is the
// first of its function and result (log it).
func (p *psciRejects) add(fid uint32, s psci.Status) (first bool) {
	k := psciRejectKey{psci.Name(fid), s}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n[k]++
	return p.n[k] == 1
}

// counts returns the counts so far, sorted by function and result.
func (p *psciRejects) counts() []runsummary.PSCIRejection {
	p.mu.Lock()
	out := make([]runsummary.PSCIRejection, 0, len(p.n))
	for k, n := range p.n {
		out = append(out, runsummary.PSCIRejection{Function: k.fn, Result: k.status.String(), Count: n})
	}
	p.mu.Unlock()
	slices.SortFunc(out, func(a, b runsummary.PSCIRejection) int {
		return cmp.Or(cmp.Compare(a.Function, b.Function), cmp.Compare(a.Result, b.Result))
	})
	return out
}

// totalRejected sums counts.
func totalRejected(rs []runsummary.PSCIRejection) (n uint64) {
	for _, r := range rs {
		n += r.Count
	}
	return n
}
