// pscistorm: every vCPU hammers PSCI at once, for ROUNDS rounds each
// (integration/hostile_test.go, TestPSCIStorm). Unlike cpuhammer.s, where
// the boot CPU drives each round, here no vCPU waits for another: vCPU k's
// round is
//
//   - for its TARGETS successors j = k+1 .. k+TARGETS (mod N, not k):
//     CPU_ON j (an OFF target starts; an ON one answers ALREADY_ON) and
//     AFFINITY_INFO j;
//   - AFFINITY_INFO of itself (must be ON) and of an MPIDR that does not
//     exist; CPU_ON of an MPIDR that does not exist, and of itself with an
//     entry point below RAM and with a misaligned one;
//   - an SMCCC function nobody implements, by HVC and by SMC (one of 20
//     PSCI-range IDs picked by k and the round: 20 distinct IDs from many
//     vCPUs at once, more than the VMM logs);
//   - then a secondary calls CPU_OFF on itself; whoever CPU_ONs it next
//     restarts it at secondary, where it carries on with its next round.
//
// After its ROUNDS rounds a secondary marks itself done and powers off
// (restarted again, it powers straight off). vCPU 0 never powers off: after
// its own rounds it CPU_ONs every secondary that is not done yet, until all
// are (so none is left OFF with rounds to go), waits until AFFINITY_INFO
// says each is OFF, and prints, summed over all vCPUs (first line first: a
// test can look at the VMM while the rest is printed):
//
//	storm cpus N rounds R starts S successes U offret O timeouts T
//	storm KIND c0 c1 ... c15
//
// one line per KIND (cpu_on, cpu_on_nocpu, cpu_on_outside, cpu_on_misaligned,
// affinity, affinity_self, affinity_nocpu, unknown_hvc, unknown_smc): how
// many calls of that kind returned X0 = i - 9 in column i (i < 15, so
// -9 INVALID_ADDRESS .. 5), column 15 anything else. The PSCI spec
// (DEN0022) decides which columns may be non-zero; the test checks them.
// starts: secondary starts; successes: CPU_ONs that returned SUCCESS (each
// must start exactly one vCPU, so they must be equal); offret: CPU_OFFs
// that returned; timeouts: waits past their deadline. Then SYSTEM_OFF.
//
// The MMU stays off (Device memory, no exclusives): every counter has one
// writer, its vCPU, in its own slot. Secondaries use no stack.
	.include "common.inc"

	.ifndef ROUNDS
	.equ ROUNDS,        12
	.endif
	.equ TARGETS,       4
	.equ MAX_CPUS,      512
	.equ TABLE,         0x40100000      // RAM base + 1 MiB: a slot per vCPU
	.equ SLOT_SHIFT,    11              // 2 KiB slots: up to 0x40200000
	.equ GLOBALS,       0x40200000
	.equ STACK_TOP,     0x40300000      // vCPU 0 only
	.equ WAIT_SECONDS,  60

	.equ S_ROUND,   0                   // rounds this vCPU completed
	.equ S_STARTS,  8                   // times it was started
	.equ S_DONE,    16                  // 1 once its rounds are over
	.equ S_OFFRET,  24                  // CPU_OFFs that returned
	.equ S_HIST,    64                  // NKINDS x 16 counters
	.equ G_NCPUS,   0

	.equ K_ON,            0
	.equ K_ON_NOCPU,      1
	.equ K_ON_OUTSIDE,    2
	.equ K_ON_MISALIGNED, 3
	.equ K_AFF,           4
	.equ K_AFF_SELF,      5
	.equ K_AFF_NOCPU,     6
	.equ K_UNK_HVC,       7
	.equ K_UNK_SMC,       8
	.equ NKINDS,          9

	.equ INVALID_PARAMETERS, -2
	.equ AFF_OFF,   1
	.equ NO_MPIDR,  0xff0000            // Aff2 = 0xff: no vCPU has it
	.equ BELOW_RAM, 0x1000
	.equ UNKNOWN_FID, 0x84000016        // + (k % 10), and its SMC64 form

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

