package kvm

import "testing"

// TestRegIDs checks the register constants against the constructors and
// against ids as the kernel spells them (the values QEMU and kvmtool pass
// for these registers, ARM64_CORE_REG and ARM64_SYS_REG expanded by hand).
func TestRegIDs(t *testing.T) {
	for _, tt := range []struct {
		name  string
		c, fn RegID
		want  uint64
	}{
		{"X0", RegX(0), CoreReg(0), 0x6030_0000_0010_0000},
		{"X30", RegX(30), CoreReg(30 * 8), 0x6030_0000_0010_003c},
		{"SP", RegSP, CoreReg(31 * 8), 0x6030_0000_0010_003e},
		{"PC", RegPC, CoreReg(32 * 8), 0x6030_0000_0010_0040},
		{"PSTATE", RegPSTATE, CoreReg(33 * 8), 0x6030_0000_0010_0042},
		{"SP_EL1", RegSPEL1, CoreReg(34 * 8), 0x6030_0000_0010_0044},
		{"MPIDR_EL1", RegMPIDREL1, SysReg(3, 0, 0, 0, 5), 0x6030_0000_0013_c005},
		{"SCTLR_EL1", RegSCTLREL1, SysReg(3, 0, 1, 0, 0), 0x6030_0000_0013_c080},
		{"ELR_EL1", RegELREL1, SysReg(3, 0, 4, 0, 1), 0x6030_0000_0013_c201},
		{"ESR_EL1", RegESREL1, SysReg(3, 0, 5, 2, 0), 0x6030_0000_0013_c290},
		{"FAR_EL1", RegFAREL1, SysReg(3, 0, 6, 0, 0), 0x6030_0000_0013_c300},
		{"VBAR_EL1", RegVBAREL1, SysReg(3, 0, 12, 0, 0), 0x6030_0000_0013_c600},
		{"CNTVCT_EL0", RegCNTVCTEL0, SysReg(3, 3, 14, 0, 2), 0x6030_0000_0013_df02},
	} {
		if uint64(tt.c) != tt.want || uint64(tt.fn) != tt.want {
			t.Errorf("%s: constant %#x, constructor %#x, want %#x", tt.name, uint64(tt.c), uint64(tt.fn), tt.want)
		}
	}
}
