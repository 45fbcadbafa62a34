//go:build !arm64

package main

import (
	"strings"
	"testing"
)

// On a host that is not arm64, a valid run gets as far as creating the VM
// and stops with the needs-arm64 message (exit 1).
func TestRunNeedsARM64(t *testing.T) {
	in := inputs(t)
	for _, args := range [][]string{
		{"run", "--kernel", in["payload.bin"]},
		{"run", "--kernel", in["payload.bin"], "--cpus", "4", "--memory", "1G", "--psci", "user", "--console", "none", "--on-reset", "reboot", "--append", "quiet"},
	} {
		dir := t.TempDir()
		checkFailure(t, dir, mvm(t, dir, args...), 1, "not arm64")
	}
}

// On a host that cannot run mvm, mvm bench checks every input first (bad
// input is still exit status 2 and names itself), then the host, once:
// one line, exit status 3, no boot started and no output written.
func TestBenchChecksHostOnce(t *testing.T) {
	in := inputs(t)
	dir := t.TempDir()
	r := mvm(t, dir, "bench", "--kernel", in["payload.bin"], "--cpus", "1,2", "--runs", "3",
		"--variant", "B:cmdline-append=x", "--json", "b.json", "--html", "b.html", "--console-dir", "logs")
	checkFailure(t, dir, r, 3, "not arm64", "no boots run")
	if strings.Contains(r.stderr, "boots:") {
		t.Errorf("mvm bench announced boots: %q", r.stderr)
	}
	checkFailure(t, dir, mvm(t, dir, "bench", "--kernel", in["payload.bin"], "--disk", in["missing"]), 2, "--disk", in["missing"])
}
