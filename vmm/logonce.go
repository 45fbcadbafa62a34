package vmm

import "sync"

// logOnce decides which of a guest's repeated oddities (accesses to an
// unmapped address, unknown SMCCC function IDs) are logged: each distinct
// key the first time, up to max keys. A hostile guest that walks the whole
// address space then costs one more line and no memory per address.
type logOnce struct {
	mu   sync.Mutex
	max  int
	seen map[uint64]struct{}
	full bool
}

func newLogOnce(max int) *logOnce { return &logOnce{max: max, seen: map[uint64]struct{}{}} }

// first reports whether key is new and should be logged, and whether this
// call filled the set (log that nothing further will be).
func (l *logOnce) first(key uint64) (log, filled bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.seen[key]; ok || l.full {
		return false, false
	}
	l.seen[key] = struct{}{}
	if len(l.seen) == l.max {
		l.full = true
		return true, true
	}
	return true, false
}

// maxLoggedKeys is how many distinct unmapped addresses (and, separately,
// unknown SMCCC function IDs) a run logs.
const maxLoggedKeys = 16
