//go:build linux

package vcpu

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/mvm-dev/mvm/internal/kvm"
)

// TestDecide feeds the run loop's own decision every kind of exit: the
// three a Handler answers, the interrupted KVM_RUN that re-enters, and the
// ones that stop the vCPU with a fault naming what happened.
func TestDecide(t *testing.T) {
	for _, tt := range []struct {
		name    string
		exit    Exit
		handled bool
		reenter bool
		what    string
		detail  []string // substrings of the fault's detail
	}{
		{name: "mmio", exit: Exit{Reason: kvm.ExitMMIO}, handled: true},
		{name: "hypercall", exit: Exit{Reason: kvm.ExitHypercall}, handled: true},
		{name: "system event", exit: Exit{Reason: kvm.ExitSystemEvent}, handled: true},
		{name: "EINTR (a kick)", exit: Exit{Reason: kvm.ExitIntr}, reenter: true},
		{name: "no instruction syndrome", exit: Exit{Reason: kvm.ExitMMIO, Errno: unix.ENOSYS},
			what: "KVM_RUN failed", detail: []string{"cannot emulate", "load/store pair"}},
		{name: "other KVM_RUN error", exit: Exit{Reason: kvm.ExitMMIO, Errno: unix.EFAULT},
			what: "KVM_RUN failed", detail: []string{unix.EFAULT.Error()}},
		{name: "failed entry", exit: Exit{Reason: kvm.ExitFailEntry, FailEntry: FailEntryExit{Reason: 0x51, CPU: 3}},
			what: "KVM_EXIT_FAIL_ENTRY", detail: []string{"0x51", "host CPU 3"}},
		{name: "internal error", exit: Exit{Reason: kvm.ExitInternalError, Internal: InternalExit{Suberror: 1, NData: 2, Data: [16]uint64{0xaa, 0xbb}}},
			what: "KVM_EXIT_INTERNAL_ERROR", detail: []string{"suberror 1", "0xaa", "0xbb"}},
		{name: "x86 port I/O", exit: Exit{Reason: kvm.ExitIO}, what: "unhandled exit", detail: []string{"exit reason 2"}},
		{name: "unknown reason", exit: Exit{Reason: 4242}, what: "unhandled exit", detail: []string{"4242"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			want := stepFault
			switch {
			case tt.handled:
				want = stepHandle
			case tt.reenter:
				want = stepReenter
			}
			if got := decide(&tt.exit); got != want {
				t.Errorf("decide = %d, want %d", got, want)
			}
			if want != stepFault {
				return
			}
			what, detail := faultText(&tt.exit)
			if what != tt.what {
				t.Errorf("fault %q, want %q", what, tt.what)
			}
			for _, s := range tt.detail {
				if !strings.Contains(detail, s) {
					t.Errorf("detail %q does not say %q", detail, s)
				}
			}
		})
	}
}

// TestLifecycle checks every (state, event) pair against the lifecycle a
// vCPU goes through (package doc, Loop, Reinit): what is not listed must
// be refused and leave the state alone.
func TestLifecycle(t *testing.T) {
	type key struct {
		s State
		e Event
	}
	want := map[key]State{
		{StateReset, EventInit}:       StateReset,   // Reinit of a fresh vCPU (no init issued)
		{StateStopped, EventInit}:     StateReset,   // Reinit, or a boot's first park, after a run
		{StateReset, EventPark}:       StateParked,  // a boot's first park
		{StateParked, EventWake}:      StateRunning, // the boot CPU's start, or a CPU_ON
		{StateOff, EventWake}:         StateRunning, // a CPU_ON after CPU_OFF
		{StateRunning, EventPowerOff}: StateOff,     // the guest's CPU_OFF
		{StateRunning, EventHalt}:     StateStopped, // the VM stops while the guest runs
		{StateParked, EventStop}:      StateReset,   // the VM stops before this vCPU ran
		{StateOff, EventStop}:         StateStopped, // the VM stops while this vCPU is off
	}
	states := []State{StateReset, StateParked, StateOff, StateRunning, StateStopped}
	events := []Event{EventInit, EventPark, EventWake, EventPowerOff, EventHalt, EventStop}
	for _, s := range states {
		for _, e := range events {
			got, ok := s.Step(e)
			w, legal := want[key{s, e}]
			switch {
			case legal && (!ok || got != w):
				t.Errorf("%v on %v = %v, %v; want %v", e, s, got, ok, w)
			case !legal && (ok || got != s):
				t.Errorf("%v on %v = %v, %v; want refused, state unchanged", e, s, got, ok)
			}
		}
	}
	for _, s := range states {
		if w := s == StateParked || s == StateOff; s.Waiting() != w {
			t.Errorf("%v.Waiting() = %v", s, s.Waiting())
		}
	}
}

// TestNextAfter checks which lifecycle event each Handler answer brings
// about in a running vCPU.
func TestNextAfter(t *testing.T) {
	for _, tt := range []struct {
		n    Next
		want State
	}{
		{Continue, StateRunning},
		{PowerOff, StateOff},
		{Halt, StateStopped},
	} {
		s := StateRunning
		if e, ok := tt.n.After(); ok {
			var legal bool
			if s, legal = s.Step(e); !legal {
				t.Errorf("%v: event %v refused on a running vCPU", tt.n, e)
			}
		}
		if s != tt.want {
			t.Errorf("%v: running vCPU goes to %v, want %v", tt.n, s, tt.want)
		}
	}
}
