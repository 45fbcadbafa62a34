package attach

import (
	"testing"

	"github.com/mvm-dev/mvm/exits"
)

func TestUntraced(t *testing.T) {
	stats := []exits.StatRow{
		{Source: exits.SourceKVMStats, VCPU: "0", Name: "exits", Delta: 7},
		{Source: exits.SourceKVMStats, VCPU: exits.TotalVCPU, Name: "exits", Delta: 12},
		{Source: exits.SourceKVMStats, VCPU: exits.TotalVCPU, Name: "hvc_exit_stat", Delta: 3},
	}
	traced := []exits.Row{
		{Source: exits.SourceTracepoint, VCPU: "0", Reason: "WFx", Count: 5},
		{Source: exits.SourceTracepoint, VCPU: exits.TotalVCPU, Reason: "WFx", Count: 5},
	}
	for _, c := range []struct {
		name string
		rep  exits.Report
		want uint64
	}{
		{"both count", exits.Report{Rows: traced, KVMStats: stats}, 0},
		{"no tracepoint rows", exits.Report{KVMStats: stats}, 12},
		{"only per-vCPU rows", exits.Report{Rows: traced[:1], KVMStats: stats}, 12},
		{"zero-count rows", exits.Report{Rows: []exits.Row{{Source: exits.SourceTracepoint, VCPU: exits.TotalVCPU, Reason: "WFx"}}, KVMStats: stats}, 12},
		{"no stats", exits.Report{}, 0},
		{"other source's rows", exits.Report{Rows: []exits.Row{{Source: "tracepoint_bpf", VCPU: exits.TotalVCPU, Count: 9}}, KVMStats: stats}, 12},
	} {
		if got := untraced(&c.rep); got != c.want {
			t.Errorf("%s: untraced = %d, want %d", c.name, got, c.want)
		}
	}
}
