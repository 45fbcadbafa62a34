//go:build linux && arm64

package integration

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mvm-dev/mvm/exits"
	"github.com/mvm-dev/mvm/exits/symbols"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// profileJSON is the part of mvm's profile report the tests read, from
// mvm run --profile and from mvm profile on another VMM alike.
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
	// Lost is the tracepoint records the kernel dropped.
	Lost uint64 `json:"tracepoint_lost"`
}

func readProfile(t *testing.T, path string) profileJSON {
	t.Helper()
	return readJSON[profileJSON](t, path)
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
//
// The same boot checks the guest-code view with the kernel's vmlinux ELF
// as --guest-symbols (from its Debian -dbg package, lab/fetch-symbols.sh:
// link addresses, so mvm must find the boot's KASLR offset from VBAR_EL1
// and the ELF's `vectors`): every function the report names exists in
// that kernel's System.map, and the WFI exits come from the idle loop.
// TestProfileUserspaceWithoutMarker does the same with a /proc/kallsyms
// dump.
func TestProfileSourcesAgree(t *testing.T) {
	out := filepath.Join(t.TempDir(), "profile.json")
	r := mvm(t, 4*time.Minute, "run", "--kernel", env(t, "MVM_LINUX"), "--initrd", testInitrd(t),
		"--cpus", "4", "--append", "quiet "+noCryptoTests, "--console", "none",
		"--profile", "--profile-format", "json", "--profile-out", out, "--guest-symbols", env(t, "MVM_LINUX_VMLINUX"))
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
			t.Errorf("vCPU %d: tracepoint exits %d != stats exits %d (records lost %d, exits on no vCPU %d)", v, ta, all, p.Lost, p.sum("tracepoint", "-1"))
		}
		if ta == 0 {
			t.Errorf("vCPU %d: no exits at all", v)
		}
	}
	// Every secondary came up through exactly one CPU_ON serviced by mvm.
	if n := p.count("userspace", "total", "HYPERCALL/CPU_ON"); n != 3 {
		t.Errorf("userspace CPU_ON calls %d, want 3", n)
	}
	rep := readReport(t, out)
	checkLinuxBreakdown(t, rep)
	checkGuestCode(t, rep, env(t, "MVM_LINUX_SYSTEM_MAP"), true)
	// The MMU-off cache clean before the first CPU_ON reads CTR_EL0 once
	// per cache line (docs/profile.md's 4-vCPU table).
	checkTopFunction(t, rep, "SYS64", "__pi_caches_clean_inval_pou", "caches_clean_inval_pou")
	if u := rep.Userspace; u == nil || u.Source != "marker" || u.FirstUserExitNS < 0 || u.FirstUserExitNS > u.AtNS {
		// The marker is a store by init (devmem), itself an exit from a
		// user address, so the first user exit comes no later.
		t.Errorf("userspace start %+v, want the marker, with a first user exit at or before it", u)
	}
}

