// virtio_garbage: a hostile virtio driver. For each of the first three
// virtio-mmio slots (0xd000_0000 + 4 KiB each, docs/devices.md) it makes
// byte and halfword register accesses, writes to unknown and read-only
// registers, sets every status and feature bit, programs queues with
// out-of-range sizes and addresses, and then rings built to hurt: a
// descriptor that chains to itself, one with a huge length at an address
// outside RAM, an indirect table that is not RAM, and a driver index that
// jumps past the ring. It notifies after each, resets, and at the end
// prints a line and powers off. mvm must keep running (or stop with one
// line); it must never panic or hang.
	.include "common.inc"

	.equ VIRTIO_BASE, 0xd0000000
	.equ DESC,  0x40100000	// descriptor table (4 entries)
	.equ AVAIL, 0x40101000	// driver ring
	.equ USED,  0x40102000	// device ring

	// W32 off, value: 32-bit register write at x10 + off (uses w11).
	.macro W32 off, val
	ldr	w11, =\val
	str	w11, [x10, #\off]
	.endm

	// SETUP: reset, negotiate VERSION_1 (and INDIRECT_DESC), program
	// queue 0 with 4 entries at DESC/AVAIL/USED, DRIVER_OK, notify.
	.macro SETUP
	W32	0x070, 0		// reset
	W32	0x070, 3		// ACKNOWLEDGE | DRIVER
	W32	0x024, 1
	W32	0x020, 1		// VERSION_1 (bit 32)
	W32	0x024, 0
	W32	0x020, 0x10000000	// INDIRECT_DESC (bit 28)
	W32	0x070, 11		// | FEATURES_OK
	W32	0x030, 0
	W32	0x038, 4
	W32	0x080, DESC
	W32	0x084, 0
	W32	0x090, AVAIL
	W32	0x094, 0
	W32	0x0a0, USED
	W32	0x0a4, 0
	W32	0x044, 1
	W32	0x070, 15		// | DRIVER_OK
	W32	0x050, 0		// notify queue 0
	W32	0x050, 1
	bl	pause
	.endm

	// DESC0 addr, len, flags, next: fill descriptor 0; AVAIL1 idx: one
	// entry (head 0) and the driver index idx.
	.macro DESC0 addr, len, flags, next
	ldr	x1, =DESC
	ldr	x2, =\addr
	str	x2, [x1]
	ldr	w2, =\len
	str	w2, [x1, #8]
	ldr	w2, =(\flags | (\next << 16))
	str	w2, [x1, #12]
	.endm
	.macro AVAIL1 idx
	ldr	x1, =AVAIL
	ldr	w2, =(\idx << 16)
	str	wzr, [x1, #4]		// ring[0] = 0
	str	w2, [x1]		// flags 0, idx
	dsb	sy
	.endm

	.text
	.globl	_start
_start:
	mov	x20, #3			// devices to torment
	ldr	x10, =VIRTIO_BASE
next_device:
	// Odd-sized and unknown accesses.
	ldrb	w0, [x10]
	ldrh	w0, [x10, #4]
	strb	w0, [x10, #0x70]
	strh	w0, [x10, #0x50]
	ldr	x0, [x10, #0x100]	// 8-byte config read
	ldr	w0, [x10, #0xffc]	// far past the config
	W32	0x000, 0x12345678	// read-only magic
	W32	0x200, 1		// unknown
	W32	0x050, 0x7fffffff	// notify a queue that does not exist
	W32	0x064, 0xffffffff	// ack everything
	// Every status bit at once, every feature bit.
	W32	0x070, 0xff
	W32	0x070, 3
	W32	0x024, 7		// bad selector
	W32	0x020, 0xffffffff
	W32	0x024, 1
	W32	0x020, 0xffffffff
	W32	0x070, 11		// FEATURES_OK with features not offered
	W32	0x070, 15		// DRIVER_OK without FEATURES_OK
	// A queue past the device's, a size too large, addresses out of RAM.
	W32	0x070, 0
	W32	0x070, 3
	W32	0x024, 1
	W32	0x020, 1
	W32	0x070, 11
	W32	0x030, 0xffff
	W32	0x038, 4
	W32	0x044, 1
	W32	0x030, 0
	W32	0x038, 0xffffffff
	W32	0x080, 0xfffff000
	W32	0x084, 0xffffffff
	W32	0x044, 1
	W32	0x070, 15
	W32	0x050, 0

	// A descriptor chained to itself.
	DESC0	0x40200000, 16, 1, 0	// NEXT, next = 0
	AVAIL1	1
	SETUP
	// A huge buffer outside RAM, device-writable.
	DESC0	0xfffffffffff00000, 0xffffffff, 2, 0
	AVAIL1	1
	SETUP
	// An indirect table that is not in RAM, then one with a bad length.
	DESC0	0x0a000000, 0x1000, 4, 0
	AVAIL1	1
	SETUP
	DESC0	DESC, 17, 4, 0
	AVAIL1	1
	SETUP
	// A zero-length chain, then a head outside the table.
	DESC0	0x40200000, 0, 0, 0
	AVAIL1	1
	SETUP
	ldr	x1, =AVAIL
	mov	w2, #9
	strh	w2, [x1, #4]
	SETUP
	// A driver index that jumps past the ring.
	DESC0	0x40200000, 16, 0, 0
	AVAIL1	0x8000
	SETUP
	W32	0x070, 0

	add	x10, x10, #0x1000
	subs	x20, x20, #1
	b.ne	next_device

	PRINT	"virtio garbage done\n"
	ldr	x0, =PSCI_SYSTEM_OFF
	hvc	#0
1:	wfi
	b	1b

// pause: give the device workers a moment (a few million iterations).
pause:
	ldr	x12, =2000000
1:	subs	x12, x12, #1
	b.ne	1b
	ret

	.include "print.inc"
	.ltorg
