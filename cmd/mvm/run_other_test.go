//go:build !arm64

package main

import "testing"

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
