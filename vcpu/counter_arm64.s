#include "textflag.h"

// func counter() uint64
// CNTVCT_EL0, the architected virtual counter, which Linux lets EL0 read
// (the vDSO reads it too). The ISB keeps the read from being performed
// ahead of the instructions before it (Arm ARM D12.1.2).
TEXT ·counter(SB), NOSPLIT, $0-8
	ISB	$15
	MRS	CNTVCT_EL0, R0
	MOVD	R0, ret+0(FP)
	RET

// func counterFreq() uint64
TEXT ·counterFreq(SB), NOSPLIT, $0-8
	MRS	CNTFRQ_EL0, R0
	MOVD	R0, ret+0(FP)
	RET
