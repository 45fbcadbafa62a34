package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/mvm-dev/mvm/bench"
	"github.com/mvm-dev/mvm/runsummary"
)

// Input is a decoded JSON file: exactly one of Run and Bench is set.
type Input struct {
	Run   *runsummary.Summary
	Bench *bench.Report
}

// maxInput bounds what Load reads: a 512-vCPU profiled run is a few MB.
const maxInput = 256 << 20

// LoadFile reads and decodes path (see Load).
func LoadFile(path string) (*Input, error) {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%s does not exist", path)
	case err != nil:
		return nil, err
	case st.IsDir():
		return nil, fmt.Errorf("%s is a directory, not a JSON file", path)
	}
	if st.Size() > maxInput {
		return nil, fmt.Errorf("%s: %d bytes, more than any mvm result (%d MiB); not an mvm JSON file?", path, st.Size(), maxInput>>20)
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrPermission) {
		return nil, fmt.Errorf("%s is not readable: permission denied", path)
	}
	if err != nil {
		return nil, err
	}
	in, err := Load(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return in, nil
}

// Load decodes an mvm run --result-json file or an mvm bench --json file,
// telling them apart by their members: a bench report has "format"
// mvm-bench/N, a run result has "phases_ns". Errors are one line that says
// what is wrong (where the JSON breaks off, which member is missing).
func Load(data []byte) (*Input, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, jsonError(data, err)
	}
	if f, ok := probe["format"]; ok {
		var format string
		if json.Unmarshal(f, &format) != nil || !strings.HasPrefix(format, "mvm-bench/") {
			return nil, fmt.Errorf("member \"format\" is %s, not an mvm bench report's %q", clip(string(f)), bench.ReportFormat)
		}
		rep, err := bench.ReadJSON(bytes.NewReader(data))
		if err != nil {
			return nil, err
		}
		return &Input{Bench: rep}, nil
	}
	if _, ok := probe["phases_ns"]; ok {
		var s runsummary.Summary
		if err := json.Unmarshal(data, &s); err != nil {
			return nil, fmt.Errorf("an mvm run result, but %w", jsonError(data, err))
		}
		if err := checkRun(&s); err != nil {
			return nil, err
		}
		return &Input{Run: &s}, nil
	}
	return nil, errors.New("neither an mvm run --result-json file (no \"phases_ns\") nor an mvm bench --json file (no \"format\")")
}

// checkRun rejects results whose per-vCPU arrays disagree with each other,
// so that the renderer can index them freely.
func checkRun(s *runsummary.Summary) error {
	if s.CPUs < 0 || s.CPUs > runsummary.MaxCPUs {
		return fmt.Errorf("\"cpus\" is %d: mvm runs 1 to %d vCPUs", s.CPUs, runsummary.MaxCPUs)
	}
	for name, n := range map[string]int{"cpu_on_ns": len(s.CPUOnNS), "entered_ns": len(s.EnteredNS)} {
		if n != s.CPUs {
			return fmt.Errorf("%q has %d entries for %d vCPUs", name, n, s.CPUs)
		}
	}
	if s.ResetNS != nil && len(s.ResetNS) != s.CPUs {
		return fmt.Errorf("\"reset_ns\" has %d entries for %d vCPUs", len(s.ResetNS), s.CPUs)
	}
	if h := s.ExitHeat; h != nil {
		if h.BucketNS <= 0 {
			return fmt.Errorf("\"exit_heat\".\"bucket_ns\" is %d, want a positive width", h.BucketNS)
		}
		if len(h.Counts) > s.CPUs {
			return fmt.Errorf("\"exit_heat\" has %d rows for %d vCPUs", len(h.Counts), s.CPUs)
		}
		for _, row := range h.Counts {
			if len(row) > 4*runsummary.HeatBuckets {
				return fmt.Errorf("\"exit_heat\" has a row of %d buckets, more than mvm writes (%d)", len(row), runsummary.HeatBuckets)
			}
		}
	}
	return nil
}

// jsonError turns a decoding error into a sentence with the position.
func jsonError(data []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case len(bytes.TrimSpace(data)) == 0:
		return errors.New("empty file, not JSON")
	case strings.Contains(err.Error(), "unexpected end of JSON input"):
		// A *SyntaxError on some paths of encoding/json, a plain error
		// on others.
		return fmt.Errorf("the JSON ends early, after %d bytes (truncated file?)", len(data))
	case errors.As(err, &se):
		line, col := position(data, se.Offset)
		return fmt.Errorf("not valid JSON at line %d, column %d: %v", line, col, se)
	case errors.As(err, &te):
		return fmt.Errorf("member %q holds a JSON %s where a %v belongs", te.Field, te.Value, te.Type)
	}
	return fmt.Errorf("not valid JSON: %v", err)
}

func position(data []byte, off int64) (line, col int) {
	line, col = 1, 1
	for i := int64(0); i < off && i < int64(len(data)); i++ {
		if data[i] == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return line, col
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
