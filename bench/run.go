package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/mvm-dev/mvm/exits"
	"github.com/mvm-dev/mvm/runsummary"
)

// The measures mvm bench adds to a run's phases (docs/boot-phases.md).
const (
	// PhaseProcessWall: the mvm process as mvm bench sees it, from just
	// before fork/exec to its exit having been reaped.
	PhaseProcessWall = "process_wall"
	// PhaseProcessCPU: CPU time (user + system) of the mvm process and its
	// threads, including time the vCPU threads spent in the guest.
	PhaseProcessCPU = "process_cpu"
)

// PhaseNames lists what --phases accepts, for messages: a run's phases in
// boot order, console:NAME and the process measures.
func PhaseNames() []string {
	return append(runsummary.PhaseNames(), runsummary.ConsolePhasePrefix+"NAME", PhaseProcessWall, PhaseProcessCPU)
}

// KnownPhase reports whether p names a phase or measure a run can have.
func KnownPhase(p string) bool {
	switch {
	case slices.Contains(runsummary.PhaseNames(), p), p == PhaseProcessWall, p == PhaseProcessCPU:
		return true
	case strings.HasPrefix(p, runsummary.ConsolePhasePrefix):
		return len(p) > len(runsummary.ConsolePhasePrefix)
	}
	return false
}

// Run statuses.
const (
	StatusOK          = "ok"
	StatusFailed      = "failed"      // non-zero exit, timeout, no result
	StatusInterrupted = "interrupted" // stopped by Ctrl-C / SIGTERM of mvm bench
)

// Run is the record of one boot: everything mvm bench knows about it, raw.
// Only runs with Status ok and not Warmup enter the statistics.
type Run struct {
	Seq     int    `json:"seq"`
	Round   int    `json:"round"`
	Warmup  bool   `json:"warmup,omitempty"`
	Variant string `json:"variant"`
	CPUs    int    `json:"cpus"`
	// Args is the mvm command line that ran (without the program name).
	Args     []string `json:"args"`
	Status   string   `json:"status"`
	ExitCode int      `json:"exit_code"`
	// Error says why a run failed (mvm's own last stderr lines).
	Error string `json:"error,omitempty"`
	// PhasesNS holds every phase and measure observed in this run, in
	// nanoseconds; a phase that was not observed is absent, never zero.
	PhasesNS map[string]int64 `json:"phases_ns,omitempty"`
	// Summary is mvm run --result-json's output, as mvm wrote it.
	Summary *runsummary.Summary `json:"summary,omitempty"`
	// Profile is the run's exit profile (mvm run --profile), the
	// "profile" member of its result JSON.
	Profile *exits.Report `json:"profile,omitempty"`
}

// OK reports whether the run enters the statistics.
func (r Run) OK() bool { return r.Status == StatusOK && !r.Warmup }

// ParseResult decodes mvm run --result-json output: the runsummary.Summary and its
// optional exit profile, which it moves out of the summary.
func ParseResult(data []byte) (*runsummary.Summary, *exits.Report, error) {
	var s runsummary.Summary
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, nil, fmt.Errorf("decode mvm run result: %w", err)
	}
	if s.PhasesNS == nil {
		return nil, nil, fmt.Errorf("decode mvm run result: no phases_ns member (not a --result-json file?)")
	}
	prof := s.Profile
	s.Profile = nil
	return &s, prof, nil
}

// Runner boots one job and reports it. It must return promptly with
// StatusInterrupted when ctx ends.
type Runner func(ctx context.Context, job Job) Run

// Execute runs the jobs in order, calling done after each, until all ran
// or ctx ends. It reports whether it was interrupted; the runs so far are
// returned either way.
func Execute(ctx context.Context, jobs []Job, run Runner, done func(r Run, n, total int)) ([]Run, bool) {
	var runs []Run
	for i, j := range jobs {
		if ctx.Err() != nil {
			return runs, true
		}
		r := run(ctx, j)
		r.Seq, r.Round, r.Warmup, r.Variant, r.CPUs = j.Seq, j.Round, j.Warmup, j.Variant, j.CPUs
		if ctx.Err() != nil && r.Status != StatusOK {
			r.Status = StatusInterrupted
		}
		runs = append(runs, r)
		if done != nil {
			done(r, i+1, len(jobs))
		}
		if r.Status == StatusInterrupted {
			return runs, true
		}
	}
	return runs, false
}

// RunName names a run in messages: "#3 (B, 4 vCPUs)".
func RunName(r Run) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d (%s, %d vCPU", r.Seq, r.Variant, r.CPUs)
	if r.CPUs != 1 {
		b.WriteString("s")
	}
	if r.Warmup {
		b.WriteString(", warm-up")
	}
	b.WriteString(")")
	return b.String()
}
