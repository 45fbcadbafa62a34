// Package bench is the logic of `mvm bench`: boot the same configuration, or
// several variants of it, many times and compare the boot phases.
//
// It holds everything that does not need KVM, so it tests on any host:
// parsing variants (NAME:KEY=VALUE,...) and vCPU lists, the run schedule
// (variants interleaved so that drift of the host hits all alike), turning a
// run's result (runsummary.Summary) into phase durations, the statistics
// (median, spread, delta against the baseline, Mann-Whitney U p-value through
// golang.org/x/perf/benchmath) with the regression decision, and the
// renderings: an LKML-style table, JSON with every run's raw numbers, the
// Go benchmark format that benchstat reads, and JUnit XML for CI systems. Exec runs the boots, each a
// child `mvm run` process (so vmm_setup starts at a real process start),
// and Progress shows how far they are; Execute takes any Runner, so the
// schedule and records test without booting.
//
// docs/boot-phases.md defines where each phase's clock starts and stops.
package bench
