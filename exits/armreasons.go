package exits

import "fmt"

// Arm64Namer names arm64 kvm_exit samples. The arm64 tracepoint
// (arch/arm64/kvm/trace_arm.h) is
//
//	kvm_exit(int ret, unsigned int esr_ec, unsigned long vcpu_pc)
//
// where ret is the exception type returned by the world switch
// (arch/arm64/include/asm/kvm_asm.h: ARM_EXCEPTION_IRQ 0, ..._EL1_SERROR 1,
// ..._TRAP 2, ..._IL 3, ..._HYP_GONE = HVC_STUB_ERR 0xbadca11) and esr_ec is
// the exception class of ESR_EL2 (arch/arm64/include/asm/esr.h). Like
// tools/perf/arch/arm64/util/kvm-stat.c, a TRAP is keyed by its exception
// class and every other type by its own name.
type Arm64Namer struct{}

// Arm64 exception types (ret), from arch/arm64/include/asm/kvm_asm.h.
const (
	Arm64ExceptionIRQ     = 0
	Arm64ExceptionSError  = 1
	Arm64ExceptionTrap    = 2
	Arm64ExceptionIL      = 3
	Arm64ExceptionHypGone = 0xbadca11

	// arm64ExitWithSErrorBit is ARM_EXIT_WITH_SERROR_BIT: the world switch
	// sets bit 31 of the exit code when an SError is pending as well; the
	// kernel's ARM_EXCEPTION_CODE() strips it before dispatching, so do we.
	arm64ExitWithSErrorBit = 31
)

var arm64ExceptionTypes = map[uint64]string{
	Arm64ExceptionIRQ:     "IRQ",
	Arm64ExceptionSError:  "SERROR",
	Arm64ExceptionTrap:    "TRAP",
	Arm64ExceptionIL:      "ILLEGAL",
	Arm64ExceptionHypGone: "HYP_GONE",
}

// arm64ExceptionClasses are the ESR_ELx_EC_* values of
// arch/arm64/include/asm/esr.h that perf's kvm_arm_exception_class table
// names (the ECN() list in arch/arm64/include/asm/kvm_arm.h).
var arm64ExceptionClasses = [64]string{
	0x00: "UNKNOWN",
	0x01: "WFx",
	0x03: "CP15_32",
	0x04: "CP15_64",
	0x05: "CP14_MR",
	0x06: "CP14_LS",
	0x07: "FP_ASIMD",
	0x08: "CP10_ID",
	0x09: "PAC",
	0x0C: "CP14_64",
	0x0D: "BTI",
	0x0E: "ILL",
	0x11: "SVC32",
	0x12: "HVC32",
	0x13: "SMC32",
	0x15: "SVC64",
	0x16: "HVC64",
	0x17: "SMC64",
	0x18: "SYS64",
	0x19: "SVE",
	0x1A: "ERET",
	0x1C: "FPAC",
	0x1D: "SME",
	0x1F: "IMP_DEF",
	0x20: "IABT_LOW",
	0x21: "IABT_CUR",
	0x22: "PC_ALIGN",
	0x24: "DABT_LOW",
	0x25: "DABT_CUR",
	0x26: "SP_ALIGN",
	0x28: "FP_EXC32",
	0x2C: "FP_EXC64",
	0x2F: "SERROR",
	0x30: "BREAKPT_LOW",
	0x31: "BREAKPT_CUR",
	0x32: "SOFTSTP_LOW",
	0x33: "SOFTSTP_CUR",
	0x34: "WATCHPT_LOW",
	0x35: "WATCHPT_CUR",
	0x38: "BKPT32",
	0x3A: "VECTOR32",
	0x3C: "BRK64",
}

// Arch implements Namer.
func (Arm64Namer) Arch() string { return "arm64" }

// CodeField implements Namer.
func (Arm64Namer) CodeField() string { return "ret" }

// SubField implements Namer.
func (Arm64Namer) SubField() string { return "esr_ec" }

// PerfTime implements Namer: perf's arm64 kvm-stat.c pairs kvm_entry (begin)
// with kvm_exit (end), so its Time is the guest time before the exit.
func (Arm64Namer) PerfTime() TimeBasis { return GuestTime }

// ExitName implements Namer. code is the tracepoint's ret (a C int: only its
// low 32 bits are meaningful), sub its esr_ec.
func (Arm64Namer) ExitName(code, sub uint64) string {
	ret := code & 0xffff_ffff &^ (1 << arm64ExitWithSErrorBit)
	if ret == Arm64ExceptionTrap {
		return Arm64ECName(sub)
	}
	if n, ok := arm64ExceptionTypes[ret]; ok {
		return n
	}
	return fmt.Sprintf("RET_0x%x", ret)
}

// Arm64ECName names an ESR_ELx exception class; unnamed classes read
// "EC_0xNN".
func Arm64ECName(ec uint64) string {
	if ec < uint64(len(arm64ExceptionClasses)) && arm64ExceptionClasses[ec] != "" {
		return arm64ExceptionClasses[ec]
	}
	return fmt.Sprintf("EC_0x%02X", ec)
}
