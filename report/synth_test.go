package report

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/mvm-dev/mvm/bench"
	"github.com/mvm-dev/mvm/exits"
	"github.com/mvm-dev/mvm/runsummary"
)

// synthRun is a run result shaped like a real one: vCPU 0 starts, the
// secondaries get CPU_ON one after another, each enters a little later,
// with a heat map and a profile. Seeded, so tests are repeatable.
func synthRun(t testing.TB, n int, seed uint64) *runsummary.Summary {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	ms := func(x float64) int64 { return int64(x * 1e6) }
	first := ms(40 + rng.Float64()*5)
	s := &runsummary.Summary{
		Exit: runsummary.ExitPowerOff, PSCI: runsummary.PSCIUser, CPUs: n,
		PhasesNS:  map[string]int64{runsummary.PhaseVMMSetup: first},
		ConsoleNS: map[string]int64{},
		Memory:    runsummary.MemorySummary{RSS: 40 << 20, GuestResident: 8 << 20, Overhead: 32 << 20, PrivateOverhead: 20 << 20},
		Config:    &runsummary.RunConfig{Kernel: "/src/linux", KernelFormat: "Image.gz", KernelTree: "/src/linux", Cmdline: "console=ttyS0 <b>&amp;", CPUs: n, Memory: 512 << 20, PSCI: runsummary.PSCIUser, Profile: true},
		Host:      &runsummary.Host{OS: "linux", Arch: "arm64", Kernel: "6.12.0", CPUs: 2, Hostname: "lab"},
	}
	at := first + ms(3)
	var firstOn, lastIn int64 = -1, -1
	for i := 0; i < n; i++ {
		if i == 0 {
			s.CPUOnNS = append(s.CPUOnNS, -1)
			s.ResetNS = append(s.ResetNS, first-ms(0.01))
			s.EnteredNS = append(s.EnteredNS, first)
			continue
		}
		on := at
		rs := on + ms(0.02+rng.Float64()*0.05)
		in := rs + ms(0.01+rng.Float64()*0.03)
		at += ms(0.2 + rng.Float64()*0.3)
		if firstOn < 0 {
			firstOn = on
		}
		lastIn = max(lastIn, in)
		s.CPUOnNS, s.ResetNS, s.EnteredNS = append(s.CPUOnNS, on), append(s.ResetNS, rs), append(s.EnteredNS, in)
	}
	end := at + ms(20)
	s.PhasesNS[runsummary.PhaseTotal] = end
	if n > 1 {
		s.PhasesNS[runsummary.PhaseBootToSMP] = firstOn - first
		s.PhasesNS[runsummary.PhaseSecondaries] = lastIn - firstOn
	}
	s.MarksNS = []runsummary.MarkSummary{{Code: 0x40, AtNS: first + ms(1)}, {Code: 0x41, AtNS: end - ms(5)}}
	s.PhasesNS[runsummary.PhaseKernelToUser] = end - ms(5) - first
	if n > 1 {
		s.ConsoleNS["smp"] = lastIn + ms(2)
		s.PhasesNS[runsummary.PhaseSMPConsole] = lastIn + ms(2) - first
	}

	const bucket = int64(time.Millisecond)
	heat := &runsummary.ExitHeat{BucketNS: bucket}
	for i := 0; i < n; i++ {
		row := make([]uint64, end/bucket+1)
		for b := s.EnteredNS[i] / bucket; b < int64(len(row)); b += 1 + int64(rng.IntN(4)) {
			row[b] = uint64(rng.IntN(300))
		}
		heat.Counts = append(heat.Counts, row)
	}
	s.ExitHeat = heat

	p := &exits.Report{Arch: "arm64", PerfTime: "guest", DurationNS: uint64(end - first)}
	p.SetSource(exits.SourceUserspace, "KVM_RUN returns", nil)
	p.SetSource(exits.SourceTracepoint, "", fmt.Errorf("needs root"))
	p.SetSource(exits.SourceKVMStats, "stats fd", nil)
	for _, r := range []struct {
		reason string
		n      uint64
	}{{"MMIO/uart", 5000}, {"HYPERCALL/CPU_ON", uint64(n - 1)}, {"HYPERCALL/PSCI_VERSION", 1}, {"MMIO/<marker>", 2}, {"INTR", 17}} {
		p.Rows = append(p.Rows, exits.Row{Source: exits.SourceUserspace, VCPU: exits.TotalVCPU, Reason: r.reason,
			Count: r.n, TimeNS: r.n * 3100, TimeCount: r.n, TimeMeanNS: 3100, HandleNS: r.n * 3100})
	}
	p.KVMStats = []exits.StatRow{{Source: exits.SourceKVMStats, VCPU: exits.TotalVCPU, Name: "exits", Delta: 123456, Pretty: "123456"},
		{Source: exits.SourceKVMStats, VCPU: exits.TotalVCPU, Name: "wfi_exit_stat", Delta: 99, Pretty: "99"}}
	p.SetSource(exits.SourceTracepoint, "tracepoints", nil)
	p.Rows = append(p.Rows, exits.Row{Source: exits.SourceTracepoint, VCPU: exits.TotalVCPU, Reason: "SYS64", Count: 900, TimeNS: 9e6,
		Percentiles: &exits.Latency{Guest: exits.Percentiles{P50: 1000, P90: 5000, P99: 9000, Max: 20000}},
		Breakdown:   []exits.BreakdownRow{{Key: "ICC_SGI1R_EL1 write", Samples: 600, TimeNS: 6e6}, {Key: "ID_AA64PFR0_EL1 read", Samples: 300, TimeNS: 3e6}}})
	p.ByPhase = []exits.PhaseRows{{Phase: "secondaries", StartNS: 1e6, EndNS: 5e6, Rows: []exits.PhaseRow{{Reason: "SYS64", Samples: 700, TimeNS: 7e6}, {Reason: "IRQ", Samples: 5}}},
		{Phase: "after_userspace", StartNS: 5e6, EndNS: -1, Rows: []exits.PhaseRow{{Reason: "SYS64", Samples: 200}}}}
	p.GuestCode = &exits.GuestCode{Symbols: "System.map", Reasons: []exits.GuestCodeReason{{Reason: "SYS64", Functions: []exits.GuestFunc{{Function: "gic_send_sgi <x>", Samples: 600, TopPC: "gic_send_sgi+0x40"}}, Other: 300}}}
	s.Profile = p
	return s
}

