//go:build linux

package vcpu

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

func TestMailboxPostTake(t *testing.T) {
	var b mailbox
	if _, ok := b.take(); ok {
		t.Fatal("take from an empty mailbox succeeded")
	}
	if !b.post(PowerOnRequest{Entry: 1, Context: 2}) {
		t.Fatal("first post refused")
	}
	if b.post(PowerOnRequest{Entry: 3}) {
		t.Fatal("second post accepted while the first waits")
	}
	r, ok := b.take()
	if !ok || r.Entry != 1 || r.Context != 2 {
		t.Fatalf("take = %+v, %v; want the first request", r, ok)
	}
	if !b.post(PowerOnRequest{Entry: 4}) {
		t.Fatal("post after take refused")
	}
	b.drop()
	if _, ok := b.take(); ok {
		t.Fatal("take after drop succeeded")
	}
	b.drop() // dropping nothing is fine
}

// TestMailboxWait wakes a thread sleeping in futex_wait from another
// goroutine, many times: a lost wake-up would hang the test (go test's
// timeout reports it).
func TestMailboxWait(t *testing.T) {
	{
		var b mailbox
		stop := make(chan struct{})
		const n = 2000
		got := make(chan uint64, n)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			for {
				r, ok := b.wait(stop)
				if !ok {
					return
				}
				got <- r.Entry
			}
		}()
		for i := uint64(1); i <= n; i++ {
			for !b.post(PowerOnRequest{Entry: i}) {
				runtime.Gosched()
			}
			if i%3 == 0 {
				// Sometimes let the waiter fall asleep first.
				time.Sleep(10 * time.Microsecond)
			}
		}
		for i := uint64(1); i <= n; i++ {
			if e := <-got; e != i {
				t.Fatalf("request %d arrived as %d", i, e)
			}
		}
		close(stop)
		b.wake()
		wg.Wait()
	}
}

// TestMailboxStop: a sleeping waiter returns when stop is closed and it is
// woken (what Kick does), not only on a request.
func TestMailboxStop(t *testing.T) {
	var b mailbox
	stop := make(chan struct{})
	done := make(chan bool)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		_, ok := b.wait(stop)
		done <- ok
	}()
	time.Sleep(20 * time.Millisecond)
	close(stop)
	b.wake()
	select {
	case ok := <-done:
		if ok {
			t.Fatal("wait reported a request after stop")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waiter did not return after stop and wake")
	}
}
