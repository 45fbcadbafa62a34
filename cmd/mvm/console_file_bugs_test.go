package main

import "testing"

// A run that fails before the guest boots must not leave the --console
// file behind: nothing was written to it.
func TestRunConsoleFileNotCreatedOnEarlyFailure(t *testing.T) {
	in := inputs(t)
	for _, tt := range []struct {
		name string
		args []string
		says string
	}{
		{"missing kernel", []string{"run", "--kernel", in["missing"], "--console", "file:console.log"}, "does not exist"},
		{"ELF kernel", []string{"run", "--kernel", in["vmlinux"], "--console", "file:console.log"}, "ELF"},
		{"missing initrd", []string{"run", "--kernel", in["payload.bin"], "--initrd", in["missing"], "--console", "file:console.log"}, "does not exist"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			checkFailure(t, dir, mvm(t, dir, tt.args...), 1, tt.says)
		})
	}
}
