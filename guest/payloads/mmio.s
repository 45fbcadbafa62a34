// mmio: MMIO_COUNT byte writes to the UART's scratch register, each a
// userspace MMIO exit, then PSCI SYSTEM_OFF. Benchmarks time the exits
// through mvm's vCPU loop and device bus against a bare KVM_RUN loop.
	.include "common.inc"

	.ifndef MMIO_COUNT
	.equ MMIO_COUNT, 5000
	.endif

	.text
	.globl	_start
_start:
	mov	x2, #UART_BASE
	ldr	x4, =MMIO_COUNT
1:	strb	w4, [x2, #7]		// SCR: a plain read/write register
	subs	x4, x4, #1
	b.ne	1b
	ldr	x0, =PSCI_SYSTEM_OFF
	hvc	#0
	b	.
	.ltorg
