package labclock

import (
	"bytes"
	"flag"
	"strings"
	"testing"

	"golang.org/x/perf/benchfmt"
)

func TestName(t *testing.T) {
	for _, c := range []struct{ env, want string }{{"", Host}, {"insn", Insn}, {"wall", Wall}} {
		t.Setenv(Env, c.env)
		if got := Name(); got != c.want {
			t.Errorf("%s=%q: Name() = %q, want %q", Env, c.env, got, c.want)
		}
	}
}

// The configuration line must be read by benchfmt as the clock of every
// result after it, so benchstat keeps instruction-time and wall-clock runs
// apart.
func TestConfigLineIsBenchfmtConfig(t *testing.T) {
	in := ConfigLine(Insn) + "\nBenchmarkX-2 \t 3\t 100 ns/op\n"
	r := benchfmt.NewReader(strings.NewReader(in), "x")
	found := false
	for r.Scan() {
		res, ok := r.Result().(*benchfmt.Result)
		if !ok {
			continue
		}
		if got := res.GetConfig("lab-clock"); got != Insn {
			t.Fatalf("result's lab-clock config = %q, want %q", got, Insn)
		}
		found = true
	}
	if !found {
		t.Fatal("benchfmt read no result")
	}
}

func TestAnnounceOnlyWhenBenchmarking(t *testing.T) {
	t.Setenv(Env, Insn)
	f := flag.Lookup("test.bench")
	if f == nil {
		t.Fatal("no test.bench flag in a test binary")
	}
	old := f.Value.String()
	defer f.Value.Set(old)
	var buf bytes.Buffer
	f.Value.Set("")
	AnnounceIfBenchmarking(&buf)
	if buf.Len() != 0 {
		t.Fatalf("announced %q without -test.bench", buf.String())
	}
	f.Value.Set(".")
	AnnounceIfBenchmarking(&buf)
	if got := strings.TrimSpace(buf.String()); got != "lab-clock: insn" {
		t.Fatalf("announced %q, want lab-clock: insn", got)
	}
}