// synthBench is a bench of variants A and B (B about 8% slower) at 1 and 4
// vCPUs, five measured runs and one warm-up each, analysed by bench.
func synthBench(t testing.TB, seed uint64) *bench.Report {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 11))
	vs := []bench.Variant{
		{Name: "A", Settings: bench.Settings{Kernel: "vmlinuz", Cmdline: "console=ttyS0", CPUs: []int{1, 4}, Memory: "512M", PSCI: "user"}},
		{Name: "B", Overrides: []bench.Override{{Key: "cmdline-append", Value: "mvm.delay_ms=30"}}, Settings: bench.Settings{Kernel: "vmlinuz", CPUs: []int{1, 4}, Memory: "512M", PSCI: "user", Label: "slow <init>"}},
	}
	var runs []bench.Run
	seq := 0
	for round := 0; round < 6; round++ {
		for _, n := range []int{1, 4} {
			for vi, v := range vs {
				seq++
				scale := 1.0 + 0.08*float64(vi)
				base := 300e6 * (1 + 0.2*float64(n-1)) * scale
				r := bench.Run{Seq: seq, Round: round, Warmup: round == 0, Variant: v.Name, CPUs: n, Status: bench.StatusOK,
					PhasesNS: map[string]int64{
						runsummary.PhaseVMMSetup:     int64(20e6 * (1 + rng.Float64()*0.05)),
						runsummary.PhaseKernelToUser: int64(base * (1 + rng.Float64()*0.03)),
						runsummary.PhaseTotal:        int64((base + 60e6) * (1 + rng.Float64()*0.03)),
					}}
				if n > 1 {
					r.PhasesNS[runsummary.PhaseSecondaries] = int64(5e6 * float64(n) * (1 + rng.Float64()*0.1))
				}
				r.Profile = &exits.Report{Rows: []exits.Row{
					{Source: exits.SourceUserspace, VCPU: exits.TotalVCPU, Reason: "MMIO/uart", Count: uint64(100 + vi*40), TimeNS: 1e6},
					{Source: exits.SourceUserspace, VCPU: exits.TotalVCPU, Reason: "HYPERCALL/CPU_ON", Count: uint64(n - 1), TimeNS: 2e4},
				}}
				runs = append(runs, r)
			}
		}
	}
	seq++
	runs = append(runs, bench.Run{Seq: seq, Variant: "B", CPUs: 4, Status: bench.StatusFailed, Error: "mvm: guest <crashed>\nexit status 1"})
	fail := 5.0
	an, err := bench.Analyze(vs, runs, bench.Options{Alpha: 0.05, Baseline: "A", FailOnRegression: &fail})
	if err != nil {
		t.Fatal(err)
	}
	return &bench.Report{Format: bench.ReportFormat, Started: time.Unix(1764000000, 0), Finished: time.Unix(1764000600, 0),
		Host:   runsummary.Host{OS: "linux", Arch: "arm64", Kernel: "6.12", CPUs: 2, Hostname: "lab"},
		Config: bench.Config{Runs: 5, Warmup: 1, Quiet: true, Timeout: "10m", Variants: vs}, Runs: runs, Analysis: an}
}
