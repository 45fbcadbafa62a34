package vmm

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/mvm-dev/mvm/runsummary"
)

// The same one-vCPU run, condensed by Result.Summary and encoded as mvm run
// --result-json encodes it, gives the bytes the code before the run
// summary's move to runsummary gave (runsummary/testdata/run-minimal.json,
// written from this very Result then).
func TestSummaryJSONUnchanged(t *testing.T) {
	want, err := os.ReadFile("../runsummary/testdata/run-minimal.json")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	cfg := Config{Kernel: "/lab/hello.bin", CPUs: 1, Memory: 64 << 20, PSCI: runsummary.PSCIKernel}
	r := Result{Exit: runsummary.ExitPowerOff, PSCI: runsummary.PSCIKernel,
		Timeline: Timeline{Start: t0, FirstRun: ms(3), CPUs: []CPUTimeline{{Entered: ms(3)}}, End: ms(9), ConsoleMarks: map[string]time.Time{}},
		Memory:   MemoryUse{RSS: 30 << 20, GuestResident: 1 << 20, Anonymous: 12 << 20},
		Config:   cfg.RunConfig(), Host: runsummary.Host{OS: "linux", Arch: "arm64", CPUs: 2}}
	got, err := json.MarshalIndent(r.Summary(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if got = append(got, '\n'); !bytes.Equal(got, want) {
		t.Errorf("mvm run --result-json of the same run changed:\n got: %s\nwant: %s", got, want)
	}
}
