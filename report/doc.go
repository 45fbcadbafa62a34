// Package report renders mvm's results as self-contained HTML pages: a run
// report (mvm run --report, from a runsummary.Summary) with the boot
// phases on one time axis, a bring-up row per vCPU, a vCPU x time heat map
// of exits and the exit profile; and a bench report (mvm bench --html, from a
// bench.Report) with every run of every variant as a point, its median and
// spread, and the delta and p-value against the baseline.
//
// A page is one file: inline SVG and CSS, no script that it needs, nothing
// fetched, so it opens from file:// anywhere and prints to PDF. Hover
// details are SVG <title> elements, which browsers show as tooltips without
// JavaScript. Load tells a saved result JSON from a bench JSON (mvm report).
// Rendering goes through html/template, which escapes every string that
// came from a guest, a command line or a file.
package report
