//go:build linux

package bpfagg

import (
	"os"
	"testing"

	"github.com/mvm-dev/mvm/exits/tracepoint"
)

// TestDetachReattach: the programs of --profile=light come off and go back
// on the events without reloading, a second Reattach is refused, and
// ClearPending forgets each thread's pairing times (slot and thread map
// alike) while keeping what the thread counted.
func TestDetachReattach(t *testing.T) {
	root, err := tracepoint.ProbeEnv(tracepoint.SystemEnv(true))
	if err != nil {
		t.Skipf("tracepoints: %v", err)
	}
	c, err := New(Config{Tracefs: root, TGID: os.Getpid(), NoBreakdown: true})
	if err != nil {
		t.Skipf("BPF: %v", err)
	}
	defer c.Close()
	progs := append(c.progs[:0:0], c.progs...)
	if len(c.links) != len(progs) || len(progs) < 2 {
		t.Fatalf("%d links for %d programs after New", len(c.links), len(progs))
	}
	if err := c.Detach(); err != nil {
		t.Fatal(err)
	}
	if len(c.links) != 0 {
		t.Fatalf("%d links after Detach", len(c.links))
	}
	// Pending pairings in a slot and in the thread map (a slot taken by
	// another thread sends its twin there).
	busy := threadState{Entry: 11, Exit: 22, HasGuest: 1, Guest: 5, Entries: 7, OPhase: 1, ORow: rowValue{Count: 3}}
	const tid = 4242
	if err := c.putState(tid, busy); err != nil {
		t.Fatal(err)
	}
	if err := c.putState(tid+uint32(c.nSlots), busy); err != nil {
		t.Fatal(err)
	}
	if err := c.ClearPending(); err != nil {
		t.Fatal(err)
	}
	seen := 0
	if err := c.eachState(func(id uint32, st threadState) {
		if id != tid && id != tid+uint32(c.nSlots) {
			return
		}
		seen++
		if st.Entry != 0 || st.Exit != 0 || st.HasGuest != 0 {
			t.Errorf("thread %d: entry %d exit %d has-guest %d after ClearPending, want 0", id, st.Entry, st.Exit, st.HasGuest)
		}
		if st.Entries != 7 || st.ORow.Count != 3 || st.OPhase != 1 {
			t.Errorf("thread %d: counts lost: %+v", id, st)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if seen != 2 {
		t.Errorf("%d of the 2 thread states found", seen)
	}
	if err := c.Reattach(); err != nil {
		t.Fatal(err)
	}
	if len(c.links) != len(progs) {
		t.Errorf("%d links after Reattach, want %d", len(c.links), len(progs))
	}
	for i, p := range c.progs {
		if p != progs[i] {
			t.Errorf("program %d reloaded", i)
		}
	}
	if err := c.Reattach(); err == nil {
		t.Error("a second Reattach was accepted")
	}
}
