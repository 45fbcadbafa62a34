//go:build linux

package virtio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Event is an eventfd a goroutine can wait on without holding an OS thread
// (the runtime's poller watches it) and that another goroutine — or KVM,
// through an ioeventfd or irqfd — can signal.
type Event struct {
	f *os.File
}

// NewEvent creates a non-blocking eventfd.
func NewEvent() (*Event, error) {
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	return &Event{f: os.NewFile(uintptr(fd), "eventfd")}, nil
}

// Fd is the eventfd, to register with KVM.
func (e *Event) Fd() int { return int(e.f.Fd()) }

// Signal adds one to the counter, waking a waiter.
func (e *Event) Signal() {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], 1)
	// EAGAIN only when the counter is about to overflow: a wakeup is
	// pending anyway.
	e.f.Write(b[:])
}

// errInterrupted is what Wait returns after Interrupt.
var errInterrupted = errors.New("interrupted")

// Wait blocks until the event is signalled (and clears it) or Interrupt is
// called.
func (e *Event) Wait() error {
	var b [8]byte
	_, err := e.f.Read(b[:])
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return errInterrupted
	}
	return err
}

// Interrupt makes current and future Waits return errInterrupted until
// Resume.
func (e *Event) Interrupt() { e.f.SetReadDeadline(time.Unix(1, 0)) }

// Resume undoes Interrupt.
func (e *Event) Resume() { e.f.SetReadDeadline(time.Time{}) }

// Close releases the eventfd.
func (e *Event) Close() error { return e.f.Close() }
