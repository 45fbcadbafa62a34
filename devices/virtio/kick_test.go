//go:build linux

package virtio

import (
	"encoding/binary"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// waitResult runs e.Wait in a goroutine and returns its result channel.
func waitResult(e *Event) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- e.Wait() }()
	return ch
}

func expectWait(t *testing.T, ch <-chan error, want error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		if err != want {
			t.Fatalf("%s: Wait returned %v, want %v", what, err, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: Wait did not return", what)
	}
}

func expectBlocked(t *testing.T, ch <-chan error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("%s: Wait returned %v while nothing was signalled", what, err)
	case <-time.After(50 * time.Millisecond):
	}
}

// TestEventWaitSignalInterrupt: a blocked Wait returns after a Signal
// (from this process, or written to the fd as KVM or a backend would) and
// after Interrupt; after Interrupt every Wait returns at once until Resume;
// Interrupt never writes to the event's own fd, which a backend may share.
func TestEventWaitSignalInterrupt(t *testing.T) {
	e, err := NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()

	ch := waitResult(e)
	expectBlocked(t, ch, "fresh event")
	e.Signal()
	expectWait(t, ch, nil, "after Signal")

	// Several signals before a Wait are one wake-up: the count is cleared.
	e.Signal()
	e.Signal()
	expectWait(t, waitResult(e), nil, "pending signals")
	ch = waitResult(e)
	expectBlocked(t, ch, "after the count was taken")

	// A write to the fd itself, as an ioeventfd makes.
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], 1)
	if _, err := unix.Write(e.Fd(), b[:]); err != nil {
		t.Fatal(err)
	}
	expectWait(t, ch, nil, "after a write to the fd")

	ch = waitResult(e)
	expectBlocked(t, ch, "before Interrupt")
	e.Interrupt()
	expectWait(t, ch, errInterrupted, "blocked Wait, then Interrupt")
	expectWait(t, waitResult(e), errInterrupted, "Wait after Interrupt")
	// The event's own counter is untouched by Interrupt.
	if _, err := unix.Read(e.Fd(), b[:]); err != unix.EAGAIN {
		t.Fatalf("read of the event's fd after Interrupt: %v, want EAGAIN (nothing written)", err)
	}

	e.Resume()
	ch = waitResult(e)
	expectBlocked(t, ch, "after Resume")
	e.Signal()
	expectWait(t, ch, nil, "Signal after Resume")
}
