// pmu: the guest PMU as bare metal sees it, on two vCPUs (vCPU 1 started
// by CPU_ON, i.e. after mvm re-initialised it with KVM_ARM_VCPU_INIT).
// Each vCPU prints one line,
//
//	pmu cpu K pmuver V pmcr 0xP n N cycles A B
//	pmu cpu K pmuver V pmcr undef
//
// V is ID_AA64DFR0_EL1.PMUVer (bits 11:8; 0 = no PMU). The payload then
// reads PMCR_EL0 whatever V says: with a PMU it prints PMCR and its N
// (event counters), enables the cycle counter (PMCCFILTR_EL0 = 0 counts
// EL1, PMCNTENSET_EL0.C, PMCR_EL0.E|C|LC) and reads PMCCNTR_EL0 before and
// after a busy loop (A, B); without one KVM makes the PMU registers
// UNDEFINED, the read takes an Unknown-reason exception (EC 0), which the
// vector counts and skips, and the line says "pmcr undef". vCPU 0 prints
// first, starts vCPU 1, waits for its line, prints "pmu done" and calls
// SYSTEM_OFF. Any other exception prints "error exception esr ... elr ...".
	.include "common.inc"

	.equ DATA,      0x40100000      // RAM base + 1 MiB: vCPU 1's done flag
	.equ STACK0,    0x40200000
	.equ STACK1,    0x40210000
	.equ LOOPS,     100000
	.equ WAIT_SECONDS, 30

	// PMCR_EL0 bits (Arm ARM D13.4.7): E enable, C reset the cycle
	// counter, LC 64-bit cycle counter overflow.
	.equ PMCR_E,    1 << 0
	.equ PMCR_C,    1 << 2
	.equ PMCR_LC,   1 << 6
	.equ PMCNTEN_C, 1 << 31         // PMCNTENSET_EL0.C: the cycle counter

	.text
	.globl	_start
_start:
	ldr	x9, =STACK0
	mov	sp, x9
	adr	x9, vectors
	msr	vbar_el1, x9
	isb
	ldr	x9, =DATA
	str	xzr, [x9]
	mov	x19, #0
	bl	pmucheck

	ldr	x0, =PSCI_CPU_ON64
	mov	x1, #1                  // vCPU 1's MPIDR
	adr	x2, secondary
	mov	x3, #1
	hvc	#0
	cbz	w0, 1f
	sxtw	x20, w0
	PRINT	"error cpu_on ret "
	mov	x1, x20
	bl	putdec
	bl	newline
	b	off

	// Wait for vCPU 1's line, at most WAIT_SECONDS of the virtual counter.
1:	mrs	x20, cntfrq_el0
	mov	x9, #WAIT_SECONDS
	mul	x20, x20, x9
	mrs	x9, cntvct_el0
	add	x20, x20, x9
	ldr	x9, =DATA
2:	ldr	x10, [x9]
	cbnz	x10, 3f
	mrs	x11, cntvct_el0
	cmp	x11, x20
	b.lo	2b
	PRINT	"error vCPU 1 did not report\n"
	b	off
3:	PRINT	"pmu done\n"
off:	ldr	x0, =PSCI_SYSTEM_OFF
	hvc	#0
	b	.

// secondary: vCPU 1's entry, X0 = context = 1.
secondary:
	ldr	x9, =STACK1
	mov	sp, x9
	adr	x9, vectors
	msr	vbar_el1, x9
	isb
	mov	x19, x0
	bl	pmucheck
	ldr	x9, =DATA
	mov	x10, #1
	str	x10, [x9]
	dsb	sy
	ldr	x0, =PSCI_CPU_OFF
	hvc	#0
	b	.

// pmucheck: print vCPU x19's PMU line. Uses x20-x24; x21 counts the
// UNDEFINED exceptions the vector skipped.
pmucheck:
	stp	x29, x30, [sp, #-16]!
	PRINT	"pmu cpu "
	mov	x1, x19
	bl	putdec
	PRINT	" pmuver "
	mrs	x20, id_aa64dfr0_el1
	ubfx	x1, x20, #8, #4
	bl	putdec
	mov	x21, #0
	mrs	x22, pmcr_el0
	cbz	x21, 1f
	PRINT	" pmcr undef\n"
	b	9f
1:	PRINT	" pmcr "
	mov	x1, x22
	bl	puthex
	PRINT	" n "
	ubfx	x1, x22, #11, #5
	bl	putdec
	msr	pmccfiltr_el0, xzr
	mov	x9, #PMCNTEN_C
	msr	pmcntenset_el0, x9
	mov	x9, #(PMCR_E | PMCR_C | PMCR_LC)
	msr	pmcr_el0, x9
	isb
	mrs	x23, pmccntr_el0
	ldr	x9, =LOOPS
2:	subs	x9, x9, #1
	b.ne	2b
	isb
	mrs	x24, pmccntr_el0
	PRINT	" cycles "
	mov	x1, x23
	bl	putdec
	PRINT	" "
	mov	x1, x24
	bl	putdec
	bl	newline
9:	ldp	x29, x30, [sp], #16
	ret

// Exceptions: only the current-EL-with-SPx synchronous vector (offset
// 0x200) expects anything, an UNDEFINED system register access (ESR_EL1.EC
// 0, Unknown reason), which it counts in x21 and skips.
	.balign	2048
vectors:
	.rept	4
	.balign	128
	b	unexpected
	.endr
	.balign	128
	stp	x9, x10, [sp, #-16]!
	mrs	x9, esr_el1
	lsr	x9, x9, #26             // EC
	cbnz	x9, 1f
	add	x21, x21, #1
	mrs	x10, elr_el1
	add	x10, x10, #4
	msr	elr_el1, x10
	ldp	x9, x10, [sp], #16
	eret
1:	ldp	x9, x10, [sp], #16
	b	unexpected
	.rept	11
	.balign	128
	b	unexpected
	.endr

unexpected:
	mrs	x20, esr_el1
	mrs	x22, elr_el1
	PRINT	"error exception esr "
	mov	x1, x20
	bl	puthex
	PRINT	" elr "
	mov	x1, x22
	bl	puthex
	bl	newline
	b	off

	.include "print.inc"
	.ltorg
