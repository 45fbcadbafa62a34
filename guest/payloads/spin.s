// spin: mask every interrupt and loop forever without an exit to the VMM.
// mvm must still stop promptly on SIGINT/SIGTERM (it kicks the vCPU).
	.include "common.inc"

	.text
	.globl	_start
_start:
	adr	x1, msg
	PUTS_BODY
	msr	daifset, #0xf
1:	b	1b

msg:	.asciz	"spinning with interrupts masked\n"
