//go:build linux

package bpfagg

import (
	"os"
	"testing"

	"github.com/mvm-dev/mvm/exits/tracepoint"
)

// TestLoadAndAttach: the kernel's verifier accepts both programs with the
// field offsets of this host's kvm_exit format, and they attach. This host
// may never fire kvm_exit (kvm_pvm does not), so the counts are checked in
// the lab (TestQEMUProfileCommand: BPF and perf counts per vCPU).
func TestLoadAndAttach(t *testing.T) {
	root, err := tracepoint.ProbeEnv(tracepoint.SystemEnv(true))
	if err != nil {
		t.Fatalf("tracepoints: %v", err)
	}
	c, err := New(root, os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	vs, err := c.Snapshot(func(int) (int, bool) { return 0, false })
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d vCPUs with counts; namer %s", len(vs), c.Namer().Arch())
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}