// readReport decodes mvm's profile JSON as the exported report type.
func readReport(t testing.TB, path string) *exits.Report {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rep, err := exits.ReadJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// labKallsyms copies this (lab) kernel's /proc/kallsyms, with real
// addresses (root and kernel.kptr_restrict=0), into a file.
func labKallsyms(t *testing.T) string {
	t.Helper()
	if err := os.WriteFile("/proc/sys/kernel/kptr_restrict", []byte("0\n"), 0o644); err != nil {
		t.Logf("kptr_restrict: %v", err)
	}
	data, err := os.ReadFile("/proc/kallsyms")
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(string(data), "0000000000000000") {
		t.Fatal("/proc/kallsyms shows no addresses (not root, or kptr_restrict)")
	}
	p := filepath.Join(t.TempDir(), "kallsyms")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// checkLinuxBreakdown: every broken-down reason of a Linux boot adds up,
// and the rows a Linux guest must have are there.
func checkLinuxBreakdown(t *testing.T, rep *exits.Report) {
	t.Helper()
	keys := map[string]map[string]uint64{}
	for _, row := range rep.RowsOf(exits.SourceTracepoint, exits.TotalVCPU) {
		if len(row.Breakdown) == 0 {
			continue
		}
		var n uint64
		m := map[string]uint64{}
		var top []string
		for _, b := range row.Breakdown {
			n += b.Samples
			m[b.Key] = b.Samples
			if len(top) < 6 {
				top = append(top, fmt.Sprintf("%s %d", b.Key, b.Samples))
			}
		}
		keys[row.Reason] = m
		t.Logf("%s %d: %s", row.Reason, row.Count, strings.Join(top, ", "))
		if n != row.Count {
			t.Errorf("%s: breakdown adds up to %d, the reason has %d", row.Reason, n, row.Count)
		}
	}
	// Linux brings up secondaries with PSCI CPU_ON, idles in WFI and
	// sends IPIs through ICC_SGI1R_EL1; its GIC driver programs the
	// distributor and the redistributors.
	for _, c := range []struct{ reason, key string }{
		{"HVC64", "CPU_ON"}, {"WFx", "WFI"}, {"SYS64", "ICC_SGI1R_EL1 write"}, {"DABT_LOW", "gicd"}, {"DABT_LOW", "gicr"},
	} {
		if keys[c.reason][c.key] == 0 {
			t.Errorf("%s has no %q row: %v", c.reason, c.key, keys[c.reason])
		}
	}
	if n := keys["HVC64"]["CPU_ON"]; n != 3 {
		t.Errorf("HVC64 CPU_ON %d, want 3", n)
	}
	var phases []string
	for _, ph := range rep.ByPhase {
		phases = append(phases, ph.Phase)
	}
	if want := "boot_to_smp secondaries kernel_to_user after_userspace"; strings.Join(phases, " ") != want {
		t.Errorf("phases %v, want %s", phases, want)
	}
}

// checkGuestCode: the functions the report names are in the symbol file
// syms. linkAddrs: mvm was given a file with the kernel's link addresses
// (vmlinux), so the KASLR offset it found is the boot's own, which on
// arm64 only ever moves the kernel up.
func checkGuestCode(t *testing.T, rep *exits.Report, syms string, linkAddrs bool) {
	t.Helper()
	g := rep.GuestCode
	if g == nil || len(g.Reasons) == 0 {
		t.Fatal("no guest_code in the report")
	}
	if g.KASLROffset == "" || g.Note != "" {
		t.Errorf("KASLR offset %q (%s), note %q", g.KASLROffset, g.KASLRFrom, g.Note)
	}
	if linkAddrs && strings.HasPrefix(g.KASLROffset, "-") {
		t.Errorf("KASLR offset %s from a vmlinux's link addresses is negative", g.KASLROffset)
	}
	t.Logf("symbols %s, KASLR offset %s (%s)", g.Symbols, g.KASLROffset, g.KASLRFrom)
	tab, err := symbols.Open(syms)
	if err != nil {
		t.Fatal(err)
	}
	for _, gr := range g.Reasons {
		var names []string
		for _, f := range gr.Functions {
			names = append(names, fmt.Sprintf("%s %d", f.Function, f.Samples))
			if f.Function == symbols.UserCode || f.Function == symbols.NoSymbol {
				continue
			}
			if !tab.Has(f.Function) {
				t.Errorf("%s: function %q is not in the kernel's symbol table", gr.Reason, f.Function)
			}
		}
		t.Logf("guest code %s: %s", gr.Reason, strings.Join(names, ", "))
		if gr.Reason == "WFx" && (len(gr.Functions) == 0 || !strings.Contains(gr.Functions[0].Function, "idle")) {
			t.Errorf("WFx exits do not come from the idle loop: %+v", gr.Functions)
		}
	}
}

// checkTopFunction: the guest function most of reason's exits came from
// is one of want (aliases: symbols at one address, of which mvm names one).
func checkTopFunction(t *testing.T, rep *exits.Report, reason string, want ...string) {
	t.Helper()
	for _, gr := range rep.GuestCode.Reasons {
		if gr.Reason == reason {
			if len(gr.Functions) == 0 || !slices.Contains(want, gr.Functions[0].Function) {
				t.Errorf("%s exits' top function: %+v, want %s", reason, gr.Functions, strings.Join(want, " or "))
			}
			return
		}
	}
	t.Errorf("no guest code for %s", reason)
}

// TestProfileUserspaceWithoutMarker boots Linux whose init writes no boot
// marker (as an ordinary initramfs): kernel_to_user still ends, at the
// first exit from a user address, and the result says so.
//
// The same boot checks --guest-symbols with a /proc/kallsyms dump: the lab
// kernel's own (the nested guest boots the same Image at another KASLR
// offset, found from VBAR_EL1 and the dump's `vectors`).
func TestProfileUserspaceWithoutMarker(t *testing.T) {
	dir := t.TempDir()
	out, res := filepath.Join(dir, "profile.json"), filepath.Join(dir, "result.json")
	syms := labKallsyms(t)
	r := mvm(t, 4*time.Minute, "run", "--kernel", env(t, "MVM_LINUX"), "--initrd", testInitrd(t),
		"--cpus", "1", "--append", "quiet mvm.nomarker=1", "--console", "none",
		"--profile", "--profile-format", "json", "--profile-out", out, "--result-json", res, "--guest-symbols", syms)
	if r.code != 0 {
		t.Fatalf("exit status %d\nstderr:\n%s", r.code, r.stderr)
	}
	rep := readReport(t, out)
	checkGuestCode(t, rep, syms, false)
	checkTopFunction(t, rep, "SYS64", "__pi_caches_clean_inval_pou", "caches_clean_inval_pou")
	if u := rep.Userspace; u == nil || u.Source != "first_user_exit" || u.AtNS <= 0 || u.AtNS != u.FirstUserExitNS {
		t.Errorf("userspace start %+v, want the first user exit", u)
	}
	sum := readJSON[struct {
		PhasesNS      map[string]int64 `json:"phases_ns"`
		UserspaceFrom string           `json:"userspace_from"`
		Marks         []struct {
			Code int `json:"code"`
		} `json:"marks"`
	}](t, res)
	if len(sum.Marks) != 0 {
		t.Errorf("the guest wrote markers %+v", sum.Marks)
	}
	k2u, ok := sum.PhasesNS["kernel_to_user"]
	if !ok || k2u <= 0 || k2u >= sum.PhasesNS["total"] || sum.UserspaceFrom != "first_user_exit" {
		t.Errorf("kernel_to_user %d (present %v) of total %d, from %q", k2u, ok, sum.PhasesNS["total"], sum.UserspaceFrom)
	}
	t.Logf("kernel_to_user %.3fs from the first user exit, total %.3fs", float64(k2u)/1e9, float64(sum.PhasesNS["total"])/1e9)
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
	var lastText []byte
	protoScrapes := 0
	procName, threads := "", map[string]bool{}
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
		if fams, text, err := scrape("http://" + addr + "/metrics"); err == nil {
			scrapes = append(scrapes, fams)
			lastText = text
			// promhttp's content negotiation: the same endpoint in
			// gzip'd protobuf for a scraper that asks for it.
			if protoScrapes == 0 {
				if pf, err := scrapeProto("http://" + addr + "/metrics"); err == nil {
					if f := pf["mvm_exits_total"]; f == nil || f.GetType() != dto.MetricType_COUNTER {
						t.Errorf("protobuf scrape without the mvm_exits_total counter: %v", pf)
					}
					protoScrapes++
				}
			}
		}
		procName, threads = procNames(cmd.Process.Pid, procName, threads)
	}
	if len(scrapes) < 2 {
		t.Fatalf("only %d successful scrapes during the boot", len(scrapes))
	}
	if protoScrapes == 0 {
		t.Errorf("no successful gzip'd protobuf scrape")
	}
	// The last scrape goes back to the host, where make report-test lints
	// it with promtool (exits/metrics TestPromtoolLiveScrape).
	if dir := os.Getenv("MVM_LAB_OUT"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, "metrics-during-boot.txt"), lastText, 0o644); err != nil {
			t.Errorf("saving the scrape: %v", err)
		}
	}
	// The process keeps its name (a vCPU goroutine never takes the main
	// thread, whose name is the process's) and each vCPU thread has its.
	if procName != "mvm" {
		t.Errorf("/proc/PID/comm during the run = %q, want mvm", procName)
	}
	for k := 0; k < 4; k++ {
		if name := fmt.Sprintf("mvm-vcpu-%d", k); !threads[name] {
			t.Errorf("no thread named %s among %v", name, threads)
		}
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
	// KVM stats as families of their own kind and unit.
	if f, ok := last["mvm_kvm_exits_total"]; !ok || f.GetType() != dto.MetricType_COUNTER {
		t.Errorf("no mvm_kvm_exits_total counter in the metrics")
	}
	if f, ok := last["mvm_kvm_halt_wait_seconds_total"]; !ok || f.GetType() != dto.MetricType_COUNTER {
		t.Errorf("no mvm_kvm_halt_wait_seconds_total counter in the metrics")
	}
	// The breakdown: the secondaries came up long before the last scrape.
	if n := sumMetric(last, "mvm_exit_breakdown_total", map[string]string{"reason": "HVC64", "key": "CPU_ON"}); n != 3 {
		t.Errorf("mvm_exit_breakdown_total{reason=HVC64,key=CPU_ON} = %v, want 3", n)
	}
}

