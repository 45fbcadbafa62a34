// smp: a bare-metal PSCI test for several vCPUs. It prints one parseable
// line per fact (integration/smp_test.go reads them), then PSCI SYSTEM_OFF:
//
//	psci version 0x10001          PSCI_VERSION
//	features cpu_on 0             PSCI_FEATURES(CPU_ON64), signed decimal
//	features migrate -1           PSCI_FEATURES(MIGRATE), signed decimal
//	cpus N                        AFFINITY_INFO probing, vCPU 1, 2, ... until
//	                              INVALID_PARAMETERS
//	cpu_on K ret R                only when CPU_ON of secondary K fails
//	cpu K mpidr 0x.. x0 0x..      one per secondary K, from its RAM slot
//	spin cpu1 mpidr 0x.. x0 0x..  secondary 1 started again, now spinning
//	cpu_on spin ret R             that CPU_ON's result (0)
//	cpu_on again ret R            CPU_ON of the spinning vCPU 1 (-4 ALREADY_ON)
//	affinity cpu1 S               AFFINITY_INFO of vCPU 1 (0 ON)
//	cpu_on invalid ret R          CPU_ON of MPIDR 0xff00ff (-2)
//	smp test done
//
// Anything unexpected on the way prints a line starting with "error" and
// the test goes on (every wait has a deadline read from the generic timer),
// so a broken VMM shows up as a failed check rather than a hang.
//
// The MMU stays off: every data access is Device memory, so no exclusives
// or atomics; plain loads and stores to RAM, ordered with DSB, are coherent
// between vCPUs. Per-CPU slots live in RAM at TABLE, past the code.
	.include "common.inc"

	.equ PSCI_MIGRATE,  0x84000005
	.equ MAX_CPUS,      512             // mvm's limit; slot MAX_CPUS = overflow
	.equ TABLE,         0x40100000      // RAM base + 1 MiB
	.equ SLOT_SHIFT,    6               // 64-byte slots
	.equ STACK_TOP,     0x40200000      // RAM base + 2 MiB, grows down
	.equ CTX_BASE,      0x1000          // context_id of secondary k = CTX_BASE + k
	.equ CTX_SPIN,      0x2000          // context_id of the second start of vCPU 1
	.equ WAIT_SECONDS,  60              // deadline of each waiting phase
	.equ INVALID_MPIDR, 0xff00ff        // Aff0 = 255: no KVM default MPIDR has it

	// slot fields: written by the secondary ...
	.equ S_MPIDR,   0                   // its MPIDR_EL1
	.equ S_X0,      8                   // its X0 on entry (context_id)
	.equ S_DONE,    16                  // 1 once the two above are stored
	.equ S_OFFRET,  24                  // CPU_OFF's return value, if it returned
	.equ S_OFFFAIL, 32                  // 1 if CPU_OFF returned
	// ... and by the primary
	.equ S_ONRET,   40                  // CPU_ON's result for this vCPU

	.equ AFF_OFF,   1                   // AFFINITY_INFO: 0 ON, 1 OFF, 2 ON_PENDING

// PSCI fid: hvc #0 with X0 = fid (X1..X3 set by the caller); the result,
// sign-extended from 32 bits as Linux's PSCI driver reads it, lands in dst.
	.macro PSCI dst, fid
	ldr	x0, =\fid
	hvc	#0
	sxtw	\dst, w0
	.endm

// SLOT dst, k: dst = address of vCPU k's slot.
	.macro SLOT dst, k
	ldr	\dst, =TABLE
	add	\dst, \dst, \k, lsl #SLOT_SHIFT
	.endm

// DEADLINE: x23 = now + WAIT_SECONDS (x25 = counter frequency).
	.macro DEADLINE
	isb
	mrs	x9, cntvct_el0
	mov	x10, #WAIT_SECONDS
	madd	x23, x25, x10, x9
	.endm

// EXPIRED label: branch to label once the deadline in x23 has passed.
	.macro EXPIRED label
	isb
	mrs	x9, cntvct_el0
	cmp	x9, x23
	b.hs	\label
	.endm

	.text
	.globl	_start
_start:
	mov	x9, #STACK_TOP
	mov	sp, x9

	// Clear the slots (RAM starts zeroed; do not rely on it).
	ldr	x9, =TABLE
	ldr	x10, =TABLE + ((MAX_CPUS + 1) << SLOT_SHIFT)
1:	stp	xzr, xzr, [x9], #16
	cmp	x9, x10
	b.lo	1b
	dsb	sy

	// Timer event stream: a WFE wakes at least every 2^16 counter ticks
	// (about 1 ms at 62.5 MHz) even if no SEV comes, so waiting loops can
	// use WFE (which, when KVM traps it, also yields to other vCPUs).
	mrs	x9, cntkctl_el1
	bic	x9, x9, #0xf8			// EVNTI, EVNTDIR
	orr	x9, x9, #(15 << 4)		// EVNTI = 15
	orr	x9, x9, #(1 << 2)		// EVNTEN
	msr	cntkctl_el1, x9
	isb
	mrs	x25, cntfrq_el0
	cbnz	x25, 1f
	ldr	x25, =62500000			// CNTFRQ not set: assume QEMU's
