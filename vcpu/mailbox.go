//go:build linux

package vcpu

import (
	"sync/atomic"
)

// mailbox holds a parked vCPU's next power-on request and wakes its thread.
//
// The parked thread sleeps in a futex on seq rather than in a channel
// receive: a goroutine locked to its OS thread that blocks on a channel is
// woken through the Go scheduler (the waker makes it runnable, some other
// thread finds it and hands its P to the locked thread, which is then woken
// in turn): two thread wake-ups in a row, each a host scheduling delay. A
// futex wake reaches the parked thread directly, as KVM's own CPU_ON wakes
// its target (rcuwait_wake_up), and the woken thread takes an idle P when
// it returns from the system call (vmm keeps GOMAXPROCS above the vCPU
// count so one is free).
type mailbox struct {
	// state: mailboxEmpty -> mailboxFilling (one poster won) -> mailboxFull
	// (req is written) -> mailboxEmpty (taken or dropped).
	state atomic.Uint32
	req   PowerOnRequest
	// seq is the futex word: bumped by every post and every kick, so a
	// sleeper that read it before the change never misses the change.
	seq atomic.Uint32
	// sleeping is set while the owner may be in (or about to enter)
	// futex_wait, so posters skip the FUTEX_WAKE system call otherwise.
	sleeping atomic.Uint32
}

const (
	mailboxEmpty uint32 = iota
	mailboxFilling
	mailboxFull
)

// post stores req for the owner and wakes it. It fails, changing nothing,
// if a request is already waiting.
func (b *mailbox) post(req PowerOnRequest) bool {
	if !b.state.CompareAndSwap(mailboxEmpty, mailboxFilling) {
		return false
	}
	b.req = req
	b.state.Store(mailboxFull)
	b.wake()
	return true
}

// wake makes a sleeping owner re-check its mailbox and stop channel.
func (b *mailbox) wake() {
	b.seq.Add(1)
	if b.sleeping.Load() != 0 {
		futexWake(&b.seq)
	}
}

// take returns the waiting request, if any, and empties the mailbox.
func (b *mailbox) take() (PowerOnRequest, bool) {
	if b.state.Load() != mailboxFull {
		return PowerOnRequest{}, false
	}
	r := b.req
	b.req = PowerOnRequest{}
	b.state.Store(mailboxEmpty)
	return r, true
}

// drop discards a waiting request.
func (b *mailbox) drop() {
	if b.state.CompareAndSwap(mailboxFull, mailboxFilling) {
		b.req = PowerOnRequest{}
		b.state.Store(mailboxEmpty)
	}
}

// wait blocks the calling thread until a request arrives (ok) or stop is
// closed (!ok), sleeping in futex_wait. Only the mailbox's owner may call
// it.
func (b *mailbox) wait(stop <-chan struct{}) (PowerOnRequest, bool) {
	for {
		seq := b.seq.Load()
		if r, ok := b.take(); ok {
			return r, true
		}
		if stopped(stop) {
			return PowerOnRequest{}, false
		}
		// A post or kick after the seq load above changes seq, and
		// futex_wait then returns at once (EAGAIN): no lost wake-up.
		b.sleeping.Store(1)
		futexWait(&b.seq, seq)
		b.sleeping.Store(0)
	}
}
