package exits

import "fmt"

// SysReg is the encoding of an AArch64 system register or system
// instruction (MRS/MSR/SYS operands), as an ESR_ELx ISS of exception class
// 0x18 and the kvm:kvm_sys_access tracepoint carry it.
type SysReg struct {
	Op0, Op1, CRn, CRm, Op2 uint8
}

// SysRegFromISS decodes the ISS of a trapped MSR/MRS/SYS (EC 0x18, Arm ARM
// "ISS encoding for an exception from MSR, MRS, or System instruction
// execution in AArch64 state"): Op0 [21:20], Op2 [19:17], Op1 [16:14],
// CRn [13:10], Rt [9:5], CRm [4:1], Direction [0] (1 = read, MRS).
func SysRegFromISS(iss uint64) (r SysReg, read bool) {
	r = SysReg{
		Op0: uint8(iss >> 20 & 3),
		Op2: uint8(iss >> 17 & 7),
		Op1: uint8(iss >> 14 & 7),
		CRn: uint8(iss >> 10 & 15),
		CRm: uint8(iss >> 1 & 15),
	}
	return r, iss&1 == 1
}

// String is the generic name S<op0>_<op1>_C<n>_C<m>_<op2> that assemblers
// accept for any encoding.
func (r SysReg) String() string {
	return fmt.Sprintf("S%d_%d_C%d_C%d_%d", r.Op0, r.Op1, r.CRn, r.CRm, r.Op2)
}

// Name is the architectural name of the register ("ICC_SGI1R_EL1"), or
// the generic S<op0>_<op1>_C<n>_C<m>_<op2> form for encodings mvm's table
// does not know. The table holds the registers a KVM guest traps on:
// identification, GICv3 CPU interface, timers, PMU, debug, cache
// set/way maintenance and the EL1 controls KVM traps for its own reasons
// (encodings from the Arm ARM, chapter D23 "AArch64 System Register
// Descriptions").
func (r SysReg) Name() string {
	if n := sysRegName(r); n != "" {
		return n
	}
	return r.String()
}

