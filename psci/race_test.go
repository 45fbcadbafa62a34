package psci

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Many vCPUs race CPU_ON for one OFF target (kvm-unit-tests arm/psci
// "cpu-on" does this in a guest). Exactly one call may succeed, and the
// start it yields must carry that caller's entry point and context_id.
func TestConcurrentCPUOn(t *testing.T) {
	const callers = 64
	rounds := 200
	if testing.Short() {
		rounds = 20
	}
	modes := []struct {
		name        string
		pendingAsOn bool
		startRacing bool // the target calls Started while the others still race
	}{
		{"spec: others see ON_PENDING", false, false},
		{"spec with Started racing: ON_PENDING or ALREADY_ON", false, true},
		{"PendingAsOn (KVM): others see ALREADY_ON", true, false},
		{"PendingAsOn with Started racing", true, true},
	}
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			const target = callers
			boot := make([]int, callers)
			for k := range boot {
				boot[k] = k
			}
			m := newMachine(t, callers+1, func(c *Config) {
				c.BootCPUs = boot
				c.PendingAsOn = mode.pendingAsOn
				c.ValidEntry = inRAM
			})
			for round := range rounds {
				results := make([]Result, callers)
				errs := make([]error, callers)
				start := make(chan struct{})
				var wg sync.WaitGroup
				for k := range callers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						fid := FnCPUOn64
						if k%2 == 1 {
							fid = FnCPUOn
						}
						<-start
						results[k], errs[k] = m.Handle(k, fid, aff(target), entryOK+uint64(k)*4, uint64(k))
					}()
				}
				startedRacing := make(chan error, 1)
				allDone := make(chan struct{})
				if mode.startRacing {
					go func() {
						<-start
						for {
							if st, _ := m.State(target); st == StateOnPending {
								startedRacing <- m.Started(target)
								return
							}
							select {
							case <-allDone:
								// The callers may all have finished between the
								// state check above and this select: look once
								// more now that nothing else changes the state.
								if st, _ := m.State(target); st == StateOnPending {
									startedRacing <- m.Started(target)
								} else {
									startedRacing <- fmt.Errorf("target never became ON_PENDING (state %v)", st)
								}
								return
							default:
								runtime.Gosched()
							}
						}
					}()
				}
				close(start)
				wg.Wait()
				close(allDone)
				if mode.startRacing {
					if err := <-startedRacing; err != nil {
						t.Fatalf("round %d: Started: %v", round, err)
					}
				}

				successes, pending, already := 0, 0, 0
				for k, r := range results {
					if errs[k] != nil {
						t.Fatalf("round %d: caller %d: %v", round, k, errs[k])
					}
					switch r.X0 {
					case Success.X0():
						successes++
						if r.Action != ActionStartCPU || r.Target != target ||
							r.Entry != entryOK+uint64(k)*4 || r.ContextID != uint64(k) {
							t.Fatalf("round %d: caller %d won with %+v", round, k, r)
						}
					case OnPending.X0():
						pending++
					case AlreadyOn.X0():
						already++
					default:
						t.Fatalf("round %d: caller %d got %v", round, k, Status(int32(r.X0)))
					}
					if r.X0 != Success.X0() && r.Action != ActionNone {
						t.Fatalf("round %d: loser %d got action %v", round, k, r.Action)
					}
				}
				if successes != 1 {
					t.Fatalf("round %d: %d SUCCESS, want exactly 1", round, successes)
				}
				switch {
				case mode.pendingAsOn && already != callers-1:
					t.Fatalf("round %d: PendingAsOn: %d ALREADY_ON, %d ON_PENDING", round, already, pending)
				case !mode.pendingAsOn && !mode.startRacing && pending != callers-1:
					t.Fatalf("round %d: %d ON_PENDING, %d ALREADY_ON; want all ON_PENDING", round, pending, already)
				}

				// Ready the next round: the target runs, then powers off.
				if !mode.startRacing {
					mustStarted(t, m, target)
				}
				if r := call(t, m, target, FnCPUOff, 0, 0, 0); r.Action != ActionCPUOff {
					t.Fatalf("round %d: CPU_OFF: %+v", round, r)
				}
			}
		})
	}
}