1:

	// 1. PSCI_VERSION: a 32-bit version word, printed in hex.
	ldr	x0, =PSCI_VERSION
	hvc	#0
	mov	w24, w0
	PRINT	"psci version "
	mov	x1, x24
	bl	puthex
	bl	newline

	// 2. PSCI_FEATURES of CPU_ON64 (implemented: 0) and MIGRATE (-1).
	ldr	x1, =PSCI_CPU_ON64
	PSCI	x24, PSCI_FEATURES
	PRINT	"features cpu_on "
	mov	x1, x24
	bl	putdec
	bl	newline
	ldr	x1, =PSCI_MIGRATE
	PSCI	x24, PSCI_FEATURES
	PRINT	"features migrate "
	mov	x1, x24
	bl	putdec
	bl	newline

	// 3. Count vCPUs: AFFINITY_INFO(level 0) of vCPU 1, 2, ... in KVM's
	// default MPIDR layout until the first error (INVALID_PARAMETERS).
	mov	x21, #1
1:	cmp	x21, #MAX_CPUS
	b.hs	3f
	mov	x1, x21
	bl	mpidr_of
	mov	x2, #0
	PSCI	x24, PSCI_AFFINITY_INFO64
	tbnz	x24, #63, 2f
	add	x21, x21, #1
	b	1b
2:	cmn	x24, #2				// INVALID_PARAMETERS ends the probe
	b.eq	3f
	PRINT	"error affinity_info probe cpu "
	mov	x1, x21
	bl	putdec
	PRINT	" ret "
	mov	x1, x24
	bl	putdec
	bl	newline
3:	mov	x19, x21			// x19 = number of vCPUs
	PRINT	"cpus "
	mov	x1, x19
	bl	putdec
	bl	newline
	cmp	x19, #1
	b.ls	invalid				// no secondaries

	// 4. Start every secondary back to back, then wait for them.
	adr	x22, secondary_off
	mov	x21, #1