// REC kind: count the result in x0 in the caller's slot (x22).
	.macro REC kind
	sxtw	x9, w0
	add	x9, x9, #9
	mov	x10, #15
	cmp	x9, #14
	csel	x9, x9, x10, ls
	add	x10, x22, #(S_HIST + \kind * 128)
	ldr	x11, [x10, x9, lsl #3]
	add	x11, x11, #1
	str	x11, [x10, x9, lsl #3]
	.endm

// CALL fid: x0 = fid, hvc.
	.macro CALL fid
	ldr	x0, =\fid
	hvc	#0
	.endm

	.text
	.globl	_start
_start:
	ldr	x9, =STACK_TOP
	mov	sp, x9
	// Count the vCPUs: the first index whose MPIDR AFFINITY_INFO rejects.
	mov	x19, #1
1:	MPIDR	x1, x19, x9
	mov	x2, #0
	CALL	PSCI_AFFINITY_INFO64
	sxtw	x0, w0
	cmp	x0, #INVALID_PARAMETERS
	b.eq	2f
	add	x19, x19, #1
	cmp	x19, #MAX_CPUS
	b.lo	1b
2:	mov	x20, x19			// x20 = N
	ldr	x9, =TABLE
	lsl	x10, x20, #SLOT_SHIFT
3:	stp	xzr, xzr, [x9], #16
	subs	x10, x10, #16
	b.ne	3b
	ldr	x9, =GLOBALS
	str	x20, [x9, #G_NCPUS]
	dsb	sy
	mov	x19, #0
	SLOT	x22, x19
	b	storm

// A secondary starts here with X0 = its index (the context_id).
secondary:
	mov	x19, x0
	SLOT	x22, x19
	ldr	x9, =GLOBALS
	ldr	x20, [x9, #G_NCPUS]
	ldr	x9, [x22, #S_STARTS]
	add	x9, x9, #1
	str	x9, [x22, #S_STARTS]
	dsb	sy
	ldr	x9, [x22, #S_DONE]
	cbnz	x9, off

// storm: vCPU x19's rounds; x20 = N, x22 = its slot. vCPU 0 prints
// "storm round 1" after its first round (a point to look at the VMM from
// outside while every vCPU thread exists and the storm is on).
storm:
	ldr	x21, [x22, #S_ROUND]
	cmp	x21, #ROUNDS
	b.hs	finished
	mov	x23, #1
1:	add	x9, x19, x23			// x24 = (k + offset) % N
	udiv	x10, x9, x20
	msub	x24, x10, x20, x9
	cmp	x24, x19
	b.eq	2f
	mov	x1, x24
	bl	cpu_on
	MPIDR	x1, x24, x9
	mov	x2, #0
	CALL	PSCI_AFFINITY_INFO64
	REC	K_AFF
2:	add	x23, x23, #1
	cmp	x23, #TARGETS
	b.ls	1b

	MPIDR	x1, x19, x9
	mov	x2, #0
	CALL	PSCI_AFFINITY_INFO64
	REC	K_AFF_SELF
	ldr	x1, =NO_MPIDR
	mov	x2, #0
	CALL	PSCI_AFFINITY_INFO64
	REC	K_AFF_NOCPU
	ldr	x1, =NO_MPIDR
	adr	x2, secondary
	mov	x3, #0
	CALL	PSCI_CPU_ON64
	REC	K_ON_NOCPU
	MPIDR	x1, x19, x9
	mov	x2, #BELOW_RAM
	mov	x3, #0
	CALL	PSCI_CPU_ON64
	REC	K_ON_OUTSIDE
	MPIDR	x1, x19, x9
	adr	x2, secondary
	add	x2, x2, #2
	mov	x3, #0
	CALL	PSCI_CPU_ON64
	REC	K_ON_MISALIGNED

	// An unimplemented function, i = (k + round) % 20: 0x84000016 + i
	// for i < 10, else its 64-bit form 0xC4000016 + i - 10. Over the
	// rounds the vCPUs together call all 20 (when N + ROUNDS >= 20).
	add	x9, x19, x21
	mov	x10, #20
	udiv	x11, x9, x10
	msub	x25, x11, x10, x9
	ldr	x9, =UNKNOWN_FID
	add	x25, x25, x9
	sub	x9, x25, #10
	orr	x9, x9, #0x40000000
	ldr	x10, =(UNKNOWN_FID + 10)
	cmp	x25, x10
	csel	x25, x25, x9, lo
	mov	x0, x25
	hvc	#0
	REC	K_UNK_HVC
	mov	x0, x25
	smc	#0
	REC	K_UNK_SMC

	add	x21, x21, #1
	str	x21, [x22, #S_ROUND]
	dsb	sy
	cbnz	x19, off
	cmp	x21, #1				// vCPU 0 stays on; says when
	b.ne	storm				// its first round is over
	PRINT	"storm round 1\n"
	b	storm
off:	dsb	sy
	CALL	PSCI_CPU_OFF
	ldr	x9, [x22, #S_OFFRET]
	add	x9, x9, #1
	str	x9, [x22, #S_OFFRET]
	dsb	sy
1:	wfi
	b	1b

finished:
	cbz	x19, primary
	mov	x9, #1
	str	x9, [x22, #S_DONE]
	b	off

// cpu_on: CPU_ON of vCPU x1 (index, also the context_id) at secondary,
// counted under K_ON. Clobbers x0-x3, x9-x11.
cpu_on:
	mov	x3, x1
	MPIDR	x1, x3, x9
	adr	x2, secondary
	ldr	x0, =PSCI_CPU_ON64
	hvc	#0
	REC	K_ON
	dsb	sy
	ret

// vCPU 0, its rounds over: keep starting every secondary that is not done,
// until all are; then wait for each to be OFF.
primary:
	mrs	x25, cntfrq_el0
	mov	x9, #WAIT_SECONDS
	mul	x25, x25, x9
	mrs	x26, cntvct_el0
	add	x26, x26, x25			// x26 = deadline
	mov	x27, #0				// timeouts
1:	mov	x28, #0				// secondaries not done
	mov	x24, #1
2:	cmp	x24, x20
	b.hs	3f
	SLOT	x9, x24
	dsb	sy
	ldr	x9, [x9, #S_DONE]
	cbnz	x9, 4f
	add	x28, x28, #1
	mov	x1, x24
	bl	cpu_on
4:	add	x24, x24, #1
	b	2b
3:	cbz	x28, 5f
	mrs	x9, cntvct_el0
	cmp	x9, x26
	b.lo	1b
	add	x27, x27, #1			// some never finished
5:	mov	x24, #1
6:	cmp	x24, x20
	b.hs	report
7:	MPIDR	x1, x24, x9
	mov	x2, #0
	CALL	PSCI_AFFINITY_INFO64
	cmp	w0, #AFF_OFF
	b.eq	8f
	mrs	x9, cntvct_el0
	cmp	x9, x26
	b.lo	7b
	add	x27, x27, #1
8:	add	x24, x24, #1
	b	6b

// report: sum the slots of all vCPUs and print them.
report:
	dsb	sy
	mov	x23, #0				// starts
	mov	x24, #0				// offret
	mov	x19, #0
1:	SLOT	x9, x19
	ldr	x10, [x9, #S_STARTS]
	add	x23, x23, x10
	ldr	x10, [x9, #S_OFFRET]
	add	x24, x24, x10
	add	x19, x19, #1
	cmp	x19, x20
	b.lo	1b
	PRINT	"storm cpus "
	mov	x1, x20
	bl	putdec
	PRINT	" rounds "
	mov	x1, #ROUNDS
	bl	putdec
	PRINT	" starts "
	mov	x1, x23
	bl	putdec
	PRINT	" successes "
	mov	x21, #(S_HIST + K_ON * 128 + 9 * 8)
	bl	colsum
	bl	putdec
	PRINT	" offret "
	mov	x1, x24
	bl	putdec
	PRINT	" timeouts "
	mov	x1, x27
	bl	putdec
	bl	newline
	adr	x26, kindnames
	mov	x25, #0				// kind
1:	PRINT	"storm "
	mov	x1, x26
	bl	puts
	mov	x26, x1				// puts leaves x1 past the NUL
	mov	x23, #0				// column
2:	mov	x9, #128
	mul	x21, x25, x9
	add	x21, x21, x23, lsl #3
	add	x21, x21, #S_HIST
	bl	colsum
	mov	x9, #' '
	mov	x10, #UART_BASE
	strb	w9, [x10]
	bl	putdec
	add	x23, x23, #1
	cmp	x23, #16
	b.lo	2b
	bl	newline
	add	x25, x25, #1
	cmp	x25, #NKINDS
	b.lo	1b
	CALL	PSCI_SYSTEM_OFF
	b	.

// colsum: x1 = the sum over all N slots of the counter at offset x21.
// Clobbers x9-x11.
colsum:
	mov	x1, #0
	mov	x11, #0
1:	ldr	x9, =TABLE
	add	x9, x9, x11, lsl #SLOT_SHIFT
	ldr	x10, [x9, x21]
	add	x1, x1, x10
	add	x11, x11, #1
	cmp	x11, x20
	b.lo	1b
	ret

	.include "print.inc"
	.ltorg
kindnames:
	.asciz	"cpu_on"
	.asciz	"cpu_on_nocpu"
	.asciz	"cpu_on_outside"
	.asciz	"cpu_on_misaligned"
	.asciz	"affinity"
	.asciz	"affinity_self"
	.asciz	"affinity_nocpu"
	.asciz	"unknown_hvc"
	.asciz	"unknown_smc"
