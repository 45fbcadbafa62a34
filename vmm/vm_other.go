//go:build !(linux && arm64)

package vmm

import (
	"context"
	"io"
	"time"
)

// VM is a virtual machine; on this host it cannot be created.
type VM struct{}

// New fails: mvm's VMs need arm64 KVM. It checks its input first, as an
// arm64 host would, so that a mistake in it is reported as one here too.
func New(cfg Config) (*VM, error) {
	if _, err := checkInput(cfg); err != nil {
		return nil, err
	}
	return nil, ErrNeedsARM64
}

// CheckHost says whether this host can run mvm's VMs: it cannot.
func CheckHost() error { return ErrNeedsARM64 }

// Run is never reached on this host.
func (m *VM) Run(ctx context.Context) (Result, error) { return Result{}, ErrNeedsARM64 }

// Close is a no-op on this host.
func (m *VM) Close() error { return nil }

// WriteState is never reached on this host.
func (m *VM) WriteState(w io.Writer, wait time.Duration) {}

// MarkCommandEnd is never reached on this host.
func (m *VM) MarkCommandEnd(at time.Time) {}
