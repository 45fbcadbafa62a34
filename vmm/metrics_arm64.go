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

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

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
	reg := prometheus.NewRegistry()
	col := metrics.NewCollector(metrics.CollectorConfig{Recorders: m.prof.rec, KVMStats: m.prof.liveStats, Trace: m.prof.trace()})
	if err := reg.Register(col); err != nil {
		ln.Close()
		return nil, fmt.Errorf("register exit metrics: %w", err)
	}
	if err := reg.Register(metrics.NewStatsCollector(m.prof.liveStats)); err != nil {
		ln.Close()
		return nil, fmt.Errorf("register KVM stats metrics: %w", err)
	}
	if err := reg.Register(newTimelineCollector(m)); err != nil {
		ln.Close()
		return nil, fmt.Errorf("register timeline metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
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

// timelineCollector exports the bring-up timeline, in seconds since the VMM
// started: when mvm serviced each secondary's CPU_ON and when that vCPU
// first entered the guest, plus the boot phases measured so far.
type timelineCollector struct {
	m                                 *VM
	cpuOnDesc, enteredDesc, phaseDesc *prometheus.Desc
}

func newTimelineCollector(m *VM) *timelineCollector {
	return &timelineCollector{
		m: m,
		cpuOnDesc: prometheus.NewDesc("mvm_vcpu_cpu_on_seconds",
			"When mvm serviced the PSCI CPU_ON for this vCPU, seconds since the VMM started (user PSCI only).",
			[]string{"vcpu"}, nil),
		enteredDesc: prometheus.NewDesc("mvm_vcpu_first_entry_seconds",
			"When this vCPU first entered the guest after its power-on, seconds since the VMM started.",
			[]string{"vcpu"}, nil),
		phaseDesc: prometheus.NewDesc("mvm_boot_phase_seconds",
			"Boot phases observed so far (docs/boot-phases.md).",
			[]string{"phase"}, nil),
	}
}

func (c *timelineCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.cpuOnDesc
	ch <- c.enteredDesc
	ch <- c.phaseDesc
}

func (c *timelineCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	m.mu.Lock()
	t := m.timeline
	t.CPUs = append([]CPUTimeline(nil), m.timeline.CPUs...)
	m.mu.Unlock()
	t.Start = m.cfg.Start
	t.ConsoleMarks = m.watcher.marks()
	for i, cpu := range t.CPUs {
		id := strconv.Itoa(i)
		if !cpu.CPUOn.IsZero() {
			ch <- prometheus.MustNewConstMetric(c.cpuOnDesc, prometheus.GaugeValue, cpu.CPUOn.Sub(t.Start).Seconds(), id)
		}
		if !cpu.Entered.IsZero() {
			ch <- prometheus.MustNewConstMetric(c.enteredDesc, prometheus.GaugeValue, cpu.Entered.Sub(t.Start).Seconds(), id)
		}
	}
	for name, d := range t.Phases() {
		ch <- prometheus.MustNewConstMetric(c.phaseDesc, prometheus.GaugeValue, d.Seconds(), name)
	}
}
