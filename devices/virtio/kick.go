//go:build linux

package virtio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Event is an eventfd that another goroutine — or KVM, through an
// ioeventfd or irqfd, or a vhost-user backend — can signal, and that one
// goroutine waits on.
//
// A waiter blocks in ppoll(2) on its own thread (an ordinary blocking
// system call, which the Go runtime accounts for), not in the runtime's
// netpoller: a queue notification then wakes the worker's thread
// directly, where through the netpoller it woke a thread parked in
// epoll_wait, which handed the worker goroutine to a P and woke another
// thread to look for work, and the worker, finding nothing more, went
// through the scheduler's search of every P before parking again. The
// eventfd is never registered with the netpoller, so a signal wakes nobody
// else either. What it saves on a virtio-blk request was not separable
// from the lab's scatter (docs/devices.md, "Request path" and
// BenchmarkBlkQEMU).
type Event struct {
	fd int
	// stop is a second, private eventfd: Interrupt signals it and it stays
	// readable until Resume, so every Wait in between returns at once. The
	// event's own fd (possibly shared with a backend) is never written to
	// for that.
	stop    int
	stopped atomic.Bool
	closed  atomic.Bool
}

// NewEvent creates a non-blocking eventfd.
func NewEvent() (*Event, error) {
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	stop, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	return &Event{fd: fd, stop: stop}, nil
}

// Fd is the eventfd, to register with KVM or hand to a backend.
func (e *Event) Fd() int { return e.fd }

// Signal adds one to the counter, waking a waiter.
func (e *Event) Signal() {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], 1)
	// EAGAIN only when the counter is about to overflow: a wakeup is
	// pending anyway.
	for {
		if _, err := unix.Write(e.fd, b[:]); err != unix.EINTR {
			return
		}
	}
}

// errInterrupted is what Wait returns after Interrupt.
var errInterrupted = errors.New("interrupted")

// Wait blocks until the event is signalled (and clears it) or Interrupt is
// called.
func (e *Event) Wait() error {
	var b [8]byte
	fds := []unix.PollFd{{Fd: int32(e.fd), Events: unix.POLLIN}, {Fd: int32(e.stop), Events: unix.POLLIN}}
	for {
		// Sleep until the event or the stop fd is readable, then take the
		// count. Polling first costs a system call when a signal is
		// already pending, but saves one in the usual case: a worker that
		// has drained its queue waits before the driver's next notify.
		fds[0].Revents, fds[1].Revents = 0, 0
		if _, err := unix.Poll(fds, -1); err != nil && err != unix.EINTR {
			return fmt.Errorf("eventfd poll: %w", err)
		}
		if e.stopped.Load() {
			return errInterrupted
		}
		_, err := unix.Read(e.fd, b[:])
		if err == nil {
			return nil
		}
		if err != unix.EAGAIN && err != unix.EINTR {
			return fmt.Errorf("eventfd read: %w", err)
		}
	}
}

// Interrupt makes current and future Waits return errInterrupted until
// Resume.
func (e *Event) Interrupt() {
	e.stopped.Store(true)
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], 1)
	unix.Write(e.stop, b[:])
}

// Resume undoes Interrupt. No Wait may be running.
func (e *Event) Resume() {
	var b [8]byte
	unix.Read(e.stop, b[:])
	e.stopped.Store(false)
}

// Close releases the eventfd. No Wait or Signal may be running or follow.
func (e *Event) Close() error {
	if e.closed.Swap(true) {
		return nil
	}
	unix.Close(e.stop)
	return unix.Close(e.fd)
}
