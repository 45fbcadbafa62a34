// sysregs: SYSREG_COUNT reads of ID_AA64MMFR0_EL1, each trapped by KVM
// (HCR_EL2.TID3) and handled in the kernel (kvm_exit, kvm_handle_sys_reg,
// kvm_entry: the three events of the boot's commonest exit, SYS64), then
// PSCI SYSTEM_OFF. BenchmarkExitFloor times what the tracepoints' BPF
// programs add per exit.
	.include "common.inc"

	.ifndef SYSREG_COUNT
	.equ SYSREG_COUNT, 50000
	.endif

	.text
	.globl	_start
_start:
	ldr	x4, =SYSREG_COUNT
1:	mrs	x1, ID_AA64MMFR0_EL1
	subs	x4, x4, #1
	b.ne	1b
	ldr	x0, =PSCI_SYSTEM_OFF
	hvc	#0
	b	.
	.ltorg
