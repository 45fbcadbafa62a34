// mmiospin: after its message, write the UART's scratch register forever
// with interrupts masked: every iteration is an MMIO exit to mvm, which
// re-enters without polling its stop channel (vcpu runGuest). mvm must
// still stop promptly on SIGINT/SIGTERM and answer a state dump.
	.include "common.inc"

	.text
	.globl	_start
_start:
	adr	x1, msg
	PUTS_BODY
	msr	daifset, #0xf
	mov	x2, #UART_BASE
1:	strb	w2, [x2, #7]		// SCR: a plain read/write register
	b	1b

msg:	.asciz	"spinning on MMIO with interrupts masked\n"
