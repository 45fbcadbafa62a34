// Package labclock says which clock a benchmark measured with, so that every
// benchmark report names it: the arm64 lab's wall clock, its instruction
// clock (QEMU's -icount: one ns per executed guest instruction), or a real
// arm64 host's clock. lab/main.go's -time flag sets MVM_LAB_TIME in the lab.
package labclock

import (
	"flag"
	"fmt"
	"io"
	"os"
)

// Env is the environment variable the lab sets to its clock's name.
const Env = "MVM_LAB_TIME"

// Names of the clocks.
const (
	Wall = "wall" // the lab's wall clock: end-to-end figures, ±10-20% between runs here
	Insn = "insn" // the lab's instruction clock: path length, repeats to ~1%
	Host = "host" // no lab: a real arm64 host's own clock
)

// Name is the clock this process measures with.
func Name() string {
	switch v := os.Getenv(Env); v {
	case Wall, Insn:
		return v
	case "":
		return Host
	default:
		return v
	}
}

// Describe says in a few words what one microsecond of that clock is.
func Describe(name string) string {
	switch name {
	case Insn:
		return "instruction time (QEMU -icount shift=0: 1 µs = 1000 guest instructions of the lab machine)"
	case Wall:
		return "the lab's wall clock (two levels of emulation: ±10-20% between runs)"
	case Host:
		return "the host's wall clock"
	}
	return "an unknown clock"
}

// ConfigLine is the benchmark-format configuration line naming the clock
// ("lab-clock: insn"); benchstat and golang.org/x/perf/benchfmt read such
// "key: value" lines as the configuration of the results that follow.
func ConfigLine(name string) string { return "lab-clock: " + name }

// AnnounceIfBenchmarking writes ConfigLine for this process's clock to w
// when the test binary was asked to run benchmarks (-test.bench set), so the
// line stands before the results. Call it from TestMain after flag.Parse.
func AnnounceIfBenchmarking(w io.Writer) {
	f := flag.Lookup("test.bench")
	if f == nil || f.Value.String() == "" {
		return
	}
	name := Name()
	fmt.Fprintln(w, ConfigLine(name))
	fmt.Fprintf(os.Stderr, "benchmarks measure in %s\n", Describe(name))
}
