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

// vmxExitReason names VMX basic exit reasons (arch/x86/include/uapi/asm/vmx.h).
func vmxExitReason(k uint64) (string, bool) {
	switch k {
	case 0:
		return "EXCEPTION_NMI", true
	case 1:
		return "EXTERNAL_INTERRUPT", true
	case 2:
		return "TRIPLE_FAULT", true
	case 3:
		return "INIT_SIGNAL", true
	case 4:
		return "SIPI_SIGNAL", true
	case 7:
		return "INTERRUPT_WINDOW", true
	case 8:
		return "NMI_WINDOW", true
	case 9:
		return "TASK_SWITCH", true
	case 10:
		return "CPUID", true
	case 12:
		return "HLT", true
	case 13:
		return "INVD", true
	case 14:
		return "INVLPG", true
	case 15:
		return "RDPMC", true
	case 16:
		return "RDTSC", true
	case 18:
		return "VMCALL", true
	case 19:
		return "VMCLEAR", true
	case 20:
		return "VMLAUNCH", true
	case 21:
		return "VMPTRLD", true
	case 22:
		return "VMPTRST", true
	case 23:
		return "VMREAD", true
	case 24:
		return "VMRESUME", true
	case 25:
		return "VMWRITE", true
	case 26:
		return "VMOFF", true
	case 27:
		return "VMON", true
	case 28:
		return "CR_ACCESS", true
	case 29:
		return "DR_ACCESS", true
	case 30:
		return "IO_INSTRUCTION", true
	case 31:
		return "MSR_READ", true
	case 32:
		return "MSR_WRITE", true
	case 33:
		return "INVALID_STATE", true
	case 34:
		return "MSR_LOAD_FAIL", true
	case 36:
		return "MWAIT_INSTRUCTION", true
	case 37:
		return "MONITOR_TRAP_FLAG", true
	case 39:
		return "MONITOR_INSTRUCTION", true
	case 40:
		return "PAUSE_INSTRUCTION", true
	case 41:
		return "MCE_DURING_VMENTRY", true
	case 43:
		return "TPR_BELOW_THRESHOLD", true
	case 44:
		return "APIC_ACCESS", true
	case 45:
		return "EOI_INDUCED", true
	case 46:
		return "GDTR_IDTR", true
	case 47:
		return "LDTR_TR", true
	case 48:
		return "EPT_VIOLATION", true
	case 49:
		return "EPT_MISCONFIG", true
	case 50:
		return "INVEPT", true
	case 51:
		return "RDTSCP", true
	case 52:
		return "PREEMPTION_TIMER", true
	case 53:
		return "INVVPID", true
	case 54:
		return "WBINVD", true
	case 55:
		return "XSETBV", true
	case 56:
		return "APIC_WRITE", true
	case 57:
		return "RDRAND", true
	case 58:
		return "INVPCID", true
	case 59:
		return "VMFUNC", true
	case 60:
		return "ENCLS", true
	case 61:
		return "RDSEED", true
	case 62:
		return "PML_FULL", true
	case 63:
		return "XSAVES", true
	case 64:
		return "XRSTORS", true
	case 67:
		return "UMWAIT", true
	case 68:
		return "TPAUSE", true
	case 74:
		return "BUS_LOCK", true
	case 75:
		return "NOTIFY", true
	case 77:
		return "TDCALL", true
	case 84:
		return "MSR_READ_IMM", true
	case 85:
		return "MSR_WRITE_IMM", true
	}
	return "", false
}

