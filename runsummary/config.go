package runsummary

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// PSCIMode selects who answers the guest's PSCI calls (--psci; the psci
// field of a result and of its config).
type PSCIMode string

const (
	// PSCIAuto picks PSCIUser when the host has the SMCCC filter, else
	// PSCIKernel.
	PSCIAuto PSCIMode = "auto"
	// PSCIUser forwards the PSCI ranges to mvm (Linux 6.4+ SMCCC filter).
	PSCIUser PSCIMode = "user"
	// PSCIKernel lets KVM's in-kernel PSCI answer.
	PSCIKernel PSCIMode = "kernel"
)

// ParsePSCIMode checks a --psci value.
func ParsePSCIMode(s string) (PSCIMode, error) {
	switch m := PSCIMode(s); m {
	case PSCIAuto, PSCIUser, PSCIKernel:
		return m, nil
	}
	return "", fmt.Errorf("unknown PSCI mode %q: use auto, user or kernel", s)
}

// MaxCPUs is the most vCPUs a run has: vmm's memory map has
// redistributor room for this many (docs/memory-map.md); the host's
// KVM_CAP_MAX_VCPUS may allow fewer.
const MaxCPUs = 512

// ParseSize parses a memory size: a number of bytes, or a number with a
// K, M, G or T suffix (powers of 1024; "KiB", "MB", "g" all accepted).
func ParseSize(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, errors.New("empty size: use e.g. 512M or 2G")
	}
	u := strings.ToUpper(t)
	u = strings.TrimSuffix(strings.TrimSuffix(u, "IB"), "B")
	shift := 0
	if n := len(u); n > 0 {
		switch u[n-1] {
		case 'K':
			shift = 10
		case 'M':
			shift = 20
		case 'G':
			shift = 30
		case 'T':
			shift = 40
		}
		if shift != 0 {
			u = u[:n-1]
		}
	}
	v, err := strconv.ParseUint(u, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bad size %q: use a whole number with an optional K, M, G or T suffix, e.g. 512M", s)
	}
	if v > (^uint64(0))>>shift {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return v << shift, nil
}
