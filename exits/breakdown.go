package exits

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/mvm-dev/mvm/psci"
)

// The breakdown of an arm64 trap: which exits are broken down (by their
// exception class), how a breakdown key is built (a class in the top byte,
// a value below it) and how it is named. The perf-ring reader builds keys
// in Go, the BPF programs in the kernel from the same constants.

// Breakdown key classes (the top byte of a key).
const (
	ClassUnknown = 0
	ClassOther   = 1
	// ClassSys: SYS64 by register; the value is Op0<<14 | Op1<<11 |
	// CRn<<7 | CRm<<3 | Op2, | 1<<16 for a write (kvm:kvm_sys_access).
	ClassSys = 2
	// ClassFunc: HVC64 and SMC64 by SMCCC function ID (X0).
	ClassFunc = 3
	// ClassWFx: WFx by instruction; the value is 1 for WFE, 0 for WFI.
	ClassWFx = 4
	// ClassDev: IABT_LOW and DABT_LOW by the index of the Layout region
	// the IPA falls in (DevUnmapped: none).
	ClassDev = 5

	// KeyUnknown is the key of an exit no detail event described;
	// KeyOther that of exits past MaxKeysPerReason.
	KeyUnknown = ClassUnknown << 56
	KeyOther   = ClassOther << 56
	// DevUnmapped is the device index of an abort outside every region.
	DevUnmapped = 0xffff_ffff
)

// Bounds that keep an aggregate's memory fixed however long the guest
// runs: distinct breakdown keys per reason, addresses per device row, and
// exit PCs per reason; past them, exits count under "other".
const (
	MaxKeysPerReason = 64
	MaxAddrsPerRow   = 32
	MaxPCsPerReason  = 4096
	// TopAddrs is how many addresses of a device row the report lists.
	TopAddrs = 8
)

// ECClass pairs an ESR exception class with its breakdown class.
type ECClass struct {
	EC    uint64
	Class uint64
}

// Arm64BreakdownClasses lists the exception classes of an arm64 trap
// (kvm_exit ret ARM_EXCEPTION_TRAP) that are broken down, with the class
// of their keys. The BPF programs compile the same list into their exit
// program.
func Arm64BreakdownClasses() []ECClass {
	return []ECClass{
		{ECSys64, ClassSys},
		{ECIABTLow, ClassDev},
		{ECDABTLow, ClassDev},
		{ECHVC64, ClassFunc},
		{ECSMC64, ClassFunc},
		{ECWFx, ClassWFx},
	}
}

// BreakdownClass is the breakdown class of an exit's raw reason fields
// (0: the reason has no breakdown).
func BreakdownClass(n Namer, code, sub uint64) uint64 {
	if n.Arch() != "arm64" || code != Arm64ExceptionTrap {
		return 0
	}
	for _, c := range Arm64BreakdownClasses() {
		if c.EC == sub {
			return c.Class
		}
	}
	return 0
}

// SysRegKey is the SYS64 breakdown key of a register access (Val of
// kvm:kvm_sys_access: the encoding, with bit 16 set for a write).
func SysRegKey(val uint64) uint64 { return ClassSys<<56 | val&0x1ffff }

// SysRegKeyFromESR is the SYS64 breakdown key of a trapped system-register
// access from its ESR (the ISS fields, as kvm:kvm_handle_sys_reg gives
// them), the same key kvm:kvm_sys_access gives.
func SysRegKeyFromESR(esr uint64) uint64 {
	r, read := SysRegFromISS(esr & 0x1ff_ffff)
	k := uint64(r.Op0)<<14 | uint64(r.Op1)<<11 | uint64(r.CRn)<<7 | uint64(r.CRm)<<3 | uint64(r.Op2)
	if !read {
		k |= 1 << 16
	}
	return ClassSys<<56 | k
}

// FuncKey is the HVC64/SMC64 breakdown key of SMCCC function ID fid.
func FuncKey(fid uint64) uint64 { return ClassFunc<<56 | fid&0xffff_ffff }

// WFxKey is the WFx breakdown key (isWFE: kvm:kvm_wfx_arm64's is_wfe).
func WFxKey(isWFE uint64) uint64 { return ClassWFx<<56 | isWFE&1 }

// DevKey is the abort breakdown key of region index dev.
func DevKey(dev uint32) uint64 { return ClassDev<<56 | uint64(dev) }

// Region is a named guest-physical address range, for naming the device
// of a data or instruction abort (vGIC distributor, redistributors, the
// VMM's devices, RAM).
type Region struct {
	Name       string
	Base, Size uint64
}

// Layout describes the guest an exit profile is of.
type Layout struct {
	// Regions name the guest-physical address ranges; an abort elsewhere
	// is "unmapped".
	Regions []Region
	// RAM is the guest's RAM: a PC inside it is not a user address (the
	// kernel runs there with the MMU off).
	RAM []Region
	// VCPUs is the number of vCPUs; the secondaries phase ends when all
	// but the boot vCPU have entered the guest (0: not known, no phases).
	VCPUs int
}

