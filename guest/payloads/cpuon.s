// cpuon: measure PSCI CPU_ON latency from inside the guest. For each
// secondary in turn the boot CPU reads the virtual counter, issues CPU_ON,
// and waits for the secondary to store the counter value it read as its
// very first instruction; it prints "cpuon K TICKS" (hex) per secondary,
// then "cntfrq F" and SYSTEM_OFF. The same guest code runs with PSCI in
// mvm or in KVM, so the two are compared on equal terms.
	.include "common.inc"

	.equ SLOTS, 0x40100000		// one 8-byte stamp per vCPU

	.text
	.globl	_start
_start:
	mov	x19, #1			// k: next secondary
	mov	x22, #SLOTS
next:
	// MPIDR of vCPU k in KVM's default layout: Aff1 = k>>4, Aff0 = k&15.
	and	x20, x19, #0xf
	lsr	x1, x19, #4
	orr	x20, x20, x1, lsl #8
	str	xzr, [x22, x19, lsl #3]
	dsb	sy
	isb
	mrs	x21, cntvct_el0
	ldr	x0, =PSCI_CPU_ON64
	mov	x1, x20
	adr	x2, secondary
	mov	x3, x19
	hvc	#0
	cbnz	x0, done		// INVALID_PARAMETERS: no vCPU k
wait:	ldr	x1, [x22, x19, lsl #3]
	cbz	x1, wait
	sub	x23, x1, x21
	adr	x1, m_cpuon
	bl	puts
	mov	x0, x19
	bl	puthex
	mov	w0, #' '
	bl	putc
	mov	x0, x23
	bl	puthex
	mov	w0, #'\n'
	bl	putc
	// Wait until it is off again before the next one.
off:	ldr	x0, =PSCI_AFFINITY_INFO64
	mov	x1, x20
	mov	x2, #0
	hvc	#0
	cmp	x0, #1
	b.ne	off
	add	x19, x19, #1
	b	next
done:
	adr	x1, m_cntfrq
	bl	puts
	mrs	x0, cntfrq_el0
	bl	puthex
	mov	w0, #'\n'
	bl	putc
	ldr	x0, =PSCI_SYSTEM_OFF
	hvc	#0
	b	.

// The secondary's first instructions: stamp, then CPU_OFF. X0 = k.
secondary:
	isb
	mrs	x1, cntvct_el0
	mov	x2, #SLOTS
	str	x1, [x2, x0, lsl #3]
	dsb	sy
	ldr	x0, =PSCI_CPU_OFF
	hvc	#0
	b	.

// putc: print w0. Clobbers x9.
putc:	mov	x9, #UART_BASE
	strb	w0, [x9]
	ret

// puts: print the string at x1. Clobbers x1-x3.
puts:	PUTS_BODY
	ret

// puthex: print x0 as 0x-prefixed hex without leading zeros.
// Clobbers x0-x4, x9, x10.
puthex:	mov	x10, x30
	mov	x4, x0
	mov	w0, #'0'
	bl	putc
	mov	w0, #'x'
	bl	putc
	mov	x2, #60			// shift of the current nibble
	mov	x3, #0			// printed a digit yet?
1:	lsr	x1, x4, x2
	and	x1, x1, #0xf
	cbnz	x1, 2f
	cbnz	x3, 2f
	cbz	x2, 2f			// always print the last digit
	b	3f
2:	mov	x3, #1
	cmp	x1, #10
	add	w0, w1, #'0'
	add	w1, w1, #('a' - 10)
	csel	w0, w1, w0, ge
	bl	putc
3:	subs	x2, x2, #4
	b.ge	1b
	ret	x10

	.ltorg
m_cpuon:	.asciz	"cpuon "
m_cntfrq:	.asciz	"cntfrq "
