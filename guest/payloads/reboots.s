// reboots: reset the machine 100 times; boot 101 powers off. With
// --on-reset reboot mvm runs all of them in one process, whose fds,
// threads and memory must not grow (integration/hostile_test.go watches
// them through /proc).
	.equ RESETS, 100
	.include "reboot.inc"
