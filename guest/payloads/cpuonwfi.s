// cpuonwfi: PSCI CPU_ON latency, many samples on few vCPUs, with the caller
// asleep while it waits. ROUNDS times, the boot CPU reads the virtual
// counter, CPU_ONs the next secondary (1, 2, ... N-1, 1, ...; N found from
// the first CPU_ON that answers INVALID_PARAMETERS), and waits in WFI. The
// secondary's first instructions read the counter, store it and send SGI 0
// to the boot CPU, whose WFI then returns (a pending interrupt ends WFI even
// with PSTATE.I masked, DDI 0487 D1.16.2), then CPU_OFF. The boot CPU waits
// with AFFINITY_INFO until the target is OFF before the next round. At the
// end it prints "cpuonw K TICKS" (hex) per round, "cntfrq F", SYSTEM_OFF.
//
// Why WFI and not a spin: the caller's vCPU then blocks in KVM (a WFx exit
// handled in the kernel), as Linux's boot CPU does in wait_for_completion
// while a secondary comes up, and leaves the host CPU to the target. In the
// instruction-time lab all lab CPUs share one instruction counter and run
// round-robin, so a spinning caller would add its own spin to every sample.
	.include "common.inc"

	.equ ROUNDS, 200
	.equ STAMP, 0x40100000		// the secondary's counter value
	.equ SAMPLES, 0x40101000	// ROUNDS x (k, ticks)

	// GICv3 (docs/memory-map.md): distributor, and vCPU 0's
	// redistributor: RD_base then SGI_base 64 KiB above it.
	.equ GICD_CTLR, 0x08000000
	.equ GICR0_SGI, 0x10010000
	.equ GICR_IGROUPR0, 0x080
	.equ GICR_ISENABLER0, 0x100

	.text
	.globl	_start
_start:
	// Distributor: affinity routing, group 1 enabled (GICv3 arch spec
	// 12.9.4 GICD_CTLR: EnableGrp1NS bit 1, ARE_NS bit 4).
	ldr	x1, =GICD_CTLR
	mov	w2, #0x13
	str	w2, [x1]
	// SGI 0 of vCPU 0: group 1, enabled.
	ldr	x1, =GICR0_SGI
	mov	w2, #-1
	str	w2, [x1, #GICR_IGROUPR0]
	mov	w2, #1
	str	w2, [x1, #GICR_ISENABLER0]
	// CPU interface: system registers on, every priority, group 1 on.
	mrs	x1, S3_0_C12_C12_5	// ICC_SRE_EL1
	orr	x1, x1, #1
	msr	S3_0_C12_C12_5, x1
	isb
	mov	x1, #0xff
	msr	S3_0_C4_C6_0, x1	// ICC_PMR_EL1
	mov	x1, #1
	msr	S3_0_C12_C12_7, x1	// ICC_IGRPEN1_EL1
	isb

	mov	x19, #1			// k: next secondary
	mov	x24, #0			// rounds done
	ldr	x22, =STAMP
	ldr	x25, =SAMPLES
round:
	// MPIDR of vCPU k in KVM's default layout: Aff1 = k>>4, Aff0 = k&15.
	and	x20, x19, #0xf
	lsr	x1, x19, #4
	orr	x20, x20, x1, lsl #8
	str	xzr, [x22]
	dsb	sy
	isb
	mrs	x21, cntvct_el0
	ldr	x0, =PSCI_CPU_ON64
	mov	x1, x20
	adr	x2, secondary
	mov	x3, x19
	hvc	#0
	cbz	x0, wait
	cmp	x19, #1
	b.eq	done			// not even vCPU 1: nothing to measure
	mov	x19, #1			// past the last vCPU: start over
	b	round
wait:	ldr	x1, [x22]
	cbnz	x1, woke
	wfi
	b	wait
woke:	sub	x23, x1, x21
	add	x1, x25, x24, lsl #4
	stp	x19, x23, [x1]
	// Take the SGI (it may still be on its way: then the next round's
	// first WFI returns at once and the loop checks the stamp again).
	mrs	x1, S3_0_C12_C12_0	// ICC_IAR1_EL1
	cmp	x1, #1020
	b.hs	off
	msr	S3_0_C12_C12_1, x1	// ICC_EOIR1_EL1
off:	ldr	x0, =PSCI_AFFINITY_INFO64
	mov	x1, x20
	mov	x2, #0
	hvc	#0
	cmp	x0, #1
	b.ne	off
	add	x24, x24, #1
	add	x19, x19, #1
	cmp	x24, #ROUNDS
	b.lo	round

done:	mov	x26, #0
print:	cmp	x26, x24
	b.hs	last
	PRINT	"cpuonw "
	add	x27, x25, x26, lsl #4
	ldr	x1, [x27]
	bl	puthex
	PRINT	" "
	ldr	x1, [x27, #8]
	bl	puthex
	bl	newline
	add	x26, x26, #1
	b	print
last:	PRINT	"cntfrq "
	mrs	x1, cntfrq_el0
	bl	puthex
	bl	newline
	ldr	x0, =PSCI_SYSTEM_OFF
	hvc	#0
	b	.

// The secondary's first instructions: stamp, wake the boot CPU, CPU_OFF.
secondary:
	isb
	mrs	x1, cntvct_el0
	ldr	x2, =STAMP
	str	x1, [x2]
	dsb	sy
	mrs	x1, S3_0_C12_C12_5	// ICC_SRE_EL1
	orr	x1, x1, #1
	msr	S3_0_C12_C12_5, x1
	isb
	// ICC_SGI1R_EL1: INTID 0 (bits 27:24), Aff3.Aff2.Aff1 = 0, target
	// list bit 0: vCPU 0 (GICv3 arch spec 12.11.19).
	mov	x1, #1
	msr	S3_0_C12_C11_5, x1
	isb
	ldr	x0, =PSCI_CPU_OFF
	hvc	#0
	b	.

	.include "print.inc"
	.ltorg