// TestVMMProtocol runs the protocol the package documentation prescribes,
// with one goroutine per vCPU and a one-slot start mailbox each, while the
// vCPUs randomly turn each other on, turn themselves off and query
// AFFINITY_INFO. A correct VMM must never see an error, a full mailbox, a
// failed Started, or an answer the states do not allow; at the end each
// vCPU's state must match its goroutine (ON: running; ON_PENDING: a start
// waits in its mailbox; OFF: parked with an empty mailbox).
func TestVMMProtocol(t *testing.T) {
	const n = 8
	budget := int64(200_000)
	if testing.Short() {
		budget = 20_000
	}
	m := newMachine(t, n, func(c *Config) { c.ValidEntry = inRAM })
	mail := make([]chan Result, n)
	for k := range mail {
		mail[k] = make(chan Result, 1)
	}
	var (
		ops       atomic.Int64
		starts    atomic.Int64
		done      = make(chan struct{})
		wg        sync.WaitGroup
		failMu    sync.Mutex
		failures  []string
		onAtExit  [n]bool
		fail      func(format string, args ...any)
		terminate sync.Once
	)
	fail = func(format string, args ...any) {
		failMu.Lock()
		if len(failures) < 20 {
			failures = append(failures, fmt.Sprintf(format, args...))
		}
		failMu.Unlock()
		terminate.Do(func() { close(done) })
	}
	for k := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(k), 42))
			on := k == 0
			defer func() { onAtExit[k] = on }()
			for {
				if !on {
					select {
					case r := <-mail[k]:
						if r.Target != k || r.Action != ActionStartCPU {
							fail("vCPU %d: mailbox got %+v", k, r)
							return
						}
						if err := m.Started(k); err != nil {
							fail("vCPU %d: Started: %v", k, err)
							return
						}
						on = true
					case <-done:
						return
					}
				}
				select {
				case <-done:
					return
				default:
				}
				if ops.Add(1) >= budget {
					terminate.Do(func() { close(done) })
					return
				}
				switch op := rng.IntN(10); {
				case op < 4:
					tgt := rng.IntN(n)
					r, err := m.Handle(k, FnCPUOn64, aff(tgt), entryOK, uint64(k))
					if err != nil {
						fail("vCPU %d: CPU_ON: %v", k, err)
						return
					}
					switch r.X0 {
					case Success.X0():
						starts.Add(1)
						select {
						case mail[r.Target] <- r:
						default:
							fail("vCPU %d: mailbox of %d full", k, r.Target)
							return
						}
					case AlreadyOn.X0(), OnPending.X0():
						if tgt == k && r.X0 != AlreadyOn.X0() {
							fail("vCPU %d: CPU_ON(self) = %#x", k, r.X0)
						}
					default:
						fail("vCPU %d: CPU_ON(%d) = %#x", k, tgt, r.X0)
						return
					}
				case op < 5 && k != 0: // vCPU 0 stays on so the run ends
					r, err := m.Handle(k, FnCPUOff, 0, 0, 0)
					if err != nil || r.Action != ActionCPUOff {
						fail("vCPU %d: CPU_OFF: %+v %v", k, r, err)
						return
					}
					on = false
				case op < 8:
					tgt := rng.IntN(n)
					r, err := m.Handle(k, FnAffinityInfo64, aff(tgt), 0, 0)
					if err != nil || r.X0 > uint64(StateOnPending) || (tgt == k && r.X0 != uint64(StateOn)) {
						fail("vCPU %d: AFFINITY_INFO(%d) = %#x, %v", k, tgt, r.X0, err)
						return
					}
				default:
					if r, err := m.Handle(k, FnPSCIVersion, 0, 0, 0); err != nil || r.X0 != uint64(Version) {
						fail("vCPU %d: VERSION = %#x, %v", k, r.X0, err)
						return
					}
				}
				// Metrics readers run alongside.
				if rng.IntN(64) == 0 {
					if s := m.Snapshot(); s.On+s.Off+s.OnPending != n {
						fail("snapshot counts %+v", s)
						return
					}
				}
			}
		}()
	}
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		terminate.Do(func() { close(done) })
		fail("timed out")
	}
	wg.Wait()
	for _, f := range failures {
		t.Error(f)
	}
	if starts.Load() == 0 {
		t.Fatal("no CPU_ON ever succeeded: the simulation tested nothing")
	}
	for k, st := range m.Snapshot().States {
		ok := false
		switch st {
		case StateOn:
			ok = onAtExit[k] && len(mail[k]) == 0
		case StateOnPending:
			ok = !onAtExit[k] && len(mail[k]) == 1
		case StateOff:
			ok = !onAtExit[k] && len(mail[k]) == 0
		}
		if !ok {
			t.Errorf("vCPU %d: state %v, goroutine on=%v, mailbox %d", k, st, onAtExit[k], len(mail[k]))
		}
	}
	t.Logf("%d operations, %d successful CPU_ON", ops.Load(), starts.Load())
}
