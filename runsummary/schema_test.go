package runsummary

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"testing"
)

// testdata/run.json was written by mvm before the run summary moved out of
// vmm (commit 3fdd1f3: report's synthetic run with every optional field
// set, encoded as mvm run --result-json encodes). Decoding it and encoding
// it again gives the same bytes, and no field of it is unknown: the move
// kept every JSON name, type and omitempty rule.
func TestResultJSONUnchanged(t *testing.T) {
	want, err := os.ReadFile("testdata/run.json")
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(want))
	dec.DisallowUnknownFields()
	var s Summary
	if err := dec.Decode(&s); err != nil {
		t.Fatalf("testdata/run.json: %v (a field the file has that Summary lost?)", err)
	}
	// Every optional part is present, so an omitempty that drops it or a
	// type that reads it as zero shows below.
	if s.Profile == nil || s.ExitHeat == nil || s.Config == nil || s.Host == nil || len(s.PSCIRejected) == 0 || s.Error == "" {
		t.Fatalf("the fixture lacks an optional part: %+v", s)
	}
	got, err := json.MarshalIndent(&s, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n') // as mvm run --result-json writes it
	if !bytes.Equal(got, want) {
		t.Errorf("re-encoded result differs from the one written before the move:\n%s", firstDiff(got, want))
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
