// reboot: count boots in a RAM word that survives a warm reset, print
// "boot N", and ask for PSCI SYSTEM_RESET until the third boot, which powers
// off. With --on-reset reboot mvm must boot it three times in one process.
	.include "common.inc"

	.equ COUNTER, 0x40200000	// past the payload, inside any RAM size

	.text
	.globl	_start
_start:
	mov	x5, #COUNTER
	ldr	x6, [x5]
	add	x6, x6, #1
	str	x6, [x5]
	adr	x1, msg
	PUTS_BODY
	mov	x2, #UART_BASE
	add	w3, w6, #'0'
	strb	w3, [x2]
	mov	w3, #'\n'
	strb	w3, [x2]
	cmp	x6, #3
	b.ge	1f
	ldr	x0, =PSCI_SYSTEM_RESET
	hvc	#0
	b	.
1:	ldr	x0, =PSCI_SYSTEM_OFF
	hvc	#0
	b	.

	.ltorg
msg:	.asciz	"boot "
