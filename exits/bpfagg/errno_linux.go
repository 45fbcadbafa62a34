//go:build linux

package bpfagg

import "golang.org/x/sys/unix"

var (
	errPerm  error = unix.EPERM
	errAcces error = unix.EACCES
)
