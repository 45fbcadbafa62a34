package runsummary

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"testing"
)

// The fixtures were written by mvm before the run summary moved out of
// vmm: run.json (commit 3fdd1f3) is report's synthetic run with every
// optional field set, run-minimal.json (f42c9b3) vmm's Result.Summary of a
// one-vCPU run with none, each encoded as mvm run --result-json encodes;
// lab-hello.json and lab-smp4-profile.json are mvm run --result-json
// files from the lab, written by an mvm built from f970d74 (hello.bin;
// smp.bin on 4 vCPUs with --psci user --profile). Decoding each and
// encoding it again gives the same bytes, and no field of it is unknown:
// the move kept every JSON name, type and omitempty rule.
func TestResultJSONUnchanged(t *testing.T) {
	for _, fx := range []struct {
		name string
		// full: every optional part is present, so an omitempty that
		// drops one or a type that reads it as zero shows; empty: none
		// is, so one that is no longer omitted shows.
		full, empty bool
	}{
		{"run.json", true, false},
		{"run-minimal.json", false, true},
		{"lab-hello.json", false, false},
		{"lab-smp4-profile.json", false, false},
	} {
		want, err := os.ReadFile("testdata/" + fx.name)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(want))
		dec.DisallowUnknownFields()
		var s Summary
		if err := dec.Decode(&s); err != nil {
			t.Fatalf("%s: %v (a field the file has that Summary lost?)", fx.name, err)
		}
		full := s.Profile != nil && s.ExitHeat != nil && s.Config != nil && s.Host != nil && len(s.PSCIRejected) > 0 && s.Error != ""
		empty := s.Profile == nil && s.ExitHeat == nil && len(s.PSCIRejected) == 0 && s.Error == "" && s.UserspaceFrom == ""
		if (fx.full && !full) || (fx.empty && !empty) {
			t.Fatalf("%s: not the fixture this test means (every optional part %v, none %v)", fx.name, full, empty)
		}
		got, err := json.MarshalIndent(&s, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, '\n') // as mvm run --result-json writes it
		if !bytes.Equal(got, want) {
			t.Errorf("%s: re-encoded result differs from the one written before the move:\n%s", fx.name, firstDiff(got, want))
		}
	}
}

// firstDiff shows where two encodings part.
func firstDiff(got, want []byte) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	lo := max(0, i-80)
	return fmt.Sprintf("at byte %d\n got: ...%s\nwant: ...%s", i, got[lo:min(len(got), i+80)], want[lo:min(len(want), i+80)])
}
