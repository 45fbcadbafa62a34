//go:build linux

package virtio

import (
	"errors"
	"sync"
)

// workers runs a device's per-queue goroutines and waits for them on Stop.
type workers struct {
	wg sync.WaitGroup
}

// serve runs drain each time q's kick fires (and once at start, for buffers
// made available before DRIVER_OK), until the kick is interrupted. drain
// returns whether to raise the interrupt; an ErrBroken from it faults the
// device and ends the worker.
func (w *workers) serve(env *Env, qi int, drain func(q *Queue) (bool, error)) {
	q, kick := env.Queues[qi], env.Kicks[qi]
	if q == nil {
		return
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for !env.stopping.Load() {
			used, err := drain(q)
			if used && q.WantsInterrupt() {
				env.Interrupt()
			}
			if err != nil {
				env.Fault(err)
				return
			}
			// A driver that keeps the ring full is served a queue's worth
			// at a time, so a stop is seen between rounds.
			if q.Pending() || q.ArmNotify() {
				continue
			}
			if kick.Wait() != nil {
				return
			}
		}
	}()
}

func (w *workers) wait() { w.wg.Wait() }

// drainChains pops up to a queue's worth of available chains, handing each
// to handle, which returns the bytes it wrote; a malformed chain is
// returned with 0 bytes and reported through bad. It reports whether any
// chain was used. handle must not keep the chain or its buffer lists: the
// next one reuses them (Queue.popNext).
func drainChains(q *Queue, bad func(error), handle func(*Chain) uint32) (bool, error) {
	used := false
	for range q.Size() {
		c, err := q.popNext()
		if errors.Is(err, ErrBroken) {
			return used, err
		}
		if c == nil {
			return used, nil
		}
		n := uint32(0)
		if err != nil {
			bad(err)
		} else {
			n = handle(c)
		}
		q.Push(c.Head, n)
		used = true
	}
	return used, nil
}
