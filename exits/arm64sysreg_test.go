package exits

import "testing"

func TestSysRegNames(t *testing.T) {
	for _, c := range []struct {
		r    SysReg
		want string
	}{
		{SysReg{3, 0, 0, 0, 0}, "MIDR_EL1"},
		{SysReg{3, 0, 0, 0, 5}, "MPIDR_EL1"},
		{SysReg{3, 0, 0, 4, 0}, "ID_AA64PFR0_EL1"},
		{SysReg{3, 0, 0, 7, 2}, "ID_AA64MMFR2_EL1"},
		{SysReg{3, 0, 0, 1, 7}, "ID_MMFR3_EL1"},
		{SysReg{3, 0, 0, 6, 1}, "ID_AA64ISAR1_EL1"},
		{SysReg{3, 0, 12, 11, 5}, "ICC_SGI1R_EL1"},
		{SysReg{3, 0, 12, 12, 1}, "ICC_EOIR1_EL1"},
		{SysReg{3, 0, 12, 8, 5}, "ICC_AP0R1_EL1"},
		{SysReg{3, 0, 12, 9, 3}, "ICC_AP1R3_EL1"},
		{SysReg{3, 3, 14, 2, 1}, "CNTP_CTL_EL0"},
		{SysReg{3, 3, 14, 8, 3}, "PMEVCNTR3_EL0"},
		{SysReg{3, 3, 14, 15, 7}, "PMCCFILTR_EL0"},
		{SysReg{3, 3, 14, 13, 1}, "PMEVTYPER9_EL0"},
		{SysReg{2, 0, 1, 0, 4}, "OSLAR_EL1"},
		{SysReg{2, 0, 0, 3, 5}, "DBGBCR3_EL1"},
		{SysReg{1, 0, 7, 14, 2}, "DC_CISW"},
		{SysReg{3, 0, 1, 0, 0}, "SCTLR_EL1"},
		{SysReg{3, 5, 15, 1, 3}, "S3_5_C15_C1_3"}, // implementation defined
		{SysReg{0, 3, 4, 2, 1}, "S0_3_C4_C2_1"},
	} {
		if got := c.r.Name(); got != c.want {
			t.Errorf("%v: %q, want %q", c.r, got, c.want)
		}
	}
}

func TestSysRegFromISS(t *testing.T) {
	// MRS x3, ID_AA64PFR0_EL1: Op0 3, Op2 0, Op1 0, CRn 0, Rt 3, CRm 4, read.
	iss := uint64(3)<<20 | 0<<17 | 0<<14 | 0<<10 | 3<<5 | 4<<1 | 1
	r, read := SysRegFromISS(iss)
	if r != (SysReg{3, 0, 0, 4, 0}) || !read {
		t.Errorf("%v read=%v", r, read)
	}
	// MSR ICC_SGI1R_EL1, x0: Op0 3, Op2 5, Op1 0, CRn 12, CRm 11, write.
	iss = uint64(3)<<20 | 5<<17 | 0<<14 | 12<<10 | 0<<5 | 11<<1
	r, read = SysRegFromISS(iss)
	if r.Name() != "ICC_SGI1R_EL1" || read {
		t.Errorf("%v read=%v", r, read)
	}
}
