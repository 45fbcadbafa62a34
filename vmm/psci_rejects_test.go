package vmm

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/mvm-dev/mvm/exits/metrics"
	"github.com/mvm-dev/mvm/psci"
	"github.com/mvm-dev/mvm/runsummary"
)

// Refused PSCI calls are counted by function (SMC32 and SMC64 IDs alike)
// and result, the first of each key says "log me", many vCPUs counting at
// once lose nothing, and the counts reach the result JSON and the metrics
// endpoint's text (parsed by Prometheus' own parser) with the same numbers.
func TestPSCIRejectsCounted(t *testing.T) {
	p := newPSCIRejects()
	var wg sync.WaitGroup
	var firsts sync.Map
	for cpu := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				fid := psci.FnCPUOn64
				if i%2 == 1 {
					fid = psci.FnCPUOn // SMC32: the same function
				}
				if p.add(fid, psci.InvalidAddress) {
					firsts.Store("addr", cpu)
				}
				if i < 10 && p.add(psci.FnAffinityInfo64, psci.InvalidParameters) {
					firsts.Store("aff", cpu)
				}
			}
		}()
	}
	wg.Wait()
	if p.add(psci.FnCPUOn, psci.InvalidParameters) != true || p.add(psci.FnCPUOn64, psci.InvalidParameters) != false {
		t.Errorf("the first CPU_ON/INVALID_PARAMETERS is not the only one to log")
	}
	n := 0
	firsts.Range(func(any, any) bool { n++; return true })
	if n != 2 {
		t.Errorf("%d keys logged, want 2", n)
	}
	want := []runsummary.PSCIRejection{
		{Function: "AFFINITY_INFO", Result: "INVALID_PARAMETERS", Count: 80},
		{Function: "CPU_ON", Result: "INVALID_ADDRESS", Count: 800},
		{Function: "CPU_ON", Result: "INVALID_PARAMETERS", Count: 2},
	}
	got := p.counts()
	if !slices.Equal(got, want) {
		t.Fatalf("counts %+v, want %+v", got, want)
	}

	s := Result{PSCIRejected: got}.Summary()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Total uint64                     `json:"psci_rejected_calls"`
		By    []runsummary.PSCIRejection `json:"psci_rejected"`
	}
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Total != 882 || !slices.Equal(back.By, want) {
		t.Errorf("result JSON: psci_rejected_calls %d, psci_rejected %+v; want 882, %+v", back.Total, back.By, want)
	}

	var text strings.Builder
	g := guestProblems{unmapped: 512, unknownSMCCC: 40, virtio: 3, psciRejected: got}
	if err := metrics.WriteText(&text, metrics.SourceFunc(g.families)); err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(text.String()))
	if err != nil {
		t.Fatalf("exposition: %v\n%s", err, text.String())
	}
	value := func(name string, labels map[string]string) float64 {
		f, ok := fams[name]
		if !ok {
			t.Errorf("no family %s", name)
			return -1
		}
	series:
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if labels[l.GetName()] != l.GetValue() {
					continue series
				}
			}
			if len(m.Label) == len(labels) {
				return m.GetCounter().GetValue()
			}
		}
		t.Errorf("%s%v: no such series", name, labels)
		return -1
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"mvm_guest_unmapped_accesses_total", nil, 512},
		{"mvm_guest_unknown_smccc_calls_total", nil, 40},
		{"mvm_guest_virtio_problems_total", nil, 3},
		{"mvm_guest_psci_rejected_calls_total", map[string]string{"function": "CPU_ON", "result": "INVALID_ADDRESS"}, 800},
		{"mvm_guest_psci_rejected_calls_total", map[string]string{"function": "CPU_ON", "result": "INVALID_PARAMETERS"}, 2},
		{"mvm_guest_psci_rejected_calls_total", map[string]string{"function": "AFFINITY_INFO", "result": "INVALID_PARAMETERS"}, 80},
	} {
		if got := value(c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}
