package main

import (
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mvm-dev/mvm/report"
)

func newReportCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "report INPUT.json [-o FILE.html]",
		Short: "Render a saved run result or bench report as an HTML page",
		Long: `Render the JSON of 'mvm run --result-json' or 'mvm bench --json' as one
self-contained HTML page (inline SVG and CSS, nothing fetched, readable
without JavaScript; it opens from a file:// URL and prints to PDF). Works on
any host: the JSON says which kind it is.

A run report shows the configuration and host, the boot phases as bands on
one time axis, one row per vCPU with its CPU_ON, reset and first guest
entry, a vCPU x time heat map of the exits that reached mvm, and the exit
profile (with --profile). A bench report shows, per phase and vCPU count,
every run of every variant as a point with the median and spread, the delta
and p-value against the baseline, the regressions, and the exit-profile
differences.

Without -o the page goes next to INPUT, with .html for .json.`,
		Example: `  mvm run --kernel smp.bin --cpus 16 --result-json run.json
  mvm report run.json -o run.html

  mvm bench --kernel Image --variant B:memory=2G --json bench.json
  mvm report bench.json            # writes bench.html`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := args[0]
			data, err := report.LoadFile(in)
			if err != nil {
				return &exitError{1, "report: " + err.Error()}
			}
			if out == "" {
				out = strings.TrimSuffix(in, filepath.Ext(in)) + ".html"
				if out == in {
					out = in + ".html"
				}
			}
			render := func(w io.Writer) error { return report.Write(w, data, filepath.Base(in)) }
			if out == "-" {
				err = render(cmd.OutOrStdout())
			} else {
				err = report.WriteFile(out, render)
			}
			if err != nil {
				return &exitError{1, "report: -o " + out + ": " + err.Error()}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "out", "o", "", "write the page here ('-' for stdout; default: INPUT with .html)")
	return cmd
}
