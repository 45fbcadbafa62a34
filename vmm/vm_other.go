//go:build !(linux && arm64)

package vmm

import (
	"context"
	"io"
	"time"
)

// VM is a virtual machine; on this host it cannot be created.
type VM struct{}

// New fails: mvm's VMs need arm64 KVM.
func New(cfg Config) (*VM, error) {
	if _, err := prepare(cfg); err != nil {
		return nil, err
	}
	return nil, ErrNeedsARM64
}

// Run is never reached on this host.
func (m *VM) Run(ctx context.Context) (Result, error) { return Result{}, ErrNeedsARM64 }

// Close is a no-op on this host.
func (m *VM) Close() error { return nil }

// WriteState is never reached on this host.
func (m *VM) WriteState(w io.Writer, wait time.Duration) {}