1:	mov	x1, x21
	bl	mpidr_of
	mov	x2, x22
	mov	x3, #CTX_BASE
	add	x3, x3, x21
	PSCI	x24, PSCI_CPU_ON64
	SLOT	x26, x21
	str	x24, [x26, #S_ONRET]
	cbz	x24, 2f
	PRINT	"cpu_on "
	mov	x1, x21
	bl	putdec
	PRINT	" ret "
	mov	x1, x24
	bl	putdec
	bl	newline
2:	add	x21, x21, #1
	cmp	x21, x19
	b.lo	1b

	// 5. Wait for each started secondary: its done word, then
	// AFFINITY_INFO = OFF (it called CPU_OFF).
	DEADLINE
	mov	x21, #1
wait_next:
	SLOT	x26, x21
	ldr	x9, [x26, #S_ONRET]
	cbnz	x9, wait_skip			// CPU_ON failed: already reported
1:	dsb	sy
	ldr	x9, [x26, #S_DONE]
	cbnz	x9, 2f
	EXPIRED	wait_timeout
	wfe
	b	1b
2:	mov	x1, x21
	bl	mpidr_of
	mov	x2, #0
	PSCI	x24, PSCI_AFFINITY_INFO64
	cmp	x24, #AFF_OFF
	b.eq	wait_skip
	EXPIRED	wait_timeout
	wfe
	b	2b
wait_timeout:
	PRINT	"error cpu "
	mov	x1, x21
	bl	putdec
	PRINT	" timeout done "
	ldr	x1, [x26, #S_DONE]
	bl	putdec
	PRINT	" affinity "
	mov	x1, x21
	bl	mpidr_of
	mov	x2, #0
	PSCI	x1, PSCI_AFFINITY_INFO64
	bl	putdec
	bl	newline
wait_skip:
	add	x21, x21, #1
	cmp	x21, x19
	b.lo	wait_next

	// One line per secondary that recorded itself; a line for any CPU_OFF
	// that returned.
	dsb	sy
	mov	x21, #1
1:	SLOT	x26, x21
	ldr	x9, [x26, #S_DONE]
	cbz	x9, 2f
	PRINT	"cpu "
	mov	x1, x21
	bl	putdec
	bl	print_slot
	ldr	x9, [x26, #S_OFFFAIL]
	cbz	x9, 2f
	PRINT	"error cpu "
	mov	x1, x21
	bl	putdec
	PRINT	" cpu_off returned "
	ldr	x1, [x26, #S_OFFRET]
	bl	putdec
	bl	newline
2:	add	x21, x21, #1
	cmp	x21, x19
	b.lo	1b
	// A secondary whose MPIDR is not in KVM's default layout lands in
	// the overflow slot.
	mov	x21, #MAX_CPUS
	SLOT	x26, x21
	ldr	x9, [x26, #S_DONE]
	cbz	x9, 1f
	PRINT	"error overflow"
	bl	print_slot
1:

	// 6. Start vCPU 1 again, into a loop that never calls CPU_OFF; then
	// CPU_ON for it must say ALREADY_ON and AFFINITY_INFO must say ON.
	mov	x21, #1
	SLOT	x26, x21
	stp	xzr, xzr, [x26, #S_MPIDR]
	stp	xzr, xzr, [x26, #S_DONE]
	stp	xzr, xzr, [x26, #S_OFFFAIL]
	dsb	sy
	mov	x1, x21
	bl	mpidr_of
	adr	x2, secondary_spin
	mov	x3, #CTX_SPIN
	add	x3, x3, x21
	PSCI	x24, PSCI_CPU_ON64
	PRINT	"cpu_on spin ret "
	mov	x1, x24
	bl	putdec
	bl	newline
	DEADLINE
1:	dsb	sy
	ldr	x9, [x26, #S_DONE]
	cbnz	x9, 2f
	EXPIRED	3f
	wfe
	b	1b
3:	PRINT	"error cpu 1 spin timeout\n"
	b	4f
2:	PRINT	"spin cpu1"
	bl	print_slot
4:	mov	x1, x21
	bl	mpidr_of
	adr	x2, secondary_spin
	mov	x3, #CTX_SPIN
	add	x3, x3, x21
	PSCI	x24, PSCI_CPU_ON64
	PRINT	"cpu_on again ret "
	mov	x1, x24
	bl	putdec
	bl	newline
	mov	x1, x21
	bl	mpidr_of
	mov	x2, #0
	PSCI	x24, PSCI_AFFINITY_INFO64
	PRINT	"affinity cpu1 "
	mov	x1, x24
	bl	putdec
	bl	newline

	// 7. CPU_ON of an MPIDR no vCPU has.
invalid:
	ldr	x1, =INVALID_MPIDR
	adr	x2, secondary_off
	mov	x3, #0
	PSCI	x24, PSCI_CPU_ON64
	PRINT	"cpu_on invalid ret "
	mov	x1, x24
	bl	putdec
	bl	newline

	// 8. Done.
	PRINT	"smp test done\n"
	ldr	x0, =PSCI_SYSTEM_OFF
	hvc	#0
	PRINT	"error system_off returned\n"
1:	wfi
	b	1b

// ---------------------------------------------------------------------------
// Secondaries. Entered by CPU_ON at EL1, MMU off, X0 = context_id, no stack.

// RECORD: find this vCPU's slot from MPIDR_EL1 (KVM's default layout:
// k = Aff0 + 16 Aff1 + 4096 Aff2, Aff0 < 16), store MPIDR_EL1 and X0 in it,
// set its done word and wake the primary. x19 = slot address.
	.macro RECORD
	mrs	x20, mpidr_el1
	ubfx	x9, x20, #0, #8			// Aff0
	ubfx	x10, x20, #8, #8		// Aff1
	ubfx	x11, x20, #16, #8		// Aff2
	ubfx	x12, x20, #32, #8		// Aff3
	cmp	x9, #16
	b.hs	8f
	cbnz	x12, 8f
	orr	x9, x9, x10, lsl #4
	orr	x9, x9, x11, lsl #12
	cmp	x9, #MAX_CPUS
	b.lo	9f
8:	mov	x9, #MAX_CPUS			// not a KVM default MPIDR: overflow slot
9:	ldr	x19, =TABLE
	add	x19, x19, x9, lsl #SLOT_SHIFT
	str	x20, [x19, #S_MPIDR]
	str	x0, [x19, #S_X0]
	dsb	sy
	mov	x9, #1
	str	x9, [x19, #S_DONE]
	dsb	sy
	sev
	.endm

// secondary_off: record, then CPU_OFF, which does not return.
secondary_off:
	RECORD
	ldr	x0, =PSCI_CPU_OFF
	hvc	#0
	str	x0, [x19, #S_OFFRET]
	mov	x9, #1
	str	x9, [x19, #S_OFFFAIL]
	dsb	sy
	sev
1:	wfi
	b	1b

// secondary_spin: record, then stay ON forever.
secondary_spin:
	RECORD
1:	wfi
	b	1b

// ---------------------------------------------------------------------------
// Primary's helpers: leaf functions; they clobber x1-x3 and x9-x15 only.

// mpidr_of: x1 = KVM's default MPIDR affinity for vCPU index x1.
mpidr_of:
	and	x9, x1, #0xf
	ubfx	x10, x1, #4, #8
	orr	x9, x9, x10, lsl #8
	ubfx	x10, x1, #12, #8
	orr	x1, x9, x10, lsl #16
	ret

// print_slot: print " mpidr 0x.. x0 0x..\n" from the slot at x26, the
// MPIDR masked to its affinity fields. Not a leaf: saves x30.
print_slot:
	str	x30, [sp, #-16]!
	PRINT	" mpidr "
	ldr	x1, [x26, #S_MPIDR]
	ldr	x9, =0xff00ffffff
	and	x1, x1, x9
	bl	puthex
	PRINT	" x0 "
	ldr	x1, [x26, #S_X0]
	bl	puthex
	bl	newline
	ldr	x30, [sp], #16
	ret

	.include "print.inc"

	.ltorg
