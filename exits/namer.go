package exits

import "fmt"

// TimeBasis says which interval around an exit a "Time" column measures.
type TimeBasis int

const (
	// GuestTime is the time the guest ran before the exit: the previous
	// kvm_entry to this kvm_exit on the same thread.
	GuestTime TimeBasis = iota
	// HandleTime is the time the host spent on the exit: this kvm_exit to
	// the next kvm_entry on the same thread.
	HandleTime
)

// String names the basis as the JSON report spells it.
func (b TimeBasis) String() string {
	switch b {
	case GuestTime:
		return "guest"
	case HandleTime:
		return "handle"
	}
	return fmt.Sprintf("TimeBasis(%d)", int(b))
}

// Namer turns the raw fields of a kvm:kvm_exit tracepoint sample into the
// reason name that perf kvm stat would print.
type Namer interface {
	// Arch is the GOARCH-style architecture the names belong to.
	Arch() string
	// CodeField and SubField are the kvm_exit format fields the namer reads
	// (arm64: "ret" and "esr_ec"; x86: "exit_reason" and "isa").
	CodeField() string
	SubField() string
	// ExitName names an exit from the values of CodeField and SubField.
	ExitName(code, sub uint64) string
	// PerfTime is the interval perf kvm stat reports as "Time" on this
	// architecture.
	PerfTime() TimeBasis
}

// NamerForArch returns the namer for a GOARCH value ("arm64", "amd64" or
// "386").
func NamerForArch(arch string) (Namer, error) {
	switch arch {
	case "arm64":
		return Arm64Namer{}, nil
	case "amd64", "386":
		return X86Namer{}, nil
	}
	return nil, fmt.Errorf("exits: no kvm_exit reason names for architecture %q", arch)
}

// NamerForFields picks the namer whose kvm_exit fields are all present, so
// the tracepoint reader can decide from the kernel's own format file rather
// than from the architecture it was built for.
func NamerForFields(has func(field string) bool) (Namer, error) {
	for _, n := range []Namer{Arm64Namer{}, X86Namer{}} {
		if has(n.CodeField()) && has(n.SubField()) {
			return n, nil
		}
	}
	return nil, fmt.Errorf("exits: kvm_exit format has neither arm64 (ret, esr_ec) nor x86 (exit_reason, isa) fields")
}