func sysRegName(r SysReg) string {
	switch r.Op0 {
	case 1:
		return sysInsnName(r)
	case 2:
		return debugRegName(r)
	case 3:
	default:
		return ""
	}
	if r.Op1 == 0 && r.CRn == 0 {
		return idRegName(r.CRm, r.Op2)
	}
	if r.Op1 == 3 && r.CRn == 14 && r.CRm >= 8 {
		n := int(r.CRm&3)<<3 | int(r.Op2)
		if r.CRm < 12 {
			return fmt.Sprintf("PMEVCNTR%d_EL0", n)
		}
		if n == 31 {
			return "PMCCFILTR_EL0"
		}
		return fmt.Sprintf("PMEVTYPER%d_EL0", n)
	}
	if r.Op1 == 0 && r.CRn == 12 && (r.CRm == 8 || r.CRm == 9) && r.Op2 >= 4 || r.Op1 == 0 && r.CRn == 12 && r.CRm == 9 && r.Op2 < 4 {
		if r.CRm == 8 {
			return fmt.Sprintf("ICC_AP0R%d_EL1", r.Op2-4)
		}
		return fmt.Sprintf("ICC_AP1R%d_EL1", r.Op2)
	}
	k := uint32(r.Op1)<<12 | uint32(r.CRn)<<8 | uint32(r.CRm)<<4 | uint32(r.Op2)
	switch k {
	// Cache identification.
	case 0x1000:
		return "CCSIDR_EL1"
	case 0x1001:
		return "CLIDR_EL1"
	case 0x1007:
		return "AIDR_EL1"
	case 0x2000:
		return "CSSELR_EL1"
	case 0x3001:
		return "CTR_EL0"
	case 0x3007:
		return "DCZID_EL0"
	// EL1 controls and memory management.
	case 0x0100:
		return "SCTLR_EL1"
	case 0x0101:
		return "ACTLR_EL1"
	case 0x0102:
		return "CPACR_EL1"
	case 0x0120:
		return "ZCR_EL1"
	case 0x0200:
		return "TTBR0_EL1"
	case 0x0201:
		return "TTBR1_EL1"
	case 0x0202:
		return "TCR_EL1"
	case 0x0510:
		return "AFSR0_EL1"
	case 0x0511:
		return "AFSR1_EL1"
	case 0x0520:
		return "ESR_EL1"
	case 0x0530:
		return "ERRIDR_EL1"
	case 0x0531:
		return "ERRSELR_EL1"
	case 0x0600:
		return "FAR_EL1"
	case 0x0740:
		return "PAR_EL1"
	case 0x0a20:
		return "MAIR_EL1"
	case 0x0a30:
		return "AMAIR_EL1"
	case 0x0a40:
		return "LORSA_EL1"
	case 0x0a41:
		return "LOREA_EL1"
	case 0x0a42:
		return "LORN_EL1"
	case 0x0a43:
		return "LORC_EL1"
	case 0x0a47:
		return "LORID_EL1"
	case 0x0c00:
		return "VBAR_EL1"
	case 0x0c11:
		return "DISR_EL1"
	case 0x0d01:
		return "CONTEXTIDR_EL1"
	case 0x0d04:
		return "TPIDR_EL1"
	case 0x0e10:
		return "CNTKCTL_EL1"
	case 0x3240:
		return "RNDR"
	case 0x3241:
		return "RNDRRS"
	// GICv3 CPU interface (Arm IHI 0069, ICC_* system registers).
	case 0x0460:
		return "ICC_PMR_EL1"
	case 0x0c80:
		return "ICC_IAR0_EL1"
	case 0x0c81:
		return "ICC_EOIR0_EL1"
	case 0x0c82:
		return "ICC_HPPIR0_EL1"
	case 0x0c83:
		return "ICC_BPR0_EL1"
	case 0x0cb1:
		return "ICC_DIR_EL1"
	case 0x0cb3:
		return "ICC_RPR_EL1"
	case 0x0cb5:
		return "ICC_SGI1R_EL1"
	case 0x0cb6:
		return "ICC_ASGI1R_EL1"
	case 0x0cb7:
		return "ICC_SGI0R_EL1"
	case 0x0cc0:
		return "ICC_IAR1_EL1"
	case 0x0cc1:
		return "ICC_EOIR1_EL1"
	case 0x0cc2:
		return "ICC_HPPIR1_EL1"
	case 0x0cc3:
		return "ICC_BPR1_EL1"
	case 0x0cc4:
		return "ICC_CTLR_EL1"
	case 0x0cc5:
		return "ICC_SRE_EL1"
	case 0x0cc6:
		return "ICC_IGRPEN0_EL1"
	case 0x0cc7:
		return "ICC_IGRPEN1_EL1"
	// Generic timer.
	case 0x3e00:
		return "CNTFRQ_EL0"
	case 0x3e01:
		return "CNTPCT_EL0"
	case 0x3e02:
		return "CNTVCT_EL0"
	case 0x3e05:
		return "CNTPCTSS_EL0"
	case 0x3e06:
		return "CNTVCTSS_EL0"
	case 0x3e20:
		return "CNTP_TVAL_EL0"
	case 0x3e21:
		return "CNTP_CTL_EL0"
	case 0x3e22:
		return "CNTP_CVAL_EL0"
	case 0x3e30:
		return "CNTV_TVAL_EL0"
	case 0x3e31:
		return "CNTV_CTL_EL0"
	case 0x3e32:
		return "CNTV_CVAL_EL0"
	// PMU.
	case 0x09e1:
		return "PMINTENSET_EL1"
	case 0x09e2:
		return "PMINTENCLR_EL1"
	case 0x39c0:
		return "PMCR_EL0"
	case 0x39c1:
		return "PMCNTENSET_EL0"
	case 0x39c2:
		return "PMCNTENCLR_EL0"
	case 0x39c3:
		return "PMOVSCLR_EL0"
	case 0x39c4:
		return "PMSWINC_EL0"
	case 0x39c5:
		return "PMSELR_EL0"
	case 0x39c6:
		return "PMCEID0_EL0"
	case 0x39c7:
		return "PMCEID1_EL0"
	case 0x39d0:
		return "PMCCNTR_EL0"
	case 0x39d1:
		return "PMXEVTYPER_EL0"
	case 0x39d2:
		return "PMXEVCNTR_EL0"
	case 0x39e0:
		return "PMUSERENR_EL0"
	case 0x39e3:
		return "PMOVSSET_EL0"
	case 0x3d05:
		return "TPIDR2_EL0"
	}
	return ""
}

