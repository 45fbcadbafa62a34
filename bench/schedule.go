package bench

// Job is one boot to run.
type Job struct {
	Seq     int    // 1-based position in the schedule
	Round   int    // 0-based measured round, or warm-up round when Warmup
	Warmup  bool   // discarded: warms page cache and CPU frequency
	Variant string // Variant.Name
	CPUs    int
}

// Schedule orders the boots: first the warm-up boots (each variant at its
// smallest vCPU count, warmup times), then runs rounds in each of which
// every cell (vCPU count x variant) boots once. Interleaving the cells,
// A B A B ..., rather than running all of A and then all of B, spreads any
// drift of the host (thermal, background load, page cache) over every
// variant alike, so that it widens the spread instead of faking a delta.
func Schedule(vs []Variant, runs, warmup int) []Job {
	var jobs []Job
	add := func(j Job) {
		j.Seq = len(jobs) + 1
		jobs = append(jobs, j)
	}
	for w := 0; w < warmup; w++ {
		for _, v := range vs {
			if len(v.Settings.CPUs) > 0 {
				add(Job{Round: w, Warmup: true, Variant: v.Name, CPUs: v.Settings.CPUs[0]})
			}
		}
	}
	rows := Rows(vs)
	for r := 0; r < runs; r++ {
		for _, n := range rows {
			for _, v := range vs {
				if hasCPUs(v, n) {
					add(Job{Round: r, Variant: v.Name, CPUs: n})
				}
			}
		}
	}
	return jobs
}

func hasCPUs(v Variant, n int) bool {
	for _, c := range v.Settings.CPUs {
		if c == n {
			return true
		}
	}
	return false
}
