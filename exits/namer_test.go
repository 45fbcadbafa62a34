package exits

import "testing"

func TestArm64ExitNames(t *testing.T) {
	n := Arm64Namer{}
	// Every exception class the issue and perf's table name, with its EC.
	ecs := map[uint64]string{
		0x00: "UNKNOWN", 0x01: "WFx", 0x03: "CP15_32", 0x04: "CP15_64", 0x05: "CP14_MR",
		0x06: "CP14_LS", 0x07: "FP_ASIMD", 0x08: "CP10_ID", 0x09: "PAC", 0x0C: "CP14_64",
		0x0D: "BTI", 0x0E: "ILL", 0x11: "SVC32", 0x12: "HVC32", 0x13: "SMC32", 0x15: "SVC64",
		0x16: "HVC64", 0x17: "SMC64", 0x18: "SYS64", 0x19: "SVE", 0x1A: "ERET", 0x1C: "FPAC",
		0x1D: "SME", 0x1F: "IMP_DEF", 0x20: "IABT_LOW", 0x21: "IABT_CUR", 0x22: "PC_ALIGN",
		0x24: "DABT_LOW", 0x25: "DABT_CUR", 0x26: "SP_ALIGN", 0x28: "FP_EXC32", 0x2C: "FP_EXC64",
		0x2F: "SERROR", 0x30: "BREAKPT_LOW", 0x31: "BREAKPT_CUR", 0x32: "SOFTSTP_LOW",
		0x33: "SOFTSTP_CUR", 0x34: "WATCHPT_LOW", 0x35: "WATCHPT_CUR", 0x38: "BKPT32",
		0x3A: "VECTOR32", 0x3C: "BRK64",
	}
	named := 0
	for ec := uint64(0); ec < 64; ec++ {
		got := n.ExitName(Arm64ExceptionTrap, ec)
		if want, ok := ecs[ec]; ok {
			named++
			if got != want {
				t.Errorf("TRAP EC %#x = %q, want %q", ec, got, want)
			}
			continue
		}
		if want := "EC_0x" + hex2(ec); got != want {
			t.Errorf("unnamed TRAP EC %#x = %q, want %q", ec, got, want)
		}
	}
	if named != len(ecs) {
		t.Errorf("checked %d named classes, want %d", named, len(ecs))
	}
	for _, tc := range []struct {
		ret, ec uint64
		want    string
	}{
		{0, 0x24, "IRQ"}, // esr_ec is ignored unless TRAP
		{1, 0, "SERROR"},
		{3, 0, "ILLEGAL"},
		{0xbadca11, 0, "HYP_GONE"},
		{1<<31 | 2, 0x16, "HVC64"},             // SError-pending bit stripped
		{0xffff_ffff_8000_0002, 0x18, "SYS64"}, // ret is a sign-extended C int
		{7, 0, "RET_0x7"},
		{2, 0x40, "EC_0x40"}, // EC is 6 bits; larger values must not index out of range
		{2, ^uint64(0), "EC_0xFFFFFFFFFFFFFFFF"},
	} {
		if got := n.ExitName(tc.ret, tc.ec); got != tc.want {
			t.Errorf("ExitName(%#x, %#x) = %q, want %q", tc.ret, tc.ec, got, tc.want)
		}
	}
	if n.PerfTime() != GuestTime || n.CodeField() != "ret" || n.SubField() != "esr_ec" {
		t.Errorf("arm64 namer metadata wrong: %v %s %s", n.PerfTime(), n.CodeField(), n.SubField())
	}
}

func hex2(v uint64) string {
	const digits = "0123456789ABCDEF"
	return string([]byte{digits[v>>4&0xf], digits[v&0xf]})
}

func TestX86ExitNames(t *testing.T) {
	n := X86Namer{}
	for _, tc := range []struct {
		code, isa uint64
		want      string
	}{
		{30, X86ISAVMX, "IO_INSTRUCTION"},
		{12, X86ISAVMX, "HLT"},
		{48, X86ISAVMX, "EPT_VIOLATION"},
		{1, X86ISAVMX, "EXTERNAL_INTERRUPT"},
		{77, X86ISAVMX, "TDCALL"},
		{0x8000_0021, X86ISAVMX, "FAILED_VMENTRY(INVALID_STATE)"},
		{0x1_0000_001e, X86ISAVMX, "IO_INSTRUCTION"}, // bits above 32 ignored
		{5, X86ISAVMX, "EXIT_0x5"},
		{0x7b, X86ISASVM, "io"},
		{0x78, X86ISASVM, "hlt"},
		{0x400, X86ISASVM, "npf"},
		{0x4e, X86ISASVM, "PF excp"},
		{0xffff_ffff, X86ISASVM, "invalid_guest_state"},
		{0x99, X86ISASVM, "SVM_0x99"},
		{30, 3, "ISA3_0x1e"},
	} {
		if got := n.ExitName(tc.code, tc.isa); got != tc.want {
			t.Errorf("ExitName(%#x, isa %d) = %q, want %q", tc.code, tc.isa, got, tc.want)
		}
	}
	if n.PerfTime() != HandleTime {
		t.Errorf("x86 perf time = %v, want handle", n.PerfTime())
	}
}

func TestNamerSelection(t *testing.T) {
	for arch, want := range map[string]string{"arm64": "arm64", "amd64": "amd64", "386": "amd64"} {
		n, err := NamerForArch(arch)
		if err != nil || n.Arch() != want {
			t.Errorf("NamerForArch(%q) = %v, %v", arch, n, err)
		}
	}
	if _, err := NamerForArch("riscv64"); err == nil {
		t.Error("NamerForArch(riscv64) succeeded")
	}
	fields := func(names ...string) func(string) bool {
		return func(f string) bool {
			for _, n := range names {
				if n == f {
					return true
				}
			}
			return false
		}
	}
	if n, err := NamerForFields(fields("ret", "esr_ec", "vcpu_pc")); err != nil || n.Arch() != "arm64" {
		t.Errorf("arm64 fields: %v, %v", n, err)
	}
	if n, err := NamerForFields(fields("exit_reason", "guest_rip", "isa", "info1")); err != nil || n.Arch() != "amd64" {
		t.Errorf("x86 fields: %v, %v", n, err)
	}
	if _, err := NamerForFields(fields("scause")); err == nil {
		t.Error("riscv fields accepted")
	}
	if GuestTime.String() != "guest" || HandleTime.String() != "handle" || TimeBasis(9).String() == "" {
		t.Error("TimeBasis names")
	}
}
