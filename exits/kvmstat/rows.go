package kvmstat

import (
	"strconv"

	"github.com/mvm-dev/mvm/exits"
)

// Rows turns one stats file's deltas into report rows labelled vcpu.
func Rows(vcpu string, deltas []StatDelta) []exits.StatRow {
	rows := make([]exits.StatRow, 0, len(deltas))
	for _, d := range deltas {
		base := 10
		if d.Desc.Base() == BasePow2 {
			base = 2
		}
		row := exits.StatRow{
			Source:   exits.SourceKVMStats,
			VCPU:     vcpu,
			Name:     d.Desc.Name,
			Type:     d.Desc.Type().String(),
			Unit:     d.Desc.Unit().String(),
			Base:     base,
			Exponent: int(d.Desc.Exponent),
		}
		if d.Desc.IsHistogram() {
			row.Buckets = append([]uint64(nil), d.Values...)
			row.Delta = d.Sum()
			for _, v := range d.After {
				row.Value += v
			}
			row.Pretty = strconv.FormatUint(row.Delta, 10) + " samples"
		} else {
			row.Delta = d.Value()
			if len(d.After) > 0 {
				row.Value = d.After[0]
			}
			row.Pretty = d.Desc.Format(row.Delta)
		}
		rows = append(rows, row)
	}
	return rows
}

// TotalRows sums the cumulative and histogram stats of per-vCPU rows (not
// "vm" or "total" rows) into rows with vcpu "total".
func TotalRows(rows []exits.StatRow) []exits.StatRow {
	var out []exits.StatRow
	idx := make(map[string]int)
	for _, r := range rows {
		if r.VCPU == exits.VMVCPU || r.VCPU == exits.TotalVCPU {
			continue
		}
		if r.Type != StatCumulative.String() && r.Type != StatLinearHist.String() && r.Type != StatLogHist.String() {
			continue
		}
		i, ok := idx[r.Name]
		if !ok {
			t := r
			t.VCPU = exits.TotalVCPU
			t.Buckets = append([]uint64(nil), r.Buckets...)
			idx[r.Name] = len(out)
			out = append(out, t)
			continue
		}
		t := &out[i]
		t.Delta += r.Delta
		t.Value += r.Value
		for j := range r.Buckets {
			if j < len(t.Buckets) {
				t.Buckets[j] += r.Buckets[j]
			}
		}
	}
	for i := range out {
		out[i].Pretty = Pretty(out[i])
	}
	return out
}

// Pretty renders a stat row's delta with its unit, as Rows does from the
// descriptor.
func Pretty(r exits.StatRow) string {
	if r.Buckets != nil {
		return strconv.FormatUint(r.Delta, 10) + " samples"
	}
	var flags uint32
	for _, u := range []StatUnit{UnitNone, UnitBytes, UnitSeconds, UnitCycles, UnitBoolean} {
		if u.String() == r.Unit {
			flags |= uint32(u) << statsUnitShift
		}
	}
	if r.Base == 2 {
		flags |= uint32(BasePow2) << statsBaseShift
	}
	return StatDesc{Flags: flags, Exponent: int16(r.Exponent)}.Format(r.Delta)
}

// AddTo adds stat rows to rep and marks the KVM stats source used.
func AddTo(rep *exits.Report, rows []exits.StatRow) {
	rep.KVMStats = append(rep.KVMStats, rows...)
	rep.SetSource(exits.SourceKVMStats, "KVM_GET_STATS_FD of the VM and every vCPU, deltas over the run", nil)
}

// FormatDuration renders nanoseconds the way stats in seconds render.
func FormatDuration(ns uint64) string {
	return StatDesc{Flags: uint32(UnitSeconds) << statsUnitShift, Exponent: -9}.Format(ns)
}
