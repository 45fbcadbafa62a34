package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

func TestScheduleInterleaves(t *testing.T) {
	base := baseSettings()
	base.CPUs = []int{1, 4}
	vs, err := BuildVariants(base, []VariantSpec{{"B", nil}, {"C", []Override{{"cpus", "4,8"}}}})
	if err != nil {
		t.Fatal(err)
	}
	jobs := Schedule(vs, 2, 1)
	var got []string
	for i, j := range jobs {
		if j.Seq != i+1 {
			t.Errorf("job %d has Seq %d", i, j.Seq)
		}
		s := fmt.Sprintf("%s%d", j.Variant, j.CPUs)
		if j.Warmup {
			s = "w" + s
		}
		got = append(got, s)
	}
	// Warm-ups first (each variant at its smallest count), then rounds in
	// which every cell boots once: A B A B ..., never A A ... B B.
	want := "wA1 wB1 wC4 A1 B1 A4 B4 C4 C8 A1 B1 A4 B4 C4 C8"
	if s := strings.Join(got, " "); s != want {
		t.Errorf("schedule\n%s\nwant\n%s", s, want)
	}
	if n := len(Schedule(vs, 0, 0)); n != 0 {
		t.Errorf("0 runs scheduled %d jobs", n)
	}
}

func TestExecuteStopsOnInterrupt(t *testing.T) {
	vs, _ := BuildVariants(baseSettings(), []VariantSpec{{"B", nil}})
	jobs := Schedule(vs, 3, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var seen []int
	runs, interrupted := Execute(ctx, jobs, func(ctx context.Context, j Job) Run {
		if j.Seq == 3 {
			cancel() // as Ctrl-C during the third boot
			return Run{Status: StatusFailed}
		}
		return Run{Status: StatusOK, PhasesNS: map[string]int64{"total": 1}}
	}, func(r Run, n, total int) {
		seen = append(seen, n)
		if total != 6 {
			t.Errorf("total %d", total)
		}
	})
	if !interrupted || len(runs) != 3 || len(seen) != 3 {
		t.Fatalf("interrupted %v, %d runs, progress %v", interrupted, len(runs), seen)
	}
	if runs[2].Status != StatusInterrupted {
		t.Errorf("the run the interrupt hit has status %q, want interrupted", runs[2].Status)
	}
	if runs[1].Variant != "B" || runs[1].Seq != 2 || runs[1].CPUs != 1 {
		t.Errorf("Execute did not fill in the job: %+v", runs[1])
	}
}
