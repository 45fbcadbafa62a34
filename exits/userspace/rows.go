package userspace

import (
	"strconv"

	"github.com/mvm-dev/mvm/exits"
)

// Rows turns recorder snapshots into per-vCPU rows and total rows of the
// report model.
func Rows(snaps []RecorderSnapshot) []exits.Row {
	var rows []exits.Row
	totals := make(map[string]*exits.Row)
	var order []string
	for _, s := range snaps {
		for _, k := range s.Keys {
			row := exits.Row{
				Source:       exits.SourceUserspace,
				VCPU:         strconv.Itoa(s.VCPU),
				Reason:       k.Name,
				Kind:         k.Kind.String(),
				Sub:          k.Sub,
				Count:        k.Count,
				TimeNS:       k.SumNS,
				TimeCount:    k.Count,
				TimeMinNS:    k.MinNS,
				TimeMaxNS:    k.MaxNS,
				HandleNS:     k.SumNS,
				HandleCount:  k.Count,
				HandleMinNS:  k.MinNS,
				HandleMaxNS:  k.MaxNS,
				TimeMeanNS:   k.MeanNS(),
				HandleMeanNS: k.MeanNS(),
			}
			rows = append(rows, row)
			t, ok := totals[k.Name]
			if !ok {
				t = &exits.Row{Source: exits.SourceUserspace, VCPU: exits.TotalVCPU, Reason: k.Name, Kind: row.Kind, Sub: row.Sub}
				totals[k.Name] = t
				order = append(order, k.Name)
			}
			exits.MergeRow(t, &row)
		}
	}
	tot := make([]exits.Row, 0, len(order))
	for _, name := range order {
		tot = append(tot, *totals[name])
	}
	return append(exits.SortRows(rows), exits.SortRows(tot)...)
}

// AddTo adds the rows of the recorders' snapshots (per vCPU and total) to
// rep and marks the userspace source used.
func AddTo(rep *exits.Report, snaps []RecorderSnapshot) {
	rep.Rows = append(rep.Rows, Rows(snaps)...)
	rep.SetSource(exits.SourceUserspace, "KVM_RUN returns counted and timed by the vCPU run loops", nil)
}
