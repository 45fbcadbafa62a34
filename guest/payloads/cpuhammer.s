// cpuhammer: many rounds of PSCI CPU_ON / CPU_OFF on every vCPU, with
// racing CPU_ONs for the same target. integration/smp_test.go runs it on
// 64+ vCPUs. Each round r:
//
//   - the boot CPU sets ROUND = r and issues CPU_ON for every secondary
//     that has not run in round r yet;
//   - a secondary k, once started, stamps its slot with r, counts its own
//     start, issues CPU_ON for vCPU k+1 if that one has not run in round r
//     (so two CPU_ONs race for most targets: exactly one may succeed, the
//     other must see ALREADY_ON), then calls CPU_OFF;
//   - the boot CPU waits until every secondary has stamped r and
//     AFFINITY_INFO says it is OFF, then checks that the successful
//     CPU_ONs of all callers add up to the starts of all secondaries.
//
// At the end it prints one line and calls SYSTEM_OFF:
//
//	hammer cpus N rounds R starts S errors E mismatches M timeouts T badentry B
//
// errors: CPU_ON results other than SUCCESS and ALREADY_ON, or a CPU_OFF
// that returned; mismatches: rounds where successes != starts; timeouts:
// waits that passed their deadline (a lost CPU_ON or wake-up); badentry:
// starts whose entry state was not PSCI's (EL1 on SP_EL1, D, A, I and F
// masked, SCTLR_EL1's M, A, C and I clear: MMU, alignment check and
// caches off), although every secondary leaves that state changed before
// its CPU_OFF (unmasks D and A, switches to SP_EL0, sets SCTLR_EL1.A and
// .I), so a VMM that does not reset it on the next CPU_ON is caught. Each
// wait has a deadline read from the generic timer, so a broken VMM shows
// up as non-zero counts, not as a hang.
//
// The MMU stays off (Device memory: no exclusives), so every counter has a
// single writer: its vCPU's own slot; loads and stores are ordered with DSB.
	.include "common.inc"

	.equ ROUNDS,        24
	.equ MAX_CPUS,      512
	.equ TABLE,         0x40100000      // RAM base + 1 MiB: one slot per vCPU
	.equ SLOT_SHIFT,    6               // 64-byte slots
	.equ GLOBALS,       0x40180000      // ROUND, NCPUS
	.equ STACK_TOP,     0x40200000
	.equ WAIT_SECONDS,  30

	.equ S_ROUND,   0                   // last round this vCPU ran in
	.equ S_STARTS,  8                   // times this vCPU was started
	.equ S_SUCC,    16                  // CPU_ONs this vCPU made that succeeded
	.equ S_ERRS,    24                  // unexpected PSCI results it saw
	.equ S_BAD,     32                  // starts with a wrong entry state
	.equ G_ROUND,   0
	.equ G_NCPUS,   8

	.equ ENTRY_DAIF, 0x3c0               // D, A, I, F masked
	.equ SCTLR_OFF_BITS, 0x1007          // M, A, C, I (SCTLR_EL1 bits 0, 1, 2, 12)
	.equ ALREADY_ON, -4
	.equ INVALID_PARAMETERS, -2
	.equ AFF_OFF,   1

	.macro SLOT dst, k
	ldr	\dst, =TABLE
	add	\dst, \dst, \k, lsl #SLOT_SHIFT
	.endm

// MPIDR dst, k: KVM's default affinity of vCPU k (Aff1 = k >> 4, Aff0 = k & 15).
	.macro MPIDR dst, k, tmp
	and	\dst, \k, #0xf
	lsr	\tmp, \k, #4
	orr	\dst, \dst, \tmp, lsl #8
	.endm

	.text
	.globl	_start
_start:
	ldr	x9, =STACK_TOP
	mov	sp, x9
	// Clear the table and count the vCPUs with AFFINITY_INFO.
	ldr	x9, =TABLE
	mov	x10, #(MAX_CPUS << SLOT_SHIFT)
1:	str	xzr, [x9], #8
	subs	x10, x10, #8
	b.ne	1b
	mov	x19, #1
2:	MPIDR	x1, x19, x9
	mov	x2, #0
	ldr	x0, =PSCI_AFFINITY_INFO64
	hvc	#0
	sxtw	x0, w0
	cmp	x0, #INVALID_PARAMETERS
	b.eq	3f
	add	x19, x19, #1
	cmp	x19, #MAX_CPUS
	b.lo	2b
