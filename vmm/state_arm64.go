//go:build linux && arm64

package vmm

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/mvm-dev/mvm/vcpu"
)

// This file is the report of a running VM's state that `kill -USR1` asks
// for (cmd/mvm): where each vCPU is, for a guest that seems stuck.

// WriteState writes one line per vCPU to w: its state as mvm's accounting
// sees it, its PSCI state (PSCI in mvm), how often and how long ago its
// KVM_RUN returned to mvm (exits KVM handles itself are not seen here)
// and, for a vCPU that is running, its guest PC and
// exception level, read on its own thread (vcpu.Inspect). A vCPU that does
// not answer within wait is reported as such: it is stuck in mvm's handler
// of an exit, not in the guest. The guest sees one more exit per vCPU.
func (m *VM) WriteState(w io.Writer, wait time.Duration) {
	n := len(m.cpus)
	snaps := make([]vcpu.Snapshot, n)
	answered := make([]bool, n)
	asked := make([]bool, n)
	// The counts and the last exit from before the inspection's own exit.
	last := make([]time.Time, n)
	exits := make([]uint64, n)
	states := make([]string, n)
	for i, c := range m.cpus {
		last[i] = c.v.LastExitTime()
		rec := m.prof.rec[i].Snapshot()
		for _, k := range rec.Keys {
			exits[i] += k.Count
		}
		states[i] = rec.State.String()
	}
	var mu sync.Mutex
	// One slot per vCPU, so a late answer (after the wait) never blocks
	// its vCPU thread, and nothing is left waiting for one that never
	// comes.
	replies := make(chan struct{}, n)
	pending := 0
	for i, c := range m.cpus {
		if asked[i] = c.v.Inspect(func(s vcpu.Snapshot) {
			mu.Lock()
			snaps[i], answered[i] = s, true
			mu.Unlock()
			replies <- struct{}{}
		}); asked[i] {
			pending++
		}
	}
	timeout := time.NewTimer(wait)
	defer timeout.Stop()
collect:
	for ; pending > 0; pending-- {
		select {
		case <-replies:
		case <-timeout.C:
			break collect
		}
	}
	var powers []string
	if m.pm != nil {
		for _, st := range m.pm.Snapshot().States {
			powers = append(powers, st.String())
		}
	}
	now := time.Now()
	mu.Lock()
	defer mu.Unlock()
	fmt.Fprintf(w, "mvm: state of %d vCPUs (kill -USR1):\n", n)
	for i := range m.cpus {
		line := fmt.Sprintf("  vCPU %d: %s", i, states[i])
		if i < len(powers) {
			line += ", PSCI " + powers[i]
		}
		line += fmt.Sprintf(", %d exits to mvm", exits[i])
		if !last[i].IsZero() {
			line += fmt.Sprintf(", last exit %s ago", now.Sub(last[i]).Round(time.Millisecond))
		}
		switch {
		case !asked[i]:
			line += ", parked (no guest position)"
		case !answered[i]:
			line += fmt.Sprintf(", no answer within %s (in mvm's handler of an exit?)", wait)
		case snaps[i].Err != nil:
			line += fmt.Sprintf(", registers: %v", snaps[i].Err)
		default:
			line += fmt.Sprintf(", pc %#x, %s", snaps[i].PC, exceptionLevel(snaps[i].PSTATE))
		}
		fmt.Fprintln(w, line)
	}
}