// scrape is one scrape in the text format, parsed, and its text.
func scrape(url string) (map[string]*dto.MetricFamily, []byte, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, nil, fmt.Errorf("status %s", resp.Status)
	}
	text, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, err
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(text))
	return fams, text, err
}

// scrapeProto is one scrape asking for delimited protobuf with gzip, as
// Prometheus itself can; the reply must come in both.
func scrapeProto(url string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeProtoDelim)))
	// Set by hand, so the client leaves the body compressed.
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "gzip" {
		return nil, fmt.Errorf("status %s, Content-Encoding %q", resp.Status, resp.Header.Get("Content-Encoding"))
	}
	if f := expfmt.ResponseFormat(resp.Header); f.FormatType() != expfmt.TypeProtoDelim {
		return nil, fmt.Errorf("asked for protobuf, got %q", resp.Header.Get("Content-Type"))
	}
	zr, err := gzip.NewReader(resp.Body)
	if err != nil {
		return nil, err
	}
	dec := expfmt.NewDecoder(zr, expfmt.ResponseFormat(resp.Header))
	fams := map[string]*dto.MetricFamily{}
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); err == io.EOF {
			return fams, nil
		} else if err != nil {
			return nil, err
		}
		fams[mf.GetName()] = &mf
	}
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

// procNames adds what /proc says of process pid now to what was seen
// before: its name (the first one other than "mvm" sticks, so one wrong
// reading is kept) and the names of its threads.
func procNames(pid int, name string, threads map[string]bool) (string, map[string]bool) {
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil && (name == "" || name == "mvm") {
		name = strings.TrimSpace(string(b))
	}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/comm", pid))
	for _, f := range tasks {
		if b, err := os.ReadFile(f); err == nil {
			threads[strings.TrimSpace(string(b))] = true
		}
	}
	return name, threads
}

