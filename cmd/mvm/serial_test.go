package main

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/mvm-dev/mvm/vmm"
)

// parseRun parses mvm run flags into a vmm.Config, as mvm run does.
func parseRun(t *testing.T, args ...string) vmm.Config {
	t.Helper()
	var f runFlags
	c := &cobra.Command{Use: "run"}
	f.register(c)
	if err := c.Flags().Parse(args); err != nil {
		t.Fatal(err)
	}
	cfg, err := f.config(time.Now())
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return cfg
}

// The default console= and earlycon= follow --serial; a command line the
// user gives is kept, and --append adds to whichever applies.
func TestSerialCmdline(t *testing.T) {
	cases := []struct {
		args   []string
		serial vmm.Serial
		want   string
	}{
		{nil, vmm.Serial8250, "console=ttyS0 earlycon=uart8250,mmio,0x09000000"},
		{[]string{"--serial", "8250"}, vmm.Serial8250, "console=ttyS0 earlycon=uart8250,mmio,0x09000000"},
		{[]string{"--serial", "pl011"}, vmm.SerialPL011, "console=ttyAMA0 earlycon=pl011,mmio32,0x09000000"},
		{[]string{"--serial", "pl011", "--append", "quiet"}, vmm.SerialPL011, "console=ttyAMA0 earlycon=pl011,mmio32,0x09000000 quiet"},
		{[]string{"--serial", "pl011", "--cmdline", "console=ttyAMA0,115200"}, vmm.SerialPL011, "console=ttyAMA0,115200"},
		// mvm bench passes the default command line explicitly.
		{[]string{"--serial", "pl011", "--cmdline", "console=ttyS0 earlycon=uart8250,mmio,0x09000000"}, vmm.SerialPL011, "console=ttyAMA0 earlycon=pl011,mmio32,0x09000000"},
	}
	for _, c := range cases {
		args := append([]string{"--kernel", "k"}, c.args...)
		cfg := parseRun(t, args...)
		if cfg.Serial != c.serial || cfg.Cmdline != c.want {
			t.Errorf("%s: serial %q cmdline %q, want %q %q", strings.Join(c.args, " "), cfg.Serial, cfg.Cmdline, c.serial, c.want)
		}
	}
}
