package bench

import (
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
)

// Off a terminal, Progress writes one line per run: what it was, how it
// ended (a failed run's last stderr line, mvm's own error) and the ETA.
func TestProgressLines(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "progress")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := NewProgress(f, 2, slog.New(slog.NewTextHandler(io.Discard, nil)))
	p.Done(Run{Seq: 1, Variant: "A", CPUs: 1, Status: StatusOK, PhasesNS: map[string]int64{"total": 1.5e9}}, 1, 2)
	p.Done(Run{Seq: 2, Variant: "B", CPUs: 4, Status: StatusFailed, Error: "log line\nmvm: bad kernel"}, 2, 2)
	p.Finish()
	out, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), out)
	}
	for i, want := range []string{"run 1/2 #1 (A, 1 vCPU): ok, total 1.500 s; ETA", "run 2/2 #2 (B, 4 vCPUs): FAILED: mvm: bad kernel; ETA"} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d = %q, want it to contain %q", i+1, lines[i], want)
		}
	}
}

func TestTailBufferKeepsTheEnd(t *testing.T) {
	b := &tailBuffer{max: 8}
	b.Write([]byte("0123456789"))
	b.Write([]byte("ab"))
	if got := b.String(); got != "456789ab" {
		t.Errorf("tail %q, want %q", got, "456789ab")
	}
}
