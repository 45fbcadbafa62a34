package runsummary

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"testing"
)

// testdata/run.json and run-minimal.json were written by mvm before the
// run summary moved out of vmm (commits 3fdd1f3 and f42c9b3): report's
// synthetic run with every optional field set, and vmm's Result.Summary of
// a one-vCPU run with none, each encoded as mvm run --result-json encodes.
// Decoding each and encoding it again gives the same bytes, and no field
// of it is unknown: the move kept every JSON name, type and omitempty rule.
func TestResultJSONUnchanged(t *testing.T) {
	for _, name := range []string{"run.json", "run-minimal.json"} {
		want, err := os.ReadFile("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(want))
		dec.DisallowUnknownFields()
		var s Summary
		if err := dec.Decode(&s); err != nil {
			t.Fatalf("%s: %v (a field the file has that Summary lost?)", name, err)
		}
		// run.json has every optional part, so an omitempty that drops
		// one or a type that reads it as zero shows below; run-minimal.json
		// has none, so one that is no longer omitted shows.
		full := s.Profile != nil && s.ExitHeat != nil && s.Config != nil && s.Host != nil && len(s.PSCIRejected) > 0 && s.Error != ""
		if full != (name == "run.json") {
			t.Fatalf("%s: every optional part present = %v: not the fixture this test means", name, full)
		}
		got, err := json.MarshalIndent(&s, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, '\n') // as mvm run --result-json writes it
		if !bytes.Equal(got, want) {
			t.Errorf("%s: re-encoded result differs from the one written before the move:\n%s", name, firstDiff(got, want))
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
