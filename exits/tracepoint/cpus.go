package tracepoint

import (
	"fmt"
	"strconv"
	"strings"
)

// OnlineCPUsFile lists the CPUs that can run tasks (cpu-hotplug's sysfs
// ABI, Documentation/ABI/testing/sysfs-devices-system-cpu).
const OnlineCPUsFile = "/sys/devices/system/cpu/online"

// ParseCPUList reads a kernel CPU list such as "0-3,8,10-11" (the format of
// OnlineCPUsFile, lib/bitmap-str.c) into CPU numbers in ascending order.
func ParseCPUList(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, fmt.Errorf("empty CPU list")
	}
	var cpus []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("CPU list %q: bad CPU %q", s, lo)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("CPU list %q: bad range %q", s, part)
			}
		}
		if len(cpus) > 0 && a <= cpus[len(cpus)-1] {
			return nil, fmt.Errorf("CPU list %q: not ascending", s)
		}
		if b-a > 1<<16 {
			return nil, fmt.Errorf("CPU list %q: range %q too large", s, part)
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}
