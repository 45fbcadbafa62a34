package vmm

import "testing"

// A guest that walks the address space gets each of the first max
// addresses logged once, one "filled" signal, then silence, and the set
// stops growing.
func TestLogOnceBounded(t *testing.T) {
	l := newLogOnce(4)
	logged, filled := 0, 0
	for round := 0; round < 3; round++ {
		for addr := uint64(0); addr < 1000; addr += 8 {
			log, f := l.first(addr)
			if log {
				logged++
			}
			if f {
				filled++
			}
		}
	}
	if logged != 4 || filled != 1 || len(l.seen) != 4 {
		t.Errorf("logged %d, filled %d, kept %d keys; want 4, 1, 4", logged, filled, len(l.seen))
	}
}
