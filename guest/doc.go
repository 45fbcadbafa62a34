// Package guest holds what runs inside a guest: the bare-metal test payloads
// (AArch64 assembly in payloads/, assembled by the Makefile into flat
// binaries), the initramfs builder used for Linux test guests and for the
// arm64 lab, and the init scripts those guests run.
package guest
