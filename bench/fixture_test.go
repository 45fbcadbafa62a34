package bench

import (
	"bytes"
	"os"
	"testing"
)

// testdata/bench.json was written by mvm bench's WriteJSON before the run
// summary moved out of vmm (commit 3fdd1f3: report's synthetic A/B bench).
// ReadJSON then WriteJSON gives the same bytes: the host, the runs' phases
// and profiles and the analysis kept every JSON name and type.
func TestBenchJSONUnchanged(t *testing.T) {
	want, err := os.ReadFile("testdata/bench.json")
	if err != nil {
		t.Fatal(err)
	}
	r, err := ReadJSON(bytes.NewReader(want))
	if err != nil {
		t.Fatal(err)
	}
	if r.Host.Arch == "" || len(r.Runs) == 0 || len(r.Analysis.Cells) == 0 {
		t.Fatalf("the fixture read as an empty report: host %+v, %d runs, %d cells", r.Host, len(r.Runs), len(r.Analysis.Cells))
	}
	var got bytes.Buffer
	if err := WriteJSON(&got, r); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		g, w := got.Bytes(), want
		i := 0
		for i < len(g) && i < len(w) && g[i] == w[i] {
			i++
		}
		lo := max(0, i-80)
		t.Errorf("re-encoded bench report differs from the one written before the move at byte %d:\n got: ...%s\nwant: ...%s",
			i, g[lo:min(len(g), i+80)], w[lo:min(len(w), i+80)])
	}
}
