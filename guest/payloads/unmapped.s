// unmapped: read and write an address where nothing is mapped, and read
// the first byte past the end of a 64 MiB guest's RAM (0x4400_0000), report
// what the reads returned, then PSCI SYSTEM_OFF. mvm must log the accesses,
// return zero for the reads and let the guest continue.
	.include "common.inc"

	.text
	.globl	_start
_start:
	mov	x5, #UNMAPPED_ADDR
	ldr	w6, [x5]		// unmapped read: mvm returns 0
	mov	w7, #0x5a
	str	w7, [x5]		// unmapped write: dropped
	ldr	w8, [x5, #8]		// a second address
	orr	w6, w6, w8
	mov	x9, #0x44000000		// just past the end of 64 MiB of RAM
	ldr	w8, [x9]
	orr	w6, w6, w8
	adr	x1, zero
	cbz	w6, 1f
	adr	x1, nonzero
1:	PUTS_BODY
	ldr	x0, =PSCI_SYSTEM_OFF
	hvc	#0
2:	wfi
	b	2b

	.ltorg
zero:	.asciz	"unmapped read returned 0\n"
nonzero: .asciz	"unmapped read returned nonzero\n"
