//go:build linux

package seccomp

import (
	"fmt"
	"slices"

	"golang.org/x/sys/unix"
)

// Rule allows one system call, optionally only with some argument values.
type Rule struct {
	Name string  // the call's name, for errors and docs
	Nr   uintptr // its number on the target architecture
	Arg  *ArgCheck
}

// ArgCheck admits a call only when (args[Index] & Mask) is one of Values.
// Only the argument's low 32 bits are compared: every argument checked
// (ioctl requests, prctl options, protection and clone flags, pids) is an
// int or unsigned int the kernel truncates, or has all its defined bits in
// the low word.
type ArgCheck struct {
	Index  int
	Mask   uint32
	Values []uint32
}

// Allow admits a call with any arguments.
func Allow(name string, nr uintptr) Rule { return Rule{Name: name, Nr: nr} }

// AllowIf admits a call when (args[index] & mask) is one of values.
func AllowIf(name string, nr uintptr, index int, mask uint32, values ...uint32) Rule {
	return Rule{Name: name, Nr: nr, Arg: &ArgCheck{Index: index, Mask: mask, Values: values}}
}

// Offsets in struct seccomp_data (include/uapi/linux/seccomp.h): int nr;
// u32 arch; u64 instruction_pointer; u64 args[6]. Both architectures mvm
// builds for are little-endian, so an argument's low word comes first.
const (
	offNr   = 0
	offArch = 4
	offArgs = 16
)

// maxInsns is BPF_MAXINSNS (include/uapi/linux/bpf_common.h).
const maxInsns = 4096

// x32SyscallBit marks x86_64's x32 ABI calls, whose numbers would
// otherwise alias the 64-bit ones (asm/unistd.h __X32_SYSCALL_BIT).
const x32SyscallBit = 0x40000000

func stmt(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }

func jump(code uint16, k uint32, jt, jf uint8) unix.SockFilter {
	return unix.SockFilter{Code: code, Jt: jt, Jf: jf, K: k}
}

const (
	ldAbs  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	jeq    = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	jge    = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	andK   = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
	retK   = unix.BPF_RET | unix.BPF_K
	allow  = unix.SECCOMP_RET_ALLOW
	refuse = unix.SECCOMP_RET_KILL_PROCESS
)

// Assemble compiles rules for the audit architecture arch
// (unix.AUDIT_ARCH_*) into a classic BPF program: a call from another
// architecture, or one no rule admits, kills the process. Each call may
// appear in one rule only.
func Assemble(arch uint32, rules []Rule) ([]unix.SockFilter, error) {
	prog := []unix.SockFilter{
		stmt(ldAbs, offArch),
		jump(jeq, arch, 1, 0),
		stmt(retK, refuse),
		stmt(ldAbs, offNr),
	}
	if arch == unix.AUDIT_ARCH_X86_64 {
		prog = append(prog, jump(jge, x32SyscallBit, 0, 1), stmt(retK, refuse))
	}
	seen := map[uintptr]string{}
	for _, r := range rules {
		if other, dup := seen[r.Nr]; dup {
			return nil, fmt.Errorf("seccomp: %s (%d) is in the list twice (also as %s)", r.Name, r.Nr, other)
		}
		seen[r.Nr] = r.Name
		if r.Arg == nil {
			// if nr == r.Nr: allow
			prog = append(prog, jump(jeq, uint32(r.Nr), 0, 1), stmt(retK, allow))
			continue
		}
		a := r.Arg
		if a.Index < 0 || a.Index > 5 || len(a.Values) == 0 {
			return nil, fmt.Errorf("seccomp: %s: bad argument check %+v", r.Name, *a)
		}
		// if nr == r.Nr { A = args[i] & mask; for each v: if A == v: allow; kill }
		body := []unix.SockFilter{stmt(ldAbs, uint32(offArgs+8*a.Index))}
		if a.Mask != ^uint32(0) {
			body = append(body, stmt(andK, a.Mask))
		}
		for _, v := range slices.Compact(slices.Sorted(slices.Values(a.Values))) {
			body = append(body, jump(jeq, v, 0, 1), stmt(retK, allow))
		}
		body = append(body, stmt(retK, refuse))
		if len(body) > 255 {
			return nil, fmt.Errorf("seccomp: %s: %d argument values are more than one BPF jump can skip", r.Name, len(a.Values))
		}
		prog = append(prog, jump(jeq, uint32(r.Nr), 0, uint8(len(body))))
		prog = append(prog, body...)
	}
	prog = append(prog, stmt(retK, refuse))
	if len(prog) > maxInsns {
		return nil, fmt.Errorf("seccomp: the filter has %d instructions, more than the kernel's %d", len(prog), maxInsns)
	}
	return prog, nil
}
