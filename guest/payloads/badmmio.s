// badmmio: a load pair from a device address. The data abort carries no
// instruction syndrome (ISV = 0), so KVM cannot emulate it and KVM_RUN
// fails: mvm must stop with status 1 and print the vCPU's PC and PSTATE.
	.include "common.inc"

	.text
	.globl	_start
_start:
	mov	x5, #UNMAPPED_ADDR
	ldp	x0, x1, [x5]
	ldr	x0, =PSCI_SYSTEM_OFF	// not reached
	hvc	#0
	b	.
	.ltorg
