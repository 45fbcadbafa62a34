package exits

import "fmt"

// X86Namer names x86 kvm_exit samples. The x86 tracepoint
// (arch/x86/kvm/trace.h) carries exit_reason and isa; isa is KVM_ISA_VMX (1)
// or KVM_ISA_SVM (2), and the kernel's own print format picks the name table
// by it, as this namer does: VMX basic exit reasons from
// arch/x86/include/uapi/asm/vmx.h (VMX_EXIT_REASONS), SVM exit codes from
// arch/x86/include/uapi/asm/svm.h (SVM_EXIT_REASONS). Names are the kernel's
// own spellings, so they match `perf kvm stat` and the tracefs output.
type X86Namer struct{}

// KVM_ISA_* values of the x86 kvm_exit tracepoint's isa field.
const (
	X86ISAVMX = 1
	X86ISASVM = 2
)

// vmxExitReasonFailedVMEntry is VMX_EXIT_REASONS_FAILED_VMENTRY (bit 31 of
// the full exit reason); the basic reason is the low 16 bits.
const vmxExitReasonFailedVMEntry = 0x8000_0000

var vmxExitReasons = map[uint64]string{
	0:  "EXCEPTION_NMI",
	1:  "EXTERNAL_INTERRUPT",
	2:  "TRIPLE_FAULT",
	3:  "INIT_SIGNAL",
	4:  "SIPI_SIGNAL",
	7:  "INTERRUPT_WINDOW",
	8:  "NMI_WINDOW",
	9:  "TASK_SWITCH",
	10: "CPUID",
	12: "HLT",
	13: "INVD",
	14: "INVLPG",
	15: "RDPMC",
	16: "RDTSC",
	18: "VMCALL",
	19: "VMCLEAR",
	20: "VMLAUNCH",
	21: "VMPTRLD",
	22: "VMPTRST",
	23: "VMREAD",
	24: "VMRESUME",
	25: "VMWRITE",
	26: "VMOFF",
	27: "VMON",
	28: "CR_ACCESS",
	29: "DR_ACCESS",
	30: "IO_INSTRUCTION",
	31: "MSR_READ",
	32: "MSR_WRITE",
	33: "INVALID_STATE",
	34: "MSR_LOAD_FAIL",
	36: "MWAIT_INSTRUCTION",
	37: "MONITOR_TRAP_FLAG",
	39: "MONITOR_INSTRUCTION",
	40: "PAUSE_INSTRUCTION",
	41: "MCE_DURING_VMENTRY",
	43: "TPR_BELOW_THRESHOLD",
	44: "APIC_ACCESS",
	45: "EOI_INDUCED",
	46: "GDTR_IDTR",
	47: "LDTR_TR",
	48: "EPT_VIOLATION",
	49: "EPT_MISCONFIG",
	50: "INVEPT",
	51: "RDTSCP",
	52: "PREEMPTION_TIMER",
	53: "INVVPID",
	54: "WBINVD",
	55: "XSETBV",
	56: "APIC_WRITE",
	57: "RDRAND",
	58: "INVPCID",
	59: "VMFUNC",
	60: "ENCLS",
	61: "RDSEED",
	62: "PML_FULL",
	63: "XSAVES",
	64: "XRSTORS",
	67: "UMWAIT",
	68: "TPAUSE",
	74: "BUS_LOCK",
	75: "NOTIFY",
	77: "TDCALL",
	84: "MSR_READ_IMM",
	85: "MSR_WRITE_IMM",
}

