// hello: print one line through the UART, then PSCI SYSTEM_OFF.
	.include "common.inc"

	.text
	.globl	_start
_start:
	adr	x1, msg
	PUTS_BODY
	ldr	x0, =PSCI_SYSTEM_OFF
	hvc	#0
	// SYSTEM_OFF does not return; if it does, spin.
1:	wfi
	b	1b

	.ltorg
msg:	.asciz	"hello from the mvm bare-metal payload\n"
