package tracepoint

import "github.com/mvm-dev/mvm/exits"

// Breakdown key classes (the top byte of a key), for a source that builds
// the keys itself (exits/bpfagg, in the kernel).
const (
	ClassSys  = classSys
	ClassFunc = classFunc
	ClassWFx  = classWFx
	ClassDev  = classDev
	// DevUnmapped is the device index of an abort outside every region.
	DevUnmapped = devUnmapped
	// MaxAddrsPerRow is how many distinct guest-physical addresses a
	// device row keeps; exits at others count as "other".
	MaxAddrsPerRow = maxAddrsPerRow
)

// BreakdownClass is the breakdown class of an exit's raw reason fields
// (0: the reason has no breakdown).
func BreakdownClass(n exits.Namer, code, sub uint64) uint64 { return breakdownClass(n, code, sub) }

// SysRegKeyFromESR is the SYS64 breakdown key of a trapped system-register
// access from its ESR (the ISS fields, as kvm:kvm_handle_sys_reg gives
// them), the same key kvm:kvm_sys_access gives.
func SysRegKeyFromESR(esr uint64) uint64 {
	r, read := exits.SysRegFromISS(esr & 0x1ff_ffff)
	k := uint64(r.Op0)<<14 | uint64(r.Op1)<<11 | uint64(r.CRn)<<7 | uint64(r.CRm)<<3 | uint64(r.Op2)
	if !read {
		k |= 1 << 16
	}
	return classSys<<56 | k
}

// KeyName names a breakdown key with the guest layout l (its Regions name
// the device keys), as the report shows it.
func KeyName(l Layout, k uint64) string {
	a := Aggregator{layout: l}
	return a.keyName(k)
}
