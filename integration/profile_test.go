//go:build linux && arm64

package integration

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// profileJSON is the part of mvm's profile report the tests read.
type profileJSON struct {
	Sources []struct {
		Name   string `json:"name"`
		Used   bool   `json:"used"`
		Detail string `json:"detail"`
		Reason string `json:"reason"`
	} `json:"sources"`
	Rows []struct {
		Source string `json:"source"`
		VCPU   string `json:"vcpu"`
		Reason string `json:"reason"`
		Count  uint64 `json:"count"`
	} `json:"rows"`
	KVMStats []struct {
		VCPU  string `json:"vcpu"`
		Name  string `json:"name"`
		Delta uint64 `json:"delta"`
	} `json:"kvm_stats"`
}

func readProfile(t *testing.T, path string) profileJSON {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var p profileJSON
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatalf("profile JSON: %v\n%s", err, data)
	}
	return p
}

func (p profileJSON) used(name string) (bool, string) {
	for _, s := range p.Sources {
		if s.Name == name {
			return s.Used, s.Reason
		}
	}
	return false, "not listed"
}

func (p profileJSON) count(source, vcpu, reason string) uint64 {
	for _, r := range p.Rows {
		if r.Source == source && r.VCPU == vcpu && r.Reason == reason {
			return r.Count
		}
	}
	return 0
}

func (p profileJSON) sum(source, vcpu string) uint64 {
	var n uint64
	for _, r := range p.Rows {
		if r.Source == source && r.VCPU == vcpu {
			n += r.Count
		}
	}
	return n
}

func (p profileJSON) stat(vcpu, name string) (uint64, bool) {
	for _, s := range p.KVMStats {
		if s.VCPU == vcpu && s.Name == name {
			return s.Delta, true
		}
	}
	return 0, false
}

// TestProfileSourcesAgree boots Linux on 4 vCPUs with --profile: for every
// vCPU the kvm_exit tracepoint counts of WFx, HVC64 and all exits must
// equal the stats fd's wfi+wfe, hvc_exit_stat and exits. Both count the
// same thing — each return from the guest to KVM — from two independent
// kernel interfaces.
func TestProfileSourcesAgree(t *testing.T) {
	out := filepath.Join(t.TempDir(), "profile.json")
	r := mvm(t, 4*time.Minute, "run", "--kernel", env(t, "MVM_LINUX"), "--initrd", testInitrd(t),
		"--cpus", "4", "--append", "quiet", "--console", "none",
		"--profile", "--profile-format", "json", "--profile-out", out)
	if r.code != 0 {
		t.Fatalf("exit status %d\nstderr:\n%s", r.code, r.stderr)
	}
	p := readProfile(t, out)
	for _, src := range []string{"userspace", "kvm_stats", "tracepoint"} {
		if ok, why := p.used(src); !ok {
			t.Fatalf("source %s not used: %s", src, why)
		}
	}
	for v := 0; v < 4; v++ {
		id := strconv.Itoa(v)
		wfi, _ := p.stat(id, "wfi_exit_stat")
		wfe, _ := p.stat(id, "wfe_exit_stat")
		hvc, _ := p.stat(id, "hvc_exit_stat")
		all, ok := p.stat(id, "exits")
		if !ok {
			t.Fatalf("vCPU %d: no exits stat", v)
		}
		tw, th, ta := p.count("tracepoint", id, "WFx"), p.count("tracepoint", id, "HVC64"), p.sum("tracepoint", id)
		t.Logf("vCPU %d: WFx %d/%d  HVC64 %d/%d  exits %d/%d (tracepoint/stats)", v, tw, wfi+wfe, th, hvc, ta, all)
		if tw != wfi+wfe {
			t.Errorf("vCPU %d: tracepoint WFx %d != wfi_exit_stat+wfe_exit_stat %d", v, tw, wfi+wfe)
		}
		if th != hvc {
			t.Errorf("vCPU %d: tracepoint HVC64 %d != hvc_exit_stat %d", v, th, hvc)
		}
		if ta != all {
			t.Errorf("vCPU %d: tracepoint exits %d != stats exits %d", v, ta, all)
		}
		if ta == 0 {
			t.Errorf("vCPU %d: no exits at all", v)
		}
	}
	// Every secondary came up through exactly one CPU_ON serviced by mvm.
	if n := p.count("userspace", "total", "HYPERCALL/CPU_ON"); n != 3 {
		t.Errorf("userspace CPU_ON calls %d, want 3", n)
	}
}

