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

// ESR_ELx exception classes (ESR_ELx_EC_* in arch/arm64/include/asm/esr.h)
// that the exit profile breaks down (Arm64BreakdownClasses); the BPF
// programs take them from here too.
const (
	ECWFx     = 0x01
	ECHVC64   = 0x16
	ECSMC64   = 0x17
	ECSys64   = 0x18
	ECIABTLow = 0x20
	ECDABTLow = 0x24
)

// arm64ExceptionType names the kvm_exit ret values (ARM_EXCEPTION_* in
// arch/arm64/include/asm/kvm_asm.h) other than TRAP, which is keyed by EC.
func arm64ExceptionType(k uint64) (string, bool) {
	switch k {
	case Arm64ExceptionIRQ:
		return "IRQ", true
	case Arm64ExceptionSError:
		return "SERROR", true
	case Arm64ExceptionTrap:
		return "TRAP", true
	case Arm64ExceptionIL:
		return "ILLEGAL", true
	case Arm64ExceptionHypGone:
		return "HYP_GONE", true
	}
	return "", false
}

// arm64ExceptionClass names the ESR_ELx_EC_* values of
// arch/arm64/include/asm/esr.h that perf's kvm_arm_exception_class table
// names (the ECN() list in arch/arm64/include/asm/kvm_arm.h).
func arm64ExceptionClass(k uint64) (string, bool) {
	switch k {
	case 0x00:
		return "UNKNOWN", true
	case ECWFx:
		return "WFx", true
	case 0x03:
		return "CP15_32", true
	case 0x04:
		return "CP15_64", true
	case 0x05:
		return "CP14_MR", true
	case 0x06:
		return "CP14_LS", true
	case 0x07:
		return "FP_ASIMD", true
	case 0x08:
		return "CP10_ID", true
	case 0x09:
		return "PAC", true
	case 0x0C:
		return "CP14_64", true
	case 0x0D:
		return "BTI", true
	case 0x0E:
		return "ILL", true
	case 0x11:
		return "SVC32", true
	case 0x12:
		return "HVC32", true
	case 0x13:
		return "SMC32", true
	case 0x15:
		return "SVC64", true
	case ECHVC64:
		return "HVC64", true
	case ECSMC64:
		return "SMC64", true
	case ECSys64:
		return "SYS64", true
	case 0x19:
		return "SVE", true
	case 0x1A:
		return "ERET", true
	case 0x1C:
		return "FPAC", true
	case 0x1D:
		return "SME", true
	case 0x1F:
		return "IMP_DEF", true
	case ECIABTLow:
		return "IABT_LOW", true
	case 0x21:
		return "IABT_CUR", true
	case 0x22:
		return "PC_ALIGN", true
	case ECDABTLow:
		return "DABT_LOW", true
	case 0x25:
		return "DABT_CUR", true
	case 0x26:
		return "SP_ALIGN", true
	case 0x28:
		return "FP_EXC32", true
	case 0x2C:
		return "FP_EXC64", true
	case 0x2F:
		return "SERROR", true
	case 0x30:
		return "BREAKPT_LOW", true
	case 0x31:
		return "BREAKPT_CUR", true
	case 0x32:
		return "SOFTSTP_LOW", true
	case 0x33:
		return "SOFTSTP_CUR", true
	case 0x34:
		return "WATCHPT_LOW", true
	case 0x35:
		return "WATCHPT_CUR", true
	case 0x38:
		return "BKPT32", true
	case 0x3A:
		return "VECTOR32", true
	case 0x3C:
		return "BRK64", true
	}
	return "", false
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
	if n, ok := arm64ExceptionType(ret); ok {
		return n
	}
	return fmt.Sprintf("RET_0x%x", ret)
}

// Arm64ECName names an ESR_ELx exception class; unnamed classes read
// "EC_0xNN".
func Arm64ECName(ec uint64) string {
	if n, ok := arm64ExceptionClass(ec); ok {
		return n
	}
	return fmt.Sprintf("EC_0x%02X", ec)
}
