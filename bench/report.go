package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/mvm-dev/mvm/runsummary"
)

// ReportFormat identifies the JSON report's layout; bump it on
// incompatible changes.
const ReportFormat = "mvm-bench/1"

// Report is a whole bench: what ran, every run's raw numbers, and the
// analysis. It is the JSON output and what --from reads back.
type Report struct {
	Format      string    `json:"format"`
	Started     time.Time `json:"started"`
	Finished    time.Time `json:"finished"`
	Interrupted bool      `json:"interrupted,omitempty"`
	Host        Host      `json:"host"`
	Config      Config    `json:"config"`
	Runs        []Run     `json:"runs"`
	Analysis    Analysis  `json:"analysis"`
}

// Host is where the bench ran; absolute times only compare on one host.
type Host = runsummary.Host

// Config is how the bench was asked to run.
type Config struct {
	Runs   int `json:"runs"`
	Warmup int `json:"warmup"`
	// Quiet: "quiet" was added to every kernel command line.
	Quiet   bool   `json:"quiet"`
	Timeout string `json:"timeout"`
	// CommonArgs are mvm run flags given to every run (--marker, ...).
	CommonArgs []string `json:"common_args,omitempty"`
	// Command is the command every run times in the guest (mvm bench ...
	// -- CMD: each run is mvm run ... -- CMD); empty when runs boot the
	// kernel and initrd themselves.
	Command  []string  `json:"command,omitempty"`
	Variants []Variant `json:"variants"`
}

// WriteJSON writes the report as indented JSON.
func WriteJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("write JSON report: %w", err)
	}
	return nil
}

// ReadJSON reads a report WriteJSON wrote.
func ReadJSON(rd io.Reader) (*Report, error) {
	var r Report
	if err := json.NewDecoder(rd).Decode(&r); err != nil {
		return nil, fmt.Errorf("read JSON report: %w", err)
	}
	if r.Format != ReportFormat {
		return nil, fmt.Errorf("read JSON report: format %q, want %q (not an mvm bench --format json report?)", r.Format, ReportFormat)
	}
	if len(r.Config.Variants) == 0 {
		return nil, fmt.Errorf("read JSON report: no variants")
	}
	return &r, nil
}

// ReadJSONFile reads the report WriteJSON wrote to path.
func ReadJSONFile(path string) (*Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := ReadJSON(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// Reanalyze recomputes the analysis with new options.
func (r *Report) Reanalyze(opt Options) error {
	an, err := Analyze(r.Config.Variants, r.Runs, opt)
	if err != nil {
		return err
	}
	r.Analysis = an
	return nil
}

// Variant returns the named variant.
func (r *Report) Variant(name string) (Variant, bool) {
	for _, v := range r.Config.Variants {
		if v.Name == name {
			return v, true
		}
	}
	return Variant{}, false
}
