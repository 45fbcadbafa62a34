//go:build linux && arm64

package vmm

import (
	"flag"
	"os"
	"testing"

	"github.com/mvm-dev/mvm/internal/labclock"
)

// TestMain names the clock the benchmarks measure with before their
// results (labclock).
func TestMain(m *testing.M) {
	flag.Parse()
	labclock.AnnounceIfBenchmarking(os.Stdout)
	os.Exit(m.Run())
}
