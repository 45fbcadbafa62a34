// counts: known numbers of exits on two vCPUs, for the exit profiler
// (integration/profile_counts_test.go). vCPU 0 starts vCPU 1 with CPU_ON,
// then both run the same work loop, vCPU k for (k + 1) * REPS iterations
// (different totals, so a profile that mixed up the vCPUs shows), each of
//
//	N_MARKER  byte writes of 0x55 to the boot-marker device (userspace MMIO)
//	N_VERSION PSCI_VERSION HVCs
//	N_SMC     PSCI_VERSION SMCs (the filter forwards them to mvm as it does
//	          HVCs; KVM handles them in handle_smc, which fires no
//	          tracepoint and counts no stat of its own)
//	N_WFI     WFIs, each woken by the virtual timer (PPI 27 through the vGIC)
//	N_SYSREG  reads of ID_AA64MMFR0_EL1 (trapped by KVM with HCR_EL2.TID3)
//	N_SGI     writes of ICC_SGI1R_EL1 sending SGI 1 to itself (trapped: with
//	          HCR_EL2.IMO set, EL1 writes of the SGI registers trap to EL2;
//	          the SGIs are disabled in the redistributor, so it stays
//	          pending and never wakes a WFI)
//
// and records what it did in its RAM slot. vCPU 1 then calls CPU_OFF;
// vCPU 0 waits for its slot and for AFFINITY_INFO = OFF, prints
//
//	counts reps R
//	cpu K iters I marker A version B wfi C early D sysreg E gicd F gicr R badiar G late L sgi S smc M
//	affinity polls P
//	counts done
//
// (a "cpu" line per vCPU that finished) and calls SYSTEM_OFF. In a line:
// wfi counts every WFI executed, early those that returned before the timer
// had fired (each is followed by another WFI, so wfi = N_WFI * iters +
// early), late the WFIs skipped because the timer had fired before them
// (see the loop), gicd and gicr the accesses to the GIC distributor and to
// the vCPU's redistributor (in-kernel MMIO), badiar the acknowledges that did not
// return INTID 27. "affinity polls" counts vCPU 0's AFFINITY_INFO calls.
// Everything else is fixed by this source: vCPU 0 makes one CPU_ON, its
// PSCI_VERSIONs, the AFFINITY_INFOs and one SYSTEM_OFF; vCPU 1 its
// PSCI_VERSIONs and one CPU_OFF; every SMC is a PSCI_VERSION; only vCPU 0 prints, one UART store per
// byte and never a UART read. Failures print a line starting with "error".
//
// REPS is the 64-bit word at offset 16 of the image (after a branch and the
// magic word "MVCOUNTS" at offset 8), so a test can run the same code with
// other counts by patching the binary; --defsym REPS=N changes the default.
//
// The MMU stays off: data accesses are Device memory, so no exclusives and
// no writeback addressing on MMIO. Before CPU_ON, vCPU 0 touches every page
// of the image (loads) and of the data area (stores), so vCPU 1 takes no
// stage-2 faults on RAM. PSTATE.I stays masked throughout: a pending
// interrupt still ends a WFI, and the loop acknowledges it through
// ICC_IAR1_EL1 instead of taking it.
	.include "common.inc"

	.ifndef REPS
	.equ REPS, 10
	.endif

	.equ N_MARKER,  3
	.equ N_VERSION, 2
	.equ N_SMC,     1
	.equ N_WFI,     1
	.equ N_SYSREG,  4
	.equ N_SGI,     2
	.equ SGI_SELF,  1 << 24         // ICC_SGI1R_EL1: INTID 1, Aff3-1 0, TargetList below
	.equ MARK_CODE, 0x55            // not a boot-phase code (0x40, 0x41, 123)
	.equ MAGIC,     0x53544e554f43564d  // "MVCOUNTS", little-endian

	.equ GICD_BASE,    0x08000000
	.equ GICD_CTLR,    0x0
	.equ GICD_CTLR_RWP, 31
	.equ GICD_CTLR_VAL, 0x12        // ARE_NS (4) | EnableGrp1NS (1)
	.equ GICR_BASE,    0x10000000   // vCPU k's RD_base: GICR_BASE + k << 17
	.equ GICR_WAKER,   0x14
	.equ GICR_SGI,     0x10000      // SGI_base = RD_base + 64 KiB
	.equ GICR_IGROUPR0,   0x80
	.equ GICR_ISENABLER0, 0x100
	.equ GICR_ICENABLER0, 0x180
	.equ TIMER_INTID,  27           // EL1 virtual timer PPI
	.equ CTL_ENABLE,   1
	.equ CTL_ISTATUS,  2            // bit number

	.equ DATA,      0x40100000      // RAM base + 1 MiB: slots, then globals
	.equ SLOT_SHIFT, 7              // 128-byte slots, vCPU k at DATA + k << 7
	.equ G_DELAY,   0x400           // timer delay in ticks (global)
	.equ G_AFF,     0x408           // AFFINITY_INFO polls of vCPU 0
	.equ G_ONRET,   0x410           // CPU_ON's result
	.equ DATA_END,  0x40101000
	.equ STACK_TOP, 0x40200000      // vCPU 0 only
	.equ WAIT_SECONDS, 30

	// slot fields
	.equ S_ITERS,   0
	.equ S_MARKER,  8
	.equ S_VERSION, 16
	.equ S_WFI,     24
	.equ S_EARLY,   32
	.equ S_SYSREG,  40
	.equ S_GIC,     48
	.equ S_BADIAR,  56
	.equ S_LATE,    64
	.equ S_DONE,    72
	.equ S_SGI,     80
	.equ S_GICD,    88
	.equ S_SMC,     96

