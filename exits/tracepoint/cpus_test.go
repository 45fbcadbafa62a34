package tracepoint

import (
	"slices"
	"testing"
)

func TestParseCPUList(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
	}{
		{"0\n", []int{0}},
		{"0-1\n", []int{0, 1}},
		{"0-3,8,10-11", []int{0, 1, 2, 3, 8, 10, 11}},
	} {
		got, err := ParseCPUList(c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("ParseCPUList(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "x", "3-1", "1,0", "0-", "-1", "0,,1", "0-99999999"} {
		if got, err := ParseCPUList(bad); err == nil {
			t.Errorf("ParseCPUList(%q) = %v, want an error", bad, got)
		}
	}
}

func FuzzParseCPUList(f *testing.F) {
	f.Add("0-3,8")
	f.Fuzz(func(t *testing.T, s string) {
		cpus, err := ParseCPUList(s)
		if err != nil {
			return
		}
		if len(cpus) == 0 || !slices.IsSorted(cpus) || slices.Compact(slices.Clone(cpus)) == nil {
			t.Fatalf("ParseCPUList(%q) = %v", s, cpus)
		}
		for i := 1; i < len(cpus); i++ {
			if cpus[i] == cpus[i-1] {
				t.Fatalf("ParseCPUList(%q) repeats %d", s, cpus[i])
			}
		}
	})
}