// svmExitReason names SVM exit codes (arch/x86/include/uapi/asm/svm.h).
func svmExitReason(k uint64) (string, bool) {
	switch k {
	case 0x000:
		return "read_cr0", true
	case 0x002:
		return "read_cr2", true
	case 0x003:
		return "read_cr3", true
	case 0x004:
		return "read_cr4", true
	case 0x008:
		return "read_cr8", true
	case 0x010:
		return "write_cr0", true
	case 0x012:
		return "write_cr2", true
	case 0x013:
		return "write_cr3", true
	case 0x014:
		return "write_cr4", true
	case 0x018:
		return "write_cr8", true
	case 0x020:
		return "read_dr0", true
	case 0x021:
		return "read_dr1", true
	case 0x022:
		return "read_dr2", true
	case 0x023:
		return "read_dr3", true
	case 0x024:
		return "read_dr4", true
	case 0x025:
		return "read_dr5", true
	case 0x026:
		return "read_dr6", true
	case 0x027:
		return "read_dr7", true
	case 0x030:
		return "write_dr0", true
	case 0x031:
		return "write_dr1", true
	case 0x032:
		return "write_dr2", true
	case 0x033:
		return "write_dr3", true
	case 0x034:
		return "write_dr4", true
	case 0x035:
		return "write_dr5", true
	case 0x036:
		return "write_dr6", true
	case 0x037:
		return "write_dr7", true
	case 0x040:
		return "DE excp", true
	case 0x041:
		return "DB excp", true
	case 0x043:
		return "BP excp", true
	case 0x044:
		return "OF excp", true
	case 0x045:
		return "BR excp", true
	case 0x046:
		return "UD excp", true
	case 0x047:
		return "NM excp", true
	case 0x048:
		return "DF excp", true
	case 0x04a:
		return "TS excp", true
	case 0x04b:
		return "NP excp", true
	case 0x04c:
		return "SS excp", true
	case 0x04d:
		return "GP excp", true
	case 0x04e:
		return "PF excp", true
	case 0x050:
		return "MF excp", true
	case 0x051:
		return "AC excp", true
	case 0x052:
		return "MC excp", true
	case 0x053:
		return "XF excp", true
	case 0x060:
		return "interrupt", true
	case 0x061:
		return "nmi", true
	case 0x062:
		return "smi", true
	case 0x063:
		return "init", true
	case 0x064:
		return "vintr", true
	case 0x065:
		return "cr0_sel_write", true
	case 0x066:
		return "read_idtr", true
	case 0x067:
		return "read_gdtr", true
	case 0x068:
		return "read_ldtr", true
	case 0x069:
		return "read_rt", true
	case 0x06a:
		return "write_idtr", true
	case 0x06b:
		return "write_gdtr", true
	case 0x06c:
		return "write_ldtr", true
	case 0x06d:
		return "write_rt", true
	case 0x06e:
		return "rdtsc", true
	case 0x06f:
		return "rdpmc", true
	case 0x070:
		return "pushf", true
	case 0x071:
		return "popf", true
	case 0x072:
		return "cpuid", true
	case 0x073:
		return "rsm", true
	case 0x074:
		return "iret", true
	case 0x075:
		return "swint", true
	case 0x076:
		return "invd", true
	case 0x077:
		return "pause", true
	case 0x078:
		return "hlt", true
	case 0x079:
		return "invlpg", true
	case 0x07a:
		return "invlpga", true
	case 0x07b:
		return "io", true
	case 0x07c:
		return "msr", true
	case 0x07d:
		return "task_switch", true
	case 0x07e:
		return "ferr_freeze", true
	case 0x07f:
		return "shutdown", true
	case 0x080:
		return "vmrun", true
	case 0x081:
		return "hypercall", true
	case 0x082:
		return "vmload", true
	case 0x083:
		return "vmsave", true
	case 0x084:
		return "stgi", true
	case 0x085:
		return "clgi", true
	case 0x086:
		return "skinit", true
	case 0x087:
		return "rdtscp", true
	case 0x088:
		return "icebp", true
	case 0x089:
		return "wbinvd", true
	case 0x08a:
		return "monitor", true
	case 0x08b:
		return "mwait", true
	case 0x08d:
		return "xsetbv", true
	case 0x08f:
		return "write_efer_trap", true
	case 0x090:
		return "write_cr0_trap", true
	case 0x094:
		return "write_cr4_trap", true
	case 0x098:
		return "write_cr8_trap", true
	case 0x0a2:
		return "invpcid", true
	case 0x0a5:
		return "buslock", true
	case 0x0a6:
		return "idle-halt", true
	case 0x400:
		return "npf", true
	case 0x401:
		return "avic_incomplete_ipi", true
	case 0x402:
		return "avic_unaccelerated_access", true
	case 0x403:
		return "vmgexit", true
	case 0x8000_0001:
		return "vmgexit_mmio_read", true
	case 0x8000_0002:
		return "vmgexit_mmio_write", true
	case 0x8000_0003:
		return "vmgexit_nmi_complete", true
	case 0x8000_0004:
		return "vmgexit_ap_hlt_loop", true
	case 0x8000_0005:
		return "vmgexit_ap_jump_table", true
	case 0x8000_0010:
		return "vmgexit_page_state_change", true
	case 0x8000_0011:
		return "vmgexit_guest_request", true
	case 0x8000_0012:
		return "vmgexit_ext_guest_request", true
	case 0x8000_0013:
		return "vmgexit_ap_creation", true
	case 0x8000_fffd:
		return "vmgexit_hypervisor_feature", true
	// SVM_EXIT_ERR is -1 as a u32 exit_reason.
	case 0xffff_ffff:
		return "invalid_guest_state", true
	}
	return "", false
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
		if n, ok := svmExitReason(code); ok {
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
	n, ok := vmxExitReason(basic)
	if !ok {
		n = fmt.Sprintf("EXIT_0x%x", basic)
	}
	if full&vmxExitReasonFailedVMEntry != 0 {
		return "FAILED_VMENTRY(" + n + ")"
	}
	return n
}