// FIELD "name ", field: print " name " and the slot field at x20 + field.
	.macro FIELD s, f
	PRINT	"\s"
	ldr	x1, [x20, #\f]
	bl	putdec
	.endm

	.text
	.globl	_start
_start:
	b	start
	.balign	8
	.quad	MAGIC                   // offset 8
reps:	.quad	REPS                    // offset 16
start:
	mov	x9, #STACK_TOP
	mov	sp, x9
	adr	x9, vectors
	msr	vbar_el1, x9
	isb

	// Touch every page vCPU 1 will read or write: the data page (cleared
	// with stores) and the image's pages (loads), so their stage-2
	// mappings exist before vCPU 1 runs. The stack page is vCPU 0's own.
	ldr	x9, =DATA
	ldr	x10, =DATA_END
1:	stp	xzr, xzr, [x9], #16
	cmp	x9, x10
	b.lo	1b
	str	xzr, [sp, #-16]
	adr	x9, _start
	ldr	x10, =image_end
1:	ldr	x11, [x9]
	add	x9, x9, #4096
	cmp	x9, x10
	b.lo	1b
	ldr	x11, [x10, #-8]
	dsb	sy

	// Timer delay: about 4 ms (CNTFRQ / 256 ticks), longer than most
	// host exits in the emulated lab, where one costs up to a few ms.
	mrs	x9, cntfrq_el0
	cbnz	x9, 1f
	ldr	x9, =62500000
1:	lsr	x9, x9, #8
	ldr	x10, =DATA
	str	x9, [x10, #G_DELAY]

	// Distributor: affinity routing and group 1 on; wait for RWP.
	mov	x26, #0                 // GIC accesses of vCPU 0
	mov	x9, #GICD_BASE
	mov	w10, #GICD_CTLR_VAL
	str	w10, [x9, #GICD_CTLR]
	add	x26, x26, #1
1:	ldr	w10, [x9, #GICD_CTLR]
	add	x26, x26, #1
	tbnz	w10, #GICD_CTLR_RWP, 1b
	ldr	x10, =DATA
	str	x26, [x10, #S_GIC]

	// CPU_ON vCPU 1 (MPIDR 1), context 1.
	ldr	x0, =PSCI_CPU_ON64
	mov	x1, #1
	adr	x2, secondary
	mov	x3, #1
	hvc	#0
	sxtw	x24, w0
	ldr	x9, =DATA
	str	x24, [x9, #G_ONRET]
	cbz	x24, 1f
	PRINT	"error cpu_on ret "
	mov	x1, x24
	bl	putdec
	bl	newline
1:	mov	x19, #0
	b	percpu

// secondary: vCPU 1's entry, X0 = context = its index.
secondary:
	mov	x19, x0
	adr	x9, vectors
	msr	vbar_el1, x9
	isb
	// fall through

// percpu: the work of vCPU x19 (0 or 1). Branched to, not called: vCPU 1
// has no stack. Counters: x21 marker, x22 version, x23 wfi, x24 early,
// x25 sysreg, x26 gicr, x27 badiar, x18 sgi; x28 iterations left.
percpu:
	ldr	x20, =DATA
	add	x20, x20, x19, lsl #SLOT_SHIFT
	ldr	x26, [x20, #S_GIC]      // vCPU 0: its distributor accesses
	str	x26, [x20, #S_GICD]
	mov	x26, #0
	mov	x18, #0
	mov	x21, #0
	mov	x22, #0
	mov	x23, #0
	mov	x24, #0
	mov	x25, #0
	mov	x27, #0

	// Redistributor: wake it, all SGIs/PPIs group 1, enable PPI 27.
	ldr	x9, =GICR_BASE
	add	x9, x9, x19, lsl #17
	ldr	w10, [x9, #GICR_WAKER]
	add	x26, x26, #1
	bic	w10, w10, #2            // ProcessorSleep
	str	w10, [x9, #GICR_WAKER]
	add	x26, x26, #1
1:	ldr	w10, [x9, #GICR_WAKER]
	add	x26, x26, #1
	tbnz	w10, #2, 1b             // ChildrenAsleep
	add	x9, x9, #GICR_SGI
	mov	w10, #0xffffffff
	str	w10, [x9, #GICR_IGROUPR0]
	add	x26, x26, #1
	mov	w10, #(1 << TIMER_INTID)
	str	w10, [x9, #GICR_ISENABLER0]
	add	x26, x26, #1
	// KVM's vGIC starts with every SGI enabled: disable them, so the SGIs
	// the loop sends itself stay pending and never wake a WFI.
	mov	w10, #0xffff
	str	w10, [x9, #GICR_ICENABLER0]
	add	x26, x26, #1
	// CPU interface: system registers, priority mask open, group 1 on.
	mrs	x10, icc_sre_el1
	orr	x10, x10, #1
	msr	icc_sre_el1, x10
	isb
	mov	x10, #0xff
	msr	icc_pmr_el1, x10
	mov	x10, #1
	msr	icc_igrpen1_el1, x10
	isb

	// Iterations: (index + 1) * REPS.
	ldr	x28, reps
	add	x9, x19, #1
	mul	x28, x28, x9
	str	x28, [x20, #S_ITERS]
	cbz	x28, work_done
work:
	// Marker writes.
	mov	x9, #MARKER_BASE
	mov	w10, #MARK_CODE
	.rept	N_MARKER
	strb	w10, [x9]
	add	x21, x21, #1
	.endr
	// PSCI_VERSION.
	.rept	N_VERSION
	ldr	x0, =PSCI_VERSION
	hvc	#0
	add	x22, x22, #1
	.endr
	// PSCI_VERSION by SMC, counted in the slot (no register is free).
	.rept	N_SMC
	ldr	x0, =PSCI_VERSION
	smc	#0
	ldr	x9, [x20, #S_SMC]
	add	x9, x9, #1
	str	x9, [x20, #S_SMC]
	.endr
	// WFI until the virtual timer fires, N_WFI times. A WFI traps to KVM
	// only if no interrupt is pending when it executes (HCR_EL2.TWI traps
	// a WFI "that would enter a low-power state"): when the timer has
	// fired already (a long host exit between arming it and the WFI),
	// skip the WFI, count it as late and arm the timer again.
	.rept	N_WFI
1:	ldr	x9, =DATA
	ldr	x9, [x9, #G_DELAY]
	msr	cntv_tval_el0, x9
	mov	x9, #CTL_ENABLE
	msr	cntv_ctl_el0, x9
	isb
2:	mrs	x9, cntv_ctl_el0
	tbnz	x9, #CTL_ISTATUS, 5f    // fired before the WFI: late
	wfi
	add	x23, x23, #1
	mrs	x9, cntv_ctl_el0
	tbnz	x9, #CTL_ISTATUS, 3f
	add	x24, x24, #1            // woke before the timer fired
	b	2b
5:	ldr	x9, [x20, #S_LATE]
	add	x9, x9, #1
	str	x9, [x20, #S_LATE]
	mrs	x9, icc_iar1_el1        // 27 if already delivered, else 1023
	msr	cntv_ctl_el0, xzr
	isb
	cmp	x9, #1020
	b.hs	1b
	msr	icc_eoir1_el1, x9
	isb
	b	1b
3:	mrs	x9, icc_iar1_el1
	msr	cntv_ctl_el0, xzr       // timer off: the level drops
	isb
	cmp	x9, #TIMER_INTID
	b.eq	4f
	add	x27, x27, #1
	cmp	x9, #1020               // 1020-1023: special, no EOI
	b.hs	6f
4:	msr	icc_eoir1_el1, x9
	isb
6:
	.endr
	// Trapped ID register reads.
	.rept	N_SYSREG
	mrs	x9, id_aa64mmfr0_el1
	add	x25, x25, #1
	.endr
	// Trapped SGI generation: SGI 1 to this vCPU (TargetList bit Aff0).
	mov	x9, #1
	lsl	x9, x9, x19
	orr	x9, x9, #SGI_SELF
	.rept	N_SGI
	msr	icc_sgi1r_el1, x9
	add	x18, x18, #1
	.endr
	isb
	subs	x28, x28, #1
	b.ne	work
work_done:
	str	x21, [x20, #S_MARKER]
	str	x22, [x20, #S_VERSION]
	str	x23, [x20, #S_WFI]
	str	x24, [x20, #S_EARLY]
	str	x25, [x20, #S_SYSREG]
	str	x26, [x20, #S_GIC]
	str	x27, [x20, #S_BADIAR]
	str	x18, [x20, #S_SGI]
	dsb	sy
	mov	x9, #1
	str	x9, [x20, #S_DONE]
	dsb	sy
	cbz	x19, primary_finish

	// vCPU 1: CPU_OFF, which does not return.
	ldr	x0, =PSCI_CPU_OFF
	hvc	#0
	adr	x1, m_offret
	PUTS_BODY
1:	wfi
	b	1b

// vCPU 0: wait for vCPU 1's slot, then for it to be OFF; print; power off.
primary_finish:
	ldr	x9, =DATA
	ldr	x9, [x9, #G_ONRET]
	cbnz	x9, report              // CPU_ON failed: reported already
	mov	x1, #1
	ldr	x20, =DATA
	add	x20, x20, x1, lsl #SLOT_SHIFT
	isb
	mrs	x9, cntvct_el0
	mrs	x10, cntfrq_el0
	mov	x11, #WAIT_SECONDS
	madd	x23, x10, x11, x9       // deadline
1:	dsb	sy
	ldr	x9, [x20, #S_DONE]
	cbnz	x9, 2f
	isb
	mrs	x9, cntvct_el0
	cmp	x9, x23
	b.lo	1b
	PRINT	"error timeout cpu 1 done\n"
	b	report
2:	mov	x21, #0                 // AFFINITY_INFO polls
3:	ldr	x0, =PSCI_AFFINITY_INFO64
	mov	x1, #1
	mov	x2, #0
	hvc	#0
	add	x21, x21, #1
	cmp	x0, #1                  // OFF
	b.eq	4f
	isb
	mrs	x9, cntvct_el0
	cmp	x9, x23
	b.lo	3b
	PRINT	"error timeout cpu 1 off\n"
4:	ldr	x9, =DATA
	str	x21, [x9, #G_AFF]
	dsb	sy

report:
	PRINT	"counts reps "
	ldr	x1, reps
	bl	putdec
	bl	newline
	mov	x19, #0
1:	ldr	x20, =DATA
	add	x20, x20, x19, lsl #SLOT_SHIFT
	dsb	sy
	ldr	x9, [x20, #S_DONE]
	cbz	x9, 2f
	PRINT	"cpu "
	mov	x1, x19
	bl	putdec
	FIELD	" iters ", S_ITERS
	FIELD	" marker ", S_MARKER
	FIELD	" version ", S_VERSION
	FIELD	" wfi ", S_WFI
	FIELD	" early ", S_EARLY
	FIELD	" sysreg ", S_SYSREG
	FIELD	" gicd ", S_GICD
	FIELD	" gicr ", S_GIC
	FIELD	" badiar ", S_BADIAR
	FIELD	" late ", S_LATE
	FIELD	" sgi ", S_SGI
	FIELD	" smc ", S_SMC
	bl	newline
2:	add	x19, x19, #1
	cmp	x19, #2
	b.lo	1b
	PRINT	"affinity polls "
	ldr	x9, =DATA
	ldr	x1, [x9, #G_AFF]
	bl	putdec
	bl	newline
	PRINT	"counts done\n"
	ldr	x0, =PSCI_SYSTEM_OFF
	hvc	#0
	PRINT	"error system_off returned\n"
1:	wfi
	b	1b

// ---------------------------------------------------------------------------
// Exceptions: none is expected (PSTATE.I stays masked). Print the syndrome
// and power off, whichever vCPU took it.
	.balign	2048
vectors:
	.rept	16
	.balign	128
	b	unexpected
	.endr
unexpected:
	adr	x1, m_exc
	PUTS_BODY
	mrs	x1, esr_el1
	bl	puthex_nostack
	adr	x1, m_elr
	PUTS_BODY
	mrs	x1, elr_el1
	bl	puthex_nostack
	mov	x2, #UART_BASE
	mov	w3, #'\n'
	strb	w3, [x2]
	ldr	x0, =PSCI_SYSTEM_OFF
	hvc	#0
1:	wfi
	b	1b

// ---------------------------------------------------------------------------
// Helpers (vCPU 0's, but for puthex_nostack): clobber x1-x3, x9-x15.

	.include "print.inc"

// puthex_nostack: print x1 as 0x-prefixed hex, all 16 digits.
puthex_nostack:
	mov	x10, #UART_BASE
	mov	w11, #'0'
	strb	w11, [x10]
	mov	w11, #'x'
	strb	w11, [x10]
	mov	x12, #60
1:	lsr	x11, x1, x12
	and	x11, x11, #0xf
	add	x14, x11, #'0'
	add	x15, x11, #('a' - 10)
	cmp	x11, #10
	csel	x11, x14, x15, lo
	strb	w11, [x10]
	subs	x12, x12, #4
	b.ge	1b
	ret

	.ltorg
m_offret:	.asciz	"error cpu_off returned\n"
m_exc:		.asciz	"error exception esr "
m_elr:		.asciz	" elr "

	.text	2                       // after the strings of subsection 1
	.balign	8
image_end:
