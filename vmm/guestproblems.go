package vmm

import (
	"github.com/mvm-dev/mvm/exits/metrics"

	"github.com/mvm-dev/mvm/runsummary"
)

// guestProblems is what mvm has counted of a guest's misbehaviour so far:
// the numbers --result-json calls unmapped_accesses, unknown_smccc_calls,
// psci_rejected and virtio_problems, for the metrics endpoint.
type guestProblems struct {
	unmapped, unknownSMCCC, virtio uint64
	psciRejected                   []runsummary.PSCIRejection
}

// families returns g as Prometheus counters. The rejected PSCI calls are
// labelled by function and result; both label sets are bounded (see
// psciRejects).
func (g guestProblems) families() []metrics.Family {
	one := func(name, help string, v uint64) metrics.Family {
		return metrics.Family{Name: name, Help: help, Kind: metrics.Counter, Series: []metrics.Series{{Value: float64(v)}}}
	}
	rejected := metrics.Family{Name: "mvm_guest_psci_rejected_calls_total", Kind: metrics.Counter,
		Help: "PSCI calls mvm refused for their arguments (INVALID_PARAMETERS, INVALID_ADDRESS), by function and result (user PSCI only)."}
	for _, r := range g.psciRejected {
		rejected.Series = append(rejected.Series, metrics.Series{Value: float64(r.Count),
			Labels: []metrics.Label{{Name: "function", Value: r.Function}, {Name: "result", Value: r.Result}}})
	}
	return []metrics.Family{
		one("mvm_guest_unmapped_accesses_total", "Guest MMIO accesses to addresses with no device (reads return 0).", g.unmapped),
		one("mvm_guest_unknown_smccc_calls_total", "SMCCC calls forwarded to mvm that it does not implement (answered NOT_SUPPORTED).", g.unknownSMCCC),
		rejected,
		one("mvm_guest_virtio_problems_total", "Driver errors the virtio devices saw (each kind logged once).", g.virtio),
	}
}