// TestProfileWithoutTracepointPrivilege: an unprivileged user (who may use
// /dev/kvm but not perf tracepoints) still gets the userspace and stats
// sources, a reason for the missing one, and exit status 0.
func TestProfileWithoutTracepointPrivilege(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("this test must start as root to give an unprivileged user /dev/kvm")
	}
	st, err := os.Stat("/dev/kvm")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod("/dev/kvm", 0o666); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod("/dev/kvm", st.Mode().Perm())
	k := publicCopy(t, payload(t, "hello.bin"))
	out := filepath.Join(filepath.Dir(k), "profile.json")
	r := mvmCmd(t, time.Minute, asNobody, "run", "--kernel", k, "--profile", "--profile-format", "json", "--profile-out", out)
	if r.code != 0 {
		t.Fatalf("exit status %d, want 0\nstderr:\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "hello from the mvm bare-metal payload") {
		t.Errorf("guest output missing: %q", r.stdout)
	}
	p := readProfile(t, out)
	for _, src := range []string{"userspace", "kvm_stats"} {
		if ok, why := p.used(src); !ok {
			t.Errorf("source %s not used: %s", src, why)
		}
	}
	ok, why := p.used("tracepoint")
	if ok {
		t.Errorf("tracepoint source used by an unprivileged user")
	}
	if why == "" {
		t.Errorf("no reason given for the missing tracepoint source")
	}
	t.Logf("tracepoints unavailable: %s", why)
	if p.count("userspace", "total", "MMIO/uart") == 0 {
		t.Errorf("no userspace UART exits counted")
	}
}

// TestMetricsDuringBoot scrapes /metrics while a 4-vCPU Linux guest boots,
// parses it with Prometheus' own text parser, and checks that exit counters
// rise and that the PSCI CPU_ON counter, final once the secondaries are
// up, equals the final report.
func TestMetricsDuringBoot(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	out := filepath.Join(t.TempDir(), "profile.json")
	cmd := exec.Command(env(t, "MVM_BIN"), "run", "--kernel", env(t, "MVM_LINUX"), "--initrd", testInitrd(t),
		"--cpus", "4", "--append", "quiet", "--console", "none", "--metrics-addr", addr,
		"--profile", "--profile-format", "json", "--profile-out", out)
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	var scrapes []map[string]*dto.MetricFamily
	deadline := time.After(4 * time.Minute)
loop:
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("mvm: %v\n%s", err, errb.String())
			}
			break loop
		case <-deadline:
			cmd.Process.Kill()
			t.Fatal("guest did not finish in 4 minutes")
		case <-time.After(500 * time.Millisecond):
		}
		if fams, err := scrape("http://" + addr + "/metrics"); err == nil {
			scrapes = append(scrapes, fams)
		}
	}
	if len(scrapes) < 2 {
		t.Fatalf("only %d successful scrapes during the boot", len(scrapes))
	}
	first, last := scrapes[0], scrapes[len(scrapes)-1]
	total := func(fams map[string]*dto.MetricFamily) float64 {
		return sumMetric(fams, "mvm_exits_total", map[string]string{"source": "userspace"})
	}
	t.Logf("%d scrapes; userspace exits %v -> %v", len(scrapes), total(first), total(last))
	if !(total(last) > total(first)) {
		t.Errorf("userspace exit counter did not rise: %v -> %v", total(first), total(last))
	}
	for i := 1; i < len(scrapes); i++ {
		if total(scrapes[i]) < total(scrapes[i-1]) {
			t.Errorf("counter went down between scrapes %d and %d", i-1, i)
		}
	}
	cpuOn := sumMetric(last, "mvm_psci_calls_total", map[string]string{"function": "CPU_ON"})
	p := readProfile(t, out)
	if want := float64(p.count("userspace", "total", "HYPERCALL/CPU_ON")); cpuOn != want || want != 3 {
		t.Errorf("metrics CPU_ON %v, final report %v, want both 3", cpuOn, want)
	}
	if sumMetric(last, "mvm_vcpu_first_entry_seconds", nil) == 0 {
		t.Errorf("no bring-up timeline in the metrics")
	}
	if _, ok := last["mvm_kvm_stat"]; !ok {
		t.Errorf("no KVM stats in the metrics")
	}
}

func scrape(url string) (map[string]*dto.MetricFamily, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("status %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(resp.Body)
}

// sumMetric adds the values of a family's samples whose labels include want.
func sumMetric(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	f, ok := fams[name]
	if !ok {
		return 0
	}
	var s float64
next:
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if labels[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			s += m.GetCounter().GetValue()
		case m.Gauge != nil:
			s += m.GetGauge().GetValue()
		case m.Untyped != nil:
			s += m.GetUntyped().GetValue()
		}
	}
	return s
}