3:	mov	x20, x19			// x20 = N
	ldr	x9, =GLOBALS
	str	x20, [x9, #G_NCPUS]
	mrs	x25, cntfrq_el0
	mov	x9, #WAIT_SECONDS
	mul	x25, x25, x9			// x25 = deadline length in ticks
	mov	x24, #0				// timeouts
	mov	x26, #0				// mismatches
	mov	x21, #1				// x21 = round
round:
	ldr	x9, =GLOBALS
	str	x21, [x9, #G_ROUND]
	dsb	sy
	mov	x19, #1
on:	cmp	x19, x20
	b.hs	waitrun
	SLOT	x22, x19
	ldr	x9, [x22, #S_ROUND]
	cmp	x9, x21
	b.eq	3f				// already ran this round
	mov	x0, #0				// our own slot: vCPU 0
	mov	x1, x19
	bl	cpu_on
3:	add	x19, x19, #1
	b	on
	// Every secondary stamps this round...
waitrun:
	mrs	x23, cntvct_el0
	add	x23, x23, x25
	mov	x19, #1
1:	cmp	x19, x20
	b.hs	waitoff
	SLOT	x22, x19
2:	dsb	sy
	ldr	x9, [x22, #S_ROUND]
	cmp	x9, x21
	b.eq	3f
	mrs	x9, cntvct_el0
	cmp	x9, x23
	b.lo	2b
	add	x24, x24, #1			// timed out waiting for vCPU x19
3:	add	x19, x19, #1
	b	1b
	// ... and is OFF again (no start pending either).
waitoff:
	mrs	x23, cntvct_el0
	add	x23, x23, x25
	mov	x19, #1
1:	cmp	x19, x20
	b.hs	check
2:	MPIDR	x1, x19, x9
	mov	x2, #0
	ldr	x0, =PSCI_AFFINITY_INFO64
	hvc	#0
	cmp	w0, #AFF_OFF
	b.eq	3f
	mrs	x9, cntvct_el0
	cmp	x9, x23
	b.lo	2b
	add	x24, x24, #1
3:	add	x19, x19, #1
	b	1b
	// Successful CPU_ONs of every caller == starts of every secondary.
check:
	dsb	sy
	mov	x9, #0				// successes
	mov	x10, #0				// starts
	mov	x19, #0
1:	SLOT	x22, x19
	ldr	x11, [x22, #S_SUCC]
	add	x9, x9, x11
	ldr	x11, [x22, #S_STARTS]
	add	x10, x10, x11
	add	x19, x19, #1
	cmp	x19, x20
	b.lo	1b
	cmp	x9, x10
	b.eq	2f
	add	x26, x26, #1
2:	add	x21, x21, #1
	cmp	x21, #ROUNDS
	b.ls	round

	// Report.
	mov	x27, x10			// total starts
	mov	x28, #0				// total errors
	mov	x23, #0				// total bad entries
	mov	x19, #0
1:	SLOT	x22, x19
	ldr	x11, [x22, #S_ERRS]
	add	x28, x28, x11
	ldr	x11, [x22, #S_BAD]
	add	x23, x23, x11
	add	x19, x19, #1
	cmp	x19, x20
	b.lo	1b
	PRINT	"hammer cpus "
	mov	x1, x20
	bl	putdec
	PRINT	" rounds "
	mov	x1, #ROUNDS
	bl	putdec
	PRINT	" starts "
	mov	x1, x27
	bl	putdec
	PRINT	" errors "
	mov	x1, x28
	bl	putdec
	PRINT	" mismatches "
	mov	x1, x26
	bl	putdec
	PRINT	" timeouts "
	mov	x1, x24
	bl	putdec
	PRINT	" badentry "
	mov	x1, x23
	bl	putdec
	bl	newline
	ldr	x0, =PSCI_SYSTEM_OFF
	hvc	#0
	b	.

// cpu_on: CPU_ON of vCPU x1 (index) by the vCPU whose index is in x0,
// counted in the caller's slot. Clobbers x0-x3, x9-x12.
cpu_on:
	mov	x12, x0
	mov	x3, x1				// context_id = target index
	MPIDR	x1, x3, x9
	adr	x2, secondary
	ldr	x0, =PSCI_CPU_ON64
	hvc	#0
	sxtw	x0, w0
	SLOT	x11, x12
	cbnz	x0, 1f
	ldr	x9, [x11, #S_SUCC]
	add	x9, x9, #1
	str	x9, [x11, #S_SUCC]
	b	2f
1:	cmp	x0, #ALREADY_ON
	b.eq	2f
	ldr	x9, [x11, #S_ERRS]
	add	x9, x9, #1
	str	x9, [x11, #S_ERRS]
2:	dsb	sy
	ret

// A secondary starts here with X0 = its index k (the context_id). It has
// no stack: it only uses registers.
secondary:
	mov	x19, x0
	SLOT	x22, x19
	// The entry state (see the top): any difference counts once.
	mrs	x9, CurrentEL
	cmp	x9, #(1 << 2)			// EL1
	mrs	x9, spsel
	ccmp	x9, #1, #0, eq			// on SP_EL1
	mrs	x9, daif
	mov	x10, #ENTRY_DAIF
	ccmp	x9, x10, #0, eq
	mrs	x9, sctlr_el1
	mov	x10, #SCTLR_OFF_BITS
	and	x9, x9, x10
	ccmp	x9, #0, #0, eq
	b.eq	1f
	ldr	x9, [x22, #S_BAD]
	add	x9, x9, #1
	str	x9, [x22, #S_BAD]
1:
	ldr	x9, =GLOBALS
	ldr	x21, [x9, #G_ROUND]
	ldr	x20, [x9, #G_NCPUS]
	ldr	x9, [x22, #S_STARTS]
	add	x9, x9, #1
	str	x9, [x22, #S_STARTS]
	str	x21, [x22, #S_ROUND]
	dsb	sy
	// Race the boot CPU for the next vCPU, if it has not run this round.
	add	x1, x19, #1
	cmp	x1, x20
	b.hs	off
	SLOT	x9, x1
	ldr	x10, [x9, #S_ROUND]
	cmp	x10, x21
	b.eq	off
	mov	x0, x19
	bl	cpu_on
off:	dsb	sy
	// Leave the state changed for the next start to find reset.
	msr	daifclr, #0xc			// unmask D and A
	msr	spsel, #0
	mrs	x9, sctlr_el1
	mov	x10, #((1 << 1) | (1 << 12))	// A, I
	orr	x9, x9, x10
	msr	sctlr_el1, x9
	isb
	ldr	x0, =PSCI_CPU_OFF
	hvc	#0
	// CPU_OFF returned: an error.
	ldr	x9, [x22, #S_ERRS]
	add	x9, x9, #1
	str	x9, [x22, #S_ERRS]
	dsb	sy
	b	.

	.include "print.inc"
	.ltorg
