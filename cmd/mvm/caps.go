package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/mvm-dev/mvm/vmm"
)

func newCapsCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "caps [--json]",
		Short: "Show what this host's KVM offers that mvm needs",
		Long: `Probe /dev/kvm and report each capability mvm uses, whether the host has
it, and what its absence disables. Works on any Linux host; arm64-only items
show as unavailable elsewhere.`,
		Example: `  # Can this host run mvm's guests with PSCI in userspace and tracepoints?
  mvm caps

  # The same as JSON, e.g. to gate a CI job on the SMCCC filter:
  mvm caps --json | grep -A2 '"SMCCC filter"'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			caps := vmm.ProbeHost()
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(caps)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintf(w, "host\t%s\n", caps.Host)
			for _, c := range caps.Items {
				state := "yes"
				if !c.Available {
					state = "no"
				}
				val := c.Value
				if val != "" {
					val = " (" + val + ")"
				}
				note := ""
				if !c.Available && c.Disables != "" {
					note = "\t-> " + c.Disables
				}
				fmt.Fprintf(w, "%s\t%s%s%s\n", c.Name, state, val, note)
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	return cmd
}
