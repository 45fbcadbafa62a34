// pl011_garbage (mvm run --serial pl011): every 8-byte slot of the PL011's
// 4 KiB is written with a changing pattern and read back at every naturally
// aligned width (bytes at 0, 1 and 3, halfwords at 0 and 2, a word at 4, a
// doubleword at 0): a storm over the data, control, mask, clear and id
// registers and the reserved space between them. With the MMU off the
// accesses are Device-nGnRnE, so each must be aligned (no pairs either:
// they carry no syndrome). Then the UART is put back in order (CR
// UARTEN|TXE|RXE, loopback off; IMSC 0) and the payload prints
// "ok pl011-garbage" and powers off: mvm must have survived all of it.
	.include "common.inc"

	.equ PL011_CR,   0x30
	.equ PL011_IMSC, 0x38

	.text
	.globl	_start
_start:
	mov	x2, #UART_BASE
	mov	x4, #0			// offset of the slot
	ldr	x5, =0xdeadbeefcafef00d	// the pattern, rotated each slot
1:	add	x6, x2, x4
	strb	w5, [x6]
	strb	w5, [x6, #1]
	strb	w5, [x6, #3]
	strh	w5, [x6, #2]
	str	w5, [x6, #4]
	str	x5, [x6]
	ldrb	w7, [x6, #1]
	ldrh	w7, [x6, #2]
	ldr	w7, [x6, #4]
	ldr	x7, [x6]
	ror	x5, x5, #7
	add	x4, x4, #8
	cmp	x4, #0x1000
	b.ne	1b

	mov	w7, #0x301		// UARTEN | TXE | RXE
	str	w7, [x2, #PL011_CR]
	str	wzr, [x2, #PL011_IMSC]
	adr	x1, msg
	PUTS_BODY
	ldr	x0, =PSCI_SYSTEM_OFF
	hvc	#0
2:	wfi
	b	2b

	.ltorg
msg:	.asciz	"\nok pl011-garbage\n"
