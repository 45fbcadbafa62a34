// hostile: a guest that misuses its VMM on purpose. mvm must answer every
// case, log each kind of misuse a bounded number of times, count it, and
// let the guest finish (integration/hostile_test.go checks all of it):
//   1. an MMIO storm: a read and a write at each of 256 unmapped addresses;
//   2. SMCCC calls with function IDs nobody implements, by HVC and by SMC,
//      inside the PSCI ranges mvm is forwarded (20 IDs) and outside them
//      (KVM answers those): each must return NOT_SUPPORTED (-1);
//   3. PSCI CPU_ON with garbage: a target MPIDR that does not exist, an
//      entry point outside RAM, a misaligned one, a target that is ON.
// Each check prints "ok NAME" or "FAIL NAME got 0x..."; then SYSTEM_OFF.
	.include "common.inc"

	.equ STORM_ADDRS, 256
	.equ NOT_SUPPORTED, -1
	.equ INVALID_PARAMETERS, -2
	.equ ALREADY_ON, -4
	.equ INVALID_ADDRESS, -9

// CHECK want, name: x0 must be want (a small negative PSCI status).
	.macro CHECK want, name
	mov	x4, #\want
	cmp	x0, x4
	b.eq	.Lok\@
	mov	x19, x0
	PRINT "FAIL \name got "
	mov	x1, x19
	bl	puthex
	bl	newline
	b	.Ldone\@
.Lok\@:	PRINT "ok \name\n"
.Ldone\@:
	.endm

	.text
	.globl	_start
_start:
	// 1. The MMIO storm.
	mov	x5, #UNMAPPED_ADDR
	mov	x6, #STORM_ADDRS
1:	ldr	w7, [x5]
	str	w7, [x5]
	add	x5, x5, #64
	subs	x6, x6, #1
	b.ne	1b
	PRINT "ok mmio-storm\n"

	// 2. Unknown function IDs, each by HVC and by SMC; x20 counts the
	// calls that did not return NOT_SUPPORTED.
	mov	x20, #0
	adr	x21, fids
2:	ldr	w22, [x21], #4
	cbz	w22, 3f
	mov	w0, w22
	hvc	#0
	cmn	x0, #1
	cinc	x20, x20, ne
	mov	w0, w22
	smc	#0
	cmn	x0, #1
	cinc	x20, x20, ne
	b	2b
3:	mov	x0, x20
	CHECK	0, unknown-fids

	// 3. CPU_ON with garbage.
	ldr	x0, =PSCI_CPU_ON64
	mov	x1, #0xff			// no such MPIDR (vCPUs are 0 and 1)
	adr	x2, parked
	hvc	#0
	CHECK	INVALID_PARAMETERS, cpu-on-no-such-mpidr
	ldr	x0, =PSCI_CPU_ON64
	mov	x1, #1
	mov	x2, #0x1000			// below RAM (0x4000_0000)
	hvc	#0
	CHECK	INVALID_ADDRESS, cpu-on-entry-outside-ram
	ldr	x0, =PSCI_CPU_ON64
	mov	x1, #1
	ldr	x2, =0xfffffffffffff000		// far beyond RAM
	hvc	#0
	CHECK	INVALID_ADDRESS, cpu-on-entry-beyond-ram
	ldr	x0, =PSCI_CPU_ON64
	mov	x1, #1
	adr	x2, parked
	add	x2, x2, #2			// misaligned
	hvc	#0
	CHECK	INVALID_ADDRESS, cpu-on-entry-misaligned
	ldr	x0, =PSCI_CPU_ON64
	mov	x1, #0				// the caller itself, ON
	adr	x2, parked
	hvc	#0
	CHECK	ALREADY_ON, cpu-on-self

	ldr	x0, =PSCI_SYSTEM_OFF
	hvc	#0
4:	wfi
	b	4b

// parked: never entered (every CPU_ON above must fail).
parked:	wfi
	b	parked

	.include "print.inc"

	.ltorg
	.balign	4
// Unimplemented function IDs: PSCI 0x16-0x1f (32- and 64-bit; forwarded
// to mvm), then Arm SiP, OEM and standard-hypervisor IDs and two that are
// no SMCCC call at all (KVM answers them); zero ends the list.
fids:	.word	0x84000016, 0x84000017, 0x84000018, 0x84000019, 0x8400001a
	.word	0x8400001b, 0x8400001c, 0x8400001d, 0x8400001e, 0x8400001f
	.word	0xc4000016, 0xc4000017, 0xc4000018, 0xc4000019, 0xc400001a
	.word	0xc400001b, 0xc400001c, 0xc400001d, 0xc400001e, 0xc400001f
	.word	0x82000000, 0xc3000001, 0x85000000, 0xffffff00, 0x12345678
	.word	0
