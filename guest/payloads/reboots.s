// reboots: reset the machine 100 times. Each boot counts itself in a RAM
// word that survives a warm reset, prints "boot N" and asks for PSCI
// SYSTEM_RESET; boot 101 powers off. With --on-reset reboot mvm runs all
// of them in one process, whose fds, threads and memory must not grow
// (integration/hostile_test.go watches them through /proc).
	.include "common.inc"

	.equ COUNTER, 0x40200000	// past the payload, inside any RAM size
	.equ RESETS, 100

	.text
	.globl	_start
_start:
	mov	x5, #COUNTER
	ldr	x6, [x5]
	add	x6, x6, #1
	str	x6, [x5]
	PRINT	"boot "
	mov	x1, x6
	bl	puthex
	bl	newline
	cmp	x6, #RESETS
	b.gt	1f
	ldr	x0, =PSCI_SYSTEM_RESET
	hvc	#0
	b	.
1:	ldr	x0, =PSCI_SYSTEM_OFF
	hvc	#0
	b	.

	.include "print.inc"
	.ltorg
