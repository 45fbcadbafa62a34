package main

import (
	"errors"
	"fmt"
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

Without -o the page goes next to INPUT, with .html for .json.

Exit status: 0 when the page is written; 2 when INPUT is missing, unreadable
or not an mvm JSON file, or the page cannot be created where it would go; 1
when writing it fails.`,
		Example: `  mvm run --kernel smp.bin --cpus 16 --result-json run.json
  mvm report run.json -o run.html

  mvm bench --kernel Image --variant B:memory=2G --json bench.json
  mvm report bench.json            # writes bench.html`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch len(args) {
			case 0:
				return errors.New("report: give the JSON file to render: mvm report FILE.json, a file from 'mvm run --result-json' or 'mvm bench --json'")
			case 1:
				return nil
			}
			return fmt.Errorf("report: one JSON file at a time: got %d (%s)", len(args), strings.Join(args, " "))
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			in := args[0]
			what := "report: -o"
			if out == "" {
				what = "report: the page (-o to put it elsewhere)"
				out = strings.TrimSuffix(in, filepath.Ext(in)) + ".html"
				if out == in {
					out = in + ".html"
				}
			}
			// Both files are the user's input: a bad one is exit status 2.
			if err := checkOutput(what, out); err != nil {
				return err
			}
			data, err := report.LoadFile(in)
			if err != nil {
				return usageError{fmt.Errorf("report: %w", err)}
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
