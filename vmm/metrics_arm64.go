//go:build linux && arm64

package vmm

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/mvm-dev/mvm/exits/metrics"
)

// metricsServer serves the VM's Prometheus metrics while it runs.
type metricsServer struct {
	ln   net.Listener
	srv  *http.Server
	once sync.Once
}

// newMetricsServer binds addr now, so a bad or busy address is reported
// before the guest starts; serving starts with start().
func newMetricsServer(addr string, m *VM) (*metricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr %s: %w", addr, err)
	}
	cc := metrics.CollectorConfig{Recorders: m.prof.rec, KVMStats: m.prof.liveStats}
	if t := m.prof.trace(); t != nil {
		cc.Trace = t
	}
	col := metrics.NewCollector(cc)
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics.Handler(m.log, col, timelineSource{m}, metrics.SourceFunc(func() []metrics.Family { return m.guestProblems().families() })))
	return &metricsServer{ln: ln, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}}, nil
}

// Addr is the bound address (useful with port 0).
func (s *metricsServer) Addr() string { return s.ln.Addr().String() }

// start serves until stop; Serve's error then is always the closed
// listener's, so it is not reported.
func (s *metricsServer) start() {
	go s.srv.Serve(s.ln)
}

func (s *metricsServer) stop() {
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		s.srv.Shutdown(ctx)
		s.ln.Close()
	})
}

// timelineSource exports the bring-up timeline, in seconds since the VMM
// started: when mvm serviced each secondary's CPU_ON and when that vCPU
// first entered the guest, plus the boot phases measured so far.
type timelineSource struct{ m *VM }

func (c timelineSource) Families() []metrics.Family {
	m := c.m
	m.mu.Lock()
	t := m.timeline
	t.CPUs = append([]CPUTimeline(nil), m.timeline.CPUs...)
	m.mu.Unlock()
	t.Start = m.cfg.Start
	t.ConsoleMarks = m.watcher.marks()
	cpuOn := metrics.Family{Name: "mvm_vcpu_cpu_on_seconds", Kind: metrics.Gauge,
		Help: "When mvm serviced the PSCI CPU_ON for this vCPU, seconds since the VMM started (user PSCI only)."}
	entered := metrics.Family{Name: "mvm_vcpu_first_entry_seconds", Kind: metrics.Gauge,
		Help: "When this vCPU first entered the guest after its power-on, seconds since the VMM started."}
	phases := metrics.Family{Name: "mvm_boot_phase_seconds", Kind: metrics.Gauge,
		Help: "Boot phases observed so far (docs/boot-phases.md)."}
	for i, cpu := range t.CPUs {
		id := []metrics.Label{{Name: "vcpu", Value: strconv.Itoa(i)}}
		if !cpu.CPUOn.IsZero() {
			cpuOn.Series = append(cpuOn.Series, metrics.Series{Labels: id, Value: cpu.CPUOn.Sub(t.Start).Seconds()})
		}
		if !cpu.Entered.IsZero() {
			entered.Series = append(entered.Series, metrics.Series{Labels: id, Value: cpu.Entered.Sub(t.Start).Seconds()})
		}
	}
	for name, d := range t.Phases() {
		phases.Series = append(phases.Series, metrics.Series{Labels: []metrics.Label{{Name: "phase", Value: name}}, Value: d.Seconds()})
	}
	return []metrics.Family{cpuOn, entered, phases}
}
