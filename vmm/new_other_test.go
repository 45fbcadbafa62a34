//go:build !(linux && arm64)

package vmm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// On a host that cannot run arm64 guests, New checks its input exactly as
// an arm64 host would and only then says it needs arm64.
func TestNewOnOtherHosts(t *testing.T) {
	dir := t.TempDir()
	payload := filepath.Join(dir, "payload.bin")
	if err := os.WriteFile(payload, arm64Code(), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")

	cfg := validConfig()
	cfg.Kernel = missing
	cfg.Initrd = filepath.Join(dir, "also-missing")
	m, err := New(cfg)
	if m != nil || err == nil {
		t.Fatalf("New(missing kernel) = %v, %v", m, err)
	}
	if errors.Is(err, ErrNeedsARM64) || !strings.Contains(err.Error(), "does not exist") || !strings.Contains(err.Error(), missing) {
		t.Errorf("New(missing kernel) = %v, want the kernel's does-not-exist error first", err)
	}

	cfg = validConfig()
	cfg.Kernel = payload
	m, err = New(cfg)
	if m != nil || !errors.Is(err, ErrNeedsARM64) {
		t.Fatalf("New(valid payload) = %v, %v; want ErrNeedsARM64", m, err)
	}
	if msg := err.Error(); !strings.Contains(msg, "arm64") || strings.Contains(msg, "\n") {
		t.Errorf("ErrNeedsARM64 = %q: want one line that says arm64", msg)
	}

	cfg.CPUs = 0
	if _, err := New(cfg); err == nil || errors.Is(err, ErrNeedsARM64) || !strings.Contains(err.Error(), "--cpus") {
		t.Errorf("New(0 CPUs) = %v, want the --cpus error", err)
	}

	var vm *VM
	if _, err := vm.Run(context.Background()); !errors.Is(err, ErrNeedsARM64) {
		t.Errorf("Run = %v, want ErrNeedsARM64", err)
	}
	if err := vm.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
}
