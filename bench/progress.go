package bench

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/mvm-dev/mvm/runsummary"
)

// Progress shows how far a bench is: a progress bar with an ETA on a
// terminal, one line per run otherwise (CI logs).
type Progress struct {
	w     io.Writer
	bar   *progressbar.ProgressBar
	start time.Time
	log   *slog.Logger
}

// NewProgress starts showing the progress of total runs on w.
func NewProgress(w *os.File, total int, log *slog.Logger) *Progress {
	p := &Progress{w: w, start: time.Now(), log: log}
	if term.IsTerminal(int(w.Fd())) {
		p.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription("booting"),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionSetWidth(30),
			progressbar.OptionClearOnFinish(),
		)
		p.bar.RenderBlank()
	}
	return p
}

// Starting names the job that starts (Exec.Starting).
func (p *Progress) Starting(j Job) {
	if p.bar != nil {
		p.bar.Describe(jobText(j))
	}
}

func jobText(j Job) string {
	s := fmt.Sprintf("%s, %d vCPU", j.Variant, j.CPUs)
	if j.CPUs != 1 {
		s += "s"
	}
	if j.Warmup {
		s += ", warm-up"
	}
	return s
}

// Done reports run n of total (Execute's done).
func (p *Progress) Done(r Run, n, total int) {
	if p.bar != nil {
		if r.Status == StatusFailed {
			p.bar.Clear()
			fmt.Fprintf(p.w, "mvm bench: run %s failed: %s\n", RunName(r), lastLine(r.Error))
		}
		p.bar.Add(1)
		return
	}
	elapsed := time.Since(p.start)
	eta := time.Duration(float64(elapsed) / float64(n) * float64(total-n)).Round(time.Second)
	what := "ok"
	switch r.Status {
	case StatusFailed:
		what = "FAILED: " + lastLine(r.Error)
	case StatusInterrupted:
		what = "interrupted"
	default:
		if t, ok := r.PhasesNS[runsummary.PhaseTotal]; ok {
			what += fmt.Sprintf(", total %.3f s", float64(t)/1e9)
		}
		if t, ok := r.PhasesNS[runsummary.PhaseKernelToUser]; ok {
			what += fmt.Sprintf(", kernel_to_user %.3f s", float64(t)/1e9)
		}
	}
	fmt.Fprintf(p.w, "mvm bench: run %d/%d %s: %s; ETA %v\n", n, total, RunName(r), what, eta)
}

// Finish ends the progress display.
func (p *Progress) Finish() {
	if p.bar != nil {
		p.bar.Finish()
		fmt.Fprintln(p.w)
	}
	p.log.Debug("bench: runs finished", "elapsed", time.Since(p.start).Round(time.Millisecond))
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		// mvm's own error is its last line; earlier ones are log output.
		return s[i+1:]
	}
	return s
}