// Region is the index of the region ipa falls in (DevUnmapped: none).
func (l Layout) Region(ipa uint64) uint32 {
	for i, r := range l.Regions {
		if ipa >= r.Base && ipa-r.Base < r.Size {
			return uint32(i)
		}
	}
	return DevUnmapped
}

// InRAM reports an address inside the guest's RAM.
func (l Layout) InRAM(addr uint64) bool {
	for _, r := range l.RAM {
		if addr >= r.Base && addr-r.Base < r.Size {
			return true
		}
	}
	return false
}

// KeyName names breakdown key k as the report shows it (the layout's
// Regions name the device keys).
func (l Layout) KeyName(k uint64) string {
	v := k & (1<<56 - 1)
	switch k >> 56 {
	case ClassOther:
		return "other"
	case ClassSys:
		r := SysReg{Op0: uint8(v >> 14 & 3), Op1: uint8(v >> 11 & 7), CRn: uint8(v >> 7 & 15), CRm: uint8(v >> 3 & 15), Op2: uint8(v & 7)}
		if v>>16&1 == 1 {
			return r.Name() + " write"
		}
		return r.Name() + " read"
	case ClassFunc:
		return FuncName(uint32(v))
	case ClassWFx:
		if v == 1 {
			return "WFE"
		}
		return "WFI"
	case ClassDev:
		if int(v) < len(l.Regions) {
			return l.Regions[v].Name
		}
		if len(l.Regions) == 0 {
			return "no memory map" // another VMM's guest: see the addresses
		}
		return "unmapped"
	}
	return "unknown"
}

// FuncName names an SMCCC function ID: a PSCI function, another call a
// Linux guest makes of KVM, or its number.
func FuncName(fid uint32) string {
	if psci.InRange(fid) {
		return psci.Name(fid)
	}
	if n := smcccName(fid); n != "" {
		return n
	}
	return fmt.Sprintf("SMCCC 0x%08x", fid)
}

// smcccName names the non-PSCI SMCCC calls a Linux guest makes of KVM: the
// Arm architecture calls (SMCCC v1.1+, DEN0028), the TRNG interface
// (DEN0098) and KVM's vendor hypervisor services (Documentation/virt/kvm/
// arm/hypercalls.rst, pvtime.rst).
func smcccName(fid uint32) string {
	switch fid {
	case psci.SMCCCVersionFID:
		return "SMCCC_VERSION"
	case 0x8000_0001:
		return "SMCCC_ARCH_FEATURES"
	case 0x8000_0002:
		return "SMCCC_ARCH_SOC_ID"
	case 0x8000_8000:
		return "SMCCC_ARCH_WORKAROUND_1"
	case 0x8000_7fff:
		return "SMCCC_ARCH_WORKAROUND_2"
	case 0x8000_3fff:
		return "SMCCC_ARCH_WORKAROUND_3"
	case 0x8400_0050:
		return "TRNG_VERSION"
	case 0x8400_0051:
		return "TRNG_FEATURES"
	case 0x8400_0052:
		return "TRNG_GET_UUID"
	case 0x8400_0053, 0xc400_0053:
		return "TRNG_RND"
	case 0x8600_ff01:
		return "KVM_VENDOR_HYP_UID"
	case 0x8600_0000:
		return "KVM_HYP_FEATURES"
	case 0xc500_0020:
		return "PV_TIME_FEATURES"
	case 0xc500_0021:
		return "PV_TIME_ST"
	}
	return ""
}

// IsCPUOn reports a PSCI CPU_ON function ID (SMC32 or SMC64 convention):
// the first one starts the secondaries phase.
func IsCPUOn(fid uint64) bool { return fid == uint64(psci.FnCPUOn) || fid == uint64(psci.FnCPUOn64) }

// KernelPC reports an address in the TTBR1 half (bit 55 set: the kernel's
// half of the address space, Arm ARM D8.1 "Address translation").
func KernelPC(pc uint64) bool { return pc>>55&1 == 1 }

// TopAddresses lists the TopAddrs addresses of a device row with the most
// exits (ties: the lower address first), then "other": the rest of them
// and more, the exits at addresses past MaxAddrsPerRow.
func TopAddresses(m map[uint64]uint64, more uint64) []AddressCount {
	var ac []AddressCount
	ips := make([]uint64, 0, len(m))
	for ip := range m {
		ips = append(ips, ip)
	}
	slices.SortFunc(ips, func(x, y uint64) int { return cmp.Or(cmp.Compare(m[y], m[x]), cmp.Compare(x, y)) })
	rest := more
	for i, ip := range ips {
		if i < TopAddrs {
			ac = append(ac, AddressCount{Addr: fmt.Sprintf("0x%x", ip), Samples: m[ip]})
		} else {
			rest += m[ip]
		}
	}
	if rest > 0 {
		ac = append(ac, AddressCount{Addr: "other", Samples: rest})
	}
	return ac
}
