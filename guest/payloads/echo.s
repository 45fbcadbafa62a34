// echo: print "ready", then echo every byte received on the UART back in
// upper case until a 'q' arrives, then PSCI SYSTEM_OFF. Tests the console
// input path (stdin or a terminal -> UART receive FIFO -> guest).
	.include "common.inc"

	.text
	.globl	_start
_start:
	adr	x1, ready
	PUTS_BODY
	mov	x2, #UART_BASE
1:	ldrb	w3, [x2, #UART_LSR]	// poll: data ready?
	tbz	w3, #0, 1b
	ldrb	w3, [x2]		// RBR
	cmp	w3, #'q'
	b.eq	2f
	sub	w4, w3, #'a'
	cmp	w4, #25
	b.hi	3f
	sub	w3, w3, #32		// a-z -> A-Z
3:	strb	w3, [x2]
	b	1b
2:	ldr	x0, =PSCI_SYSTEM_OFF
	hvc	#0
	b	.

	.ltorg
ready:	.asciz	"ready\n"
