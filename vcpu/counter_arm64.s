#include "textflag.h"

// func readCounter() uint64
// CNTVCT_EL0, the virtual count the vDSO's clock_gettime reads too; Linux
// lets EL0 read it (CNTKCTL_EL1.EL0VCTEN). No ISB: an exit's timestamp may
// be taken a few instructions early or late.
TEXT ·readCounter(SB),NOSPLIT,$0-8
	MRS	CNTVCT_EL0, R0
	MOVD	R0, ret+0(FP)
	RET

// func counterFreq() uint64
TEXT ·counterFreq(SB),NOSPLIT,$0-8
	MRS	CNTFRQ_EL0, R0
	MOVD	R0, ret+0(FP)
	RET