// TestProfileMetrics: mvm profile --metrics-addr serves the same endpoint
// (promhttp) for a VMM it profiles, here another mvm booting Linux on 2
// vCPUs: the tracepoint exit counters appear and rise, and a scraper
// asking for OpenMetrics gets it.
func TestProfileMetrics(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	bin := env(t, "MVM_BIN")
	cmd := exec.Command(bin, "profile", "--metrics-addr", addr, "--format", "json", "--out", filepath.Join(t.TempDir(), "profile.json"), "--",
		bin, "run", "--kernel", env(t, "MVM_LINUX"), "--initrd", testInitrd(t), "--cpus", "2", "--append", "quiet", "--console", "none")
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var totals []float64
	openMetrics := false
	deadline := time.After(4 * time.Minute)
loop:
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("mvm profile: %v\n%s", err, errb.String())
			}
			break loop
		case <-deadline:
			cmd.Process.Kill()
			t.Fatal("the profiled guest did not finish in 4 minutes")
		case <-time.After(500 * time.Millisecond):
		}
		fams, _, err := scrape("http://" + addr + "/metrics")
		if err != nil {
			continue
		}
		if n := sumMetric(fams, "mvm_exits_total", map[string]string{"source": "tracepoint"}); n > 0 {
			totals = append(totals, n)
			// Once the exit counters exist, the same in OpenMetrics.
			if !openMetrics {
				openMetrics = scrapeOpenMetrics(t, "http://"+addr+"/metrics")
			}
		}
	}
	t.Logf("%d scrapes with tracepoint exits: %v", len(totals), totals)
	if len(totals) < 2 {
		t.Fatalf("only %d scrapes with tracepoint exits\n%s", len(totals), errb.String())
	}
	if !(totals[len(totals)-1] > totals[0]) {
		t.Errorf("tracepoint exit counter did not rise: %v", totals)
	}
	if !openMetrics {
		t.Errorf("no OpenMetrics scrape")
	}
}

// scrapeOpenMetrics asks for OpenMetrics; false if the endpoint did not
// answer, an error if it answered with something else.
func scrapeOpenMetrics(t *testing.T, url string) bool {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return false
	}
	ct := resp.Header.Get("Content-Type")
	if resp.StatusCode != 200 || !strings.HasPrefix(ct, "application/openmetrics-text; version=1.0.0") ||
		!strings.HasSuffix(string(body), "# EOF\n") || !strings.Contains(string(body), "# TYPE mvm_exits counter\n") {
		t.Errorf("OpenMetrics scrape: %s %q\n%s", resp.Status, ct, body)
	}
	return true
}
