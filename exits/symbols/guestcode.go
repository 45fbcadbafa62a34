package symbols

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/mvm-dev/mvm/exits"
)

// Where reports group exit PCs without a symbol.
const (
	// UserCode gathers PCs in the TTBR0 half (guest user space).
	UserCode = "(user space)"
	// NoSymbol gathers kernel PCs the table does not cover (modules not
	// in the file, firmware, a wrong KASLR offset).
	NoSymbol = "(no symbol)"
)

// GuestCode turns per-reason exit PC counts into the report's view: per
// reason, the top functions (with tab; offset is added to the table's
// addresses to get the guest's, see KASLROffset) or the top raw PCs
// (without), most frequent first. other holds the per-reason exits the
// PC bound left out.
func GuestCode(pcs map[string]map[uint64]uint64, other map[string]uint64, tab *Table, offset uint64, top int) []exits.GuestCodeReason {
	var out []exits.GuestCodeReason
	totals := map[string]uint64{}
	for reason, m := range pcs {
		gr := exits.GuestCodeReason{Reason: reason, Other: other[reason]}
		type fn struct {
			name    string
			n       uint64
			topPC   uint64
			topN    uint64
			topName string
		}
		byFn := map[string]*fn{}
		for pc, n := range m {
			totals[reason] += n
			name, label := fmt.Sprintf("0x%x", pc), fmt.Sprintf("0x%x", pc)
			if tab != nil {
				switch s, off, ok := tab.Lookup(pc - offset); {
				case ok:
					name, label = s, fmt.Sprintf("%s+0x%x", s, off)
				case pc>>55&1 == 0:
					name = UserCode
				default:
					name = NoSymbol
				}
			}
			f := byFn[name]
			if f == nil {
				f = &fn{name: name}
				byFn[name] = f
			}
			f.n += n
			if n > f.topN || n == f.topN && pc < f.topPC {
				f.topN, f.topPC, f.topName = n, pc, label
			}
		}
		fns := make([]*fn, 0, len(byFn))
		for _, f := range byFn {
			fns = append(fns, f)
		}
		slices.SortFunc(fns, func(a, b *fn) int { return cmp.Or(cmp.Compare(b.n, a.n), cmp.Compare(a.name, b.name)) })
		for i, f := range fns {
			if i >= top {
				gr.Other += f.n
				continue
			}
			g := exits.GuestFunc{Function: f.name, Samples: f.n}
			if tab != nil && f.name != UserCode && f.name != NoSymbol {
				g.TopPC = f.topName
			}
			gr.Functions = append(gr.Functions, g)
		}
		totals[reason] += other[reason]
		out = append(out, gr)
	}
	slices.SortFunc(out, func(a, b exits.GuestCodeReason) int {
		return cmp.Or(cmp.Compare(totals[b.Reason], totals[a.Reason]), cmp.Compare(a.Reason, b.Reason))
	})
	return out
}