// idRegName names the ID register space Op0=3, Op1=0, CRn=0.
func idRegName(crm, op2 uint8) string {
	switch uint32(crm)<<4 | uint32(op2) {
	case 0x00:
		return "MIDR_EL1"
	case 0x05:
		return "MPIDR_EL1"
	case 0x06:
		return "REVIDR_EL1"
	case 0x10:
		return "ID_PFR0_EL1"
	case 0x11:
		return "ID_PFR1_EL1"
	case 0x12:
		return "ID_DFR0_EL1"
	case 0x13:
		return "ID_AFR0_EL1"
	case 0x14, 0x15, 0x16, 0x17:
		return fmt.Sprintf("ID_MMFR%d_EL1", op2-4)
	case 0x20, 0x21, 0x22, 0x23, 0x24, 0x25:
		return fmt.Sprintf("ID_ISAR%d_EL1", op2)
	case 0x26:
		return "ID_MMFR4_EL1"
	case 0x27:
		return "ID_ISAR6_EL1"
	case 0x30, 0x31, 0x32:
		return fmt.Sprintf("MVFR%d_EL1", op2)
	case 0x34:
		return "ID_PFR2_EL1"
	case 0x35:
		return "ID_DFR1_EL1"
	case 0x36:
		return "ID_MMFR5_EL1"
	case 0x40, 0x41, 0x42:
		return fmt.Sprintf("ID_AA64PFR%d_EL1", op2)
	case 0x44:
		return "ID_AA64ZFR0_EL1"
	case 0x45:
		return "ID_AA64SMFR0_EL1"
	case 0x47:
		return "ID_AA64FPFR0_EL1"
	case 0x50, 0x51:
		return fmt.Sprintf("ID_AA64DFR%d_EL1", op2)
	case 0x54, 0x55:
		return fmt.Sprintf("ID_AA64AFR%d_EL1", op2-4)
	case 0x60, 0x61, 0x62, 0x63:
		return fmt.Sprintf("ID_AA64ISAR%d_EL1", op2)
	case 0x70, 0x71, 0x72, 0x73, 0x74:
		return fmt.Sprintf("ID_AA64MMFR%d_EL1", op2)
	}
	return ""
}

// debugRegName names the Op0=2 debug registers.
func debugRegName(r SysReg) string {
	if r.Op1 == 0 && r.CRn == 0 && r.Op2 >= 4 {
		return fmt.Sprintf("%s%d_EL1", [4]string{"DBGBVR", "DBGBCR", "DBGWVR", "DBGWCR"}[r.Op2-4], r.CRm)
	}
	switch uint32(r.Op1)<<12 | uint32(r.CRn)<<8 | uint32(r.CRm)<<4 | uint32(r.Op2) {
	case 0x0022:
		return "MDSCR_EL1"
	case 0x0100:
		return "MDRAR_EL1"
	case 0x0104:
		return "OSLAR_EL1"
	case 0x0114:
		return "OSLSR_EL1"
	case 0x0134:
		return "OSDLR_EL1"
	case 0x0786:
		return "DBGCLAIMSET_EL1"
	case 0x0796:
		return "DBGCLAIMCLR_EL1"
	case 0x07e6:
		return "DBGAUTHSTATUS_EL1"
	case 0x3010:
		return "MDCCSR_EL0"
	}
	return ""
}

// sysInsnName names the Op0=1 system instructions KVM traps (data cache
// maintenance by set/way, which KVM emulates to track the guest's cache
// state).
func sysInsnName(r SysReg) string {
	if r.Op1 != 0 || r.CRn != 7 || r.Op2 != 2 {
		return ""
	}
	switch r.CRm {
	case 6:
		return "DC_ISW"
	case 10:
		return "DC_CSW"
	case 14:
		return "DC_CISW"
	}
	return ""
}