var svmExitReasons = map[uint64]string{
	0x000:       "read_cr0",
	0x002:       "read_cr2",
	0x003:       "read_cr3",
	0x004:       "read_cr4",
	0x008:       "read_cr8",
	0x010:       "write_cr0",
	0x012:       "write_cr2",
	0x013:       "write_cr3",
	0x014:       "write_cr4",
	0x018:       "write_cr8",
	0x020:       "read_dr0",
	0x021:       "read_dr1",
	0x022:       "read_dr2",
	0x023:       "read_dr3",
	0x024:       "read_dr4",
	0x025:       "read_dr5",
	0x026:       "read_dr6",
	0x027:       "read_dr7",
	0x030:       "write_dr0",
	0x031:       "write_dr1",
	0x032:       "write_dr2",
	0x033:       "write_dr3",
	0x034:       "write_dr4",
	0x035:       "write_dr5",
	0x036:       "write_dr6",
	0x037:       "write_dr7",
	0x040:       "DE excp",
	0x041:       "DB excp",
	0x043:       "BP excp",
	0x044:       "OF excp",
	0x045:       "BR excp",
	0x046:       "UD excp",
	0x047:       "NM excp",
	0x048:       "DF excp",
	0x04a:       "TS excp",
	0x04b:       "NP excp",
	0x04c:       "SS excp",
	0x04d:       "GP excp",
	0x04e:       "PF excp",
	0x050:       "MF excp",
	0x051:       "AC excp",
	0x052:       "MC excp",
	0x053:       "XF excp",
	0x060:       "interrupt",
	0x061:       "nmi",
	0x062:       "smi",
	0x063:       "init",
	0x064:       "vintr",
	0x065:       "cr0_sel_write",
	0x066:       "read_idtr",
	0x067:       "read_gdtr",
	0x068:       "read_ldtr",
	0x069:       "read_rt",
	0x06a:       "write_idtr",
	0x06b:       "write_gdtr",
	0x06c:       "write_ldtr",
	0x06d:       "write_rt",
	0x06e:       "rdtsc",
	0x06f:       "rdpmc",
	0x070:       "pushf",
	0x071:       "popf",
	0x072:       "cpuid",
	0x073:       "rsm",
	0x074:       "iret",
	0x075:       "swint",
	0x076:       "invd",
	0x077:       "pause",
	0x078:       "hlt",
	0x079:       "invlpg",
	0x07a:       "invlpga",
	0x07b:       "io",
	0x07c:       "msr",
	0x07d:       "task_switch",
	0x07e:       "ferr_freeze",
	0x07f:       "shutdown",
	0x080:       "vmrun",
	0x081:       "hypercall",
	0x082:       "vmload",
	0x083:       "vmsave",
	0x084:       "stgi",
	0x085:       "clgi",
	0x086:       "skinit",
	0x087:       "rdtscp",
	0x088:       "icebp",
	0x089:       "wbinvd",
	0x08a:       "monitor",
	0x08b:       "mwait",
	0x08d:       "xsetbv",
	0x08f:       "write_efer_trap",
	0x090:       "write_cr0_trap",
	0x094:       "write_cr4_trap",
	0x098:       "write_cr8_trap",
	0x0a2:       "invpcid",
	0x0a5:       "buslock",
	0x0a6:       "idle-halt",
	0x400:       "npf",
	0x401:       "avic_incomplete_ipi",
	0x402:       "avic_unaccelerated_access",
	0x403:       "vmgexit",
	0x8000_0001: "vmgexit_mmio_read",
	0x8000_0002: "vmgexit_mmio_write",
	0x8000_0003: "vmgexit_nmi_complete",
	0x8000_0004: "vmgexit_ap_hlt_loop",
	0x8000_0005: "vmgexit_ap_jump_table",
	0x8000_0010: "vmgexit_page_state_change",
	0x8000_0011: "vmgexit_guest_request",
	0x8000_0012: "vmgexit_ext_guest_request",
	0x8000_0013: "vmgexit_ap_creation",
	0x8000_fffd: "vmgexit_hypervisor_feature",
	// SVM_EXIT_ERR is -1 as a u32 exit_reason.
	0xffff_ffff: "invalid_guest_state",
}

// Arch implements Namer.
func (X86Namer) Arch() string { return "amd64" }

// CodeField implements Namer.
func (X86Namer) CodeField() string { return "exit_reason" }

// SubField implements Namer.
func (X86Namer) SubField() string { return "isa" }

// PerfTime implements Namer: perf's x86 kvm-stat pairs kvm_exit (begin) with
// kvm_entry (end), so its Time is the handling time.
func (X86Namer) PerfTime() TimeBasis { return HandleTime }

// ExitName implements Namer: code is exit_reason, sub is isa.
func (X86Namer) ExitName(code, sub uint64) string {
	code &= 0xffff_ffff
	switch sub {
	case X86ISAVMX:
		return VMXExitName(code)
	case X86ISASVM:
		if n, ok := svmExitReasons[code]; ok {
			return n
		}
		return fmt.Sprintf("SVM_0x%x", code)
	}
	return fmt.Sprintf("ISA%d_0x%x", sub, code)
}

// VMXExitName names a full VMX exit reason: the basic reason in bits 0-15,
// flagged when bit 31 (VM-entry failure) is set.
func VMXExitName(full uint64) string {
	basic := full & 0xffff
	n, ok := vmxExitReasons[basic]
	if !ok {
		n = fmt.Sprintf("EXIT_0x%x", basic)
	}
	if full&vmxExitReasonFailedVMEntry != 0 {
		return "FAILED_VMENTRY(" + n + ")"
	}
	return n
}
