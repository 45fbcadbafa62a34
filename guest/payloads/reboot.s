// reboot: reset twice, then power off at the third boot ("boot 1" to
// "boot 3"). With --on-reset reboot mvm must boot it three times in one
// process.
	.equ RESETS, 2
	.include "reboot.inc"
