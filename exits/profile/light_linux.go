//go:build linux

package profile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/mvm-dev/mvm/exits"
	"github.com/mvm-dev/mvm/exits/bpfagg"
	"github.com/mvm-dev/mvm/exits/kvmstat"
	"github.com/mvm-dev/mvm/exits/sampling"
	"github.com/mvm-dev/mvm/exits/source"
)

// The light profile (Config.Light, mvm run --profile=light): the stats
// fd's exact counts, and the rest of the per-reason table estimated from
// windows in which the BPF programs are attached (exits/sampling). The
// programs are loaded once, with no breakdown (counts and times per
// reason: the cheapest programs), and attached only for the windows.

// knownStats are the stats fd counters that count a tracepoint reason
// exactly (arch/arm64/kvm/handle_exit.c: kvm_handle_wfx counts wfe/wfi,
// handle_hvc hvc_exit_stat), per reason name of exits.Namer on arm64.
var knownStats = []struct {
	reason string
	stats  []string
}{
	{"WFx", []string{"wfi_exit_stat", "wfe_exit_stat"}},
	{"HVC64", []string{"hvc_exit_stat"}},
}

// sampler runs the windows and keeps their numbers.
type sampler struct {
	p     *Profile
	sched sampling.Schedule
	est   sampling.Estimator
	// times: every window's numbers summed, per vCPU and reason.
	times map[int]map[string]exits.ReasonStats
	// prevB is the maps after the last window was cleared; open is the
	// last window's numbers, whose stratum is still running, and
	// openExact the stats at its start (per vCPU file).
	prevB     []exits.VCPUStats
	open      []exits.VCPUStats
	openExact []*kvmstat.StatsSnapshot
	hasOpen   bool
	sampled   uint64
	windows   int
	attached  time.Duration
	switching time.Duration
	// attachT, detachT: the Reattach and Detach calls alone, parts of
	// switching (the rest reads the stats fds and the maps).
	attachT, detachT time.Duration
	start            time.Time
	err              error
}

// exitsOf is the exact counts of a stratum per vCPU: all exits, and the
// known reasons'.
func exitsOf(before, after []*kvmstat.StatsSnapshot) ([]uint64, []map[string]uint64, error) {
	var all []uint64
	var known []map[string]uint64
	for i := range after {
		v := func(name string) (uint64, error) {
			a, ok := after[i].Value(name)
			if !ok {
				return 0, fmt.Errorf("the stats fd of vCPU %d has no %q", i, name)
			}
			b, _ := before[i].Value(name)
			if a < b {
				return 0, nil
			}
			return a - b, nil
		}
		n, err := v("exits")
		if err != nil {
			return nil, nil, err
		}
		all = append(all, n)
		k := map[string]uint64{}
		for _, ks := range knownStats {
			var sum uint64
			have := true
			for _, st := range ks.stats {
				x, err := v(st)
				if err != nil {
					have = false
					break
				}
				sum += x
			}
			if have {
				k[ks.reason] = sum
			}
		}
		known = append(known, k)
	}
	return all, known, nil
}

// cpuSnapshots reads the vCPUs' stats files (nil on error).
func (p *Profile) cpuSnapshots() []*kvmstat.StatsSnapshot {
	out := make([]*kvmstat.StatsSnapshot, 0, len(p.cpuStats))
	for _, f := range p.cpuStats {
		s, err := f.Snapshot()
		if err != nil {
			return nil
		}
		out = append(out, s)
	}
	return out
}

// run attaches and detaches the programs until ctx ends.
func (s *sampler) run(ctx context.Context) {
	s.start = time.Now()
	for {
		if !s.window(ctx) {
			return
		}
		// The running stratum's exact exits are not known until it
		// closes, so the density the schedule sees lags one window.
		gap := s.sched.Gap(s.est.Sampled(), s.est.Exact(), s.attached, time.Since(s.start))
		select {
		case <-ctx.Done():
			return
		case <-time.After(gap):
		}
	}
}

// window closes the running stratum, opens a window and waits it out
// (shorter when ctx ends); false when sampling must stop.
func (s *sampler) window(ctx context.Context) bool {
	p := s.p
	t0 := time.Now()
	snaps := p.cpuSnapshots()
	if snaps == nil {
		s.err = errors.New("reading the vCPUs' KVM stats fds failed")
		return false
	}
	if err := s.closeStratum(snaps); err != nil {
		s.err = err
		return false
	}
	// The window's stratum starts here; the first one where the profile
	// took its baseline, so that the strata cover what the stats rows do.
	start := snaps
	if s.windows == 0 && len(p.before) == 1+len(snaps) {
		start = p.before[1:]
	}
	ta := time.Now()
	if err := p.bpf.Reattach(); err != nil {
		s.err = err
		return false
	}
	t1 := time.Now()
	s.attachT += t1.Sub(ta)
	s.switching += t1.Sub(t0)
	stopped := false
	select {
	case <-ctx.Done():
		stopped = true
	case <-time.After(s.sched.Window):
	}
	t2 := time.Now()
	s.attached += t2.Sub(t1)
	s.windows++
	if err := s.closeWindow(start); err != nil {
		s.err = err
		return false
	}
	s.switching += time.Since(t2)
	return !stopped
}

// closeWindow detaches the programs and takes the window's numbers: the
// maps as the window left them, less the maps after the previous window
// was cleared; then clears the pending pairings.
func (s *sampler) closeWindow(startExact []*kvmstat.StatsSnapshot) error {
	c := s.p.bpf
	td := time.Now()
	if err := c.Detach(); err != nil {
		return fmt.Errorf("detach the BPF programs: %w", err)
	}
	s.detachT += time.Since(td)
	a, err := c.Snapshot(s.p.vcpuOf)
	if err != nil {
		return err
	}
	if err := c.ClearPending(); err != nil {
		return err
	}
	b, err := c.Snapshot(s.p.vcpuOf)
	if err != nil {
		return err
	}
	w := sampling.Delta(a.VCPUs, s.prevB)
	s.prevB = b.VCPUs
	for _, v := range w {
		m := s.times[v.VCPU]
		if m == nil {
			m = map[string]exits.ReasonStats{}
			s.times[v.VCPU] = m
		}
		for _, r := range v.Reasons {
			s.sampled += r.Count
			t := m[r.Reason]
			t.Reason = r.Reason
			t.Merge(&r)
			m[r.Reason] = t
		}
	}
	s.open, s.openExact, s.hasOpen = w, startExact, true
	return nil
}

// closeStratum adds the running stratum (the last window and what the
// stats counted from its start to now) to the estimate.
func (s *sampler) closeStratum(now []*kvmstat.StatsSnapshot) error {
	if !s.hasOpen {
		return nil
	}
	all, known, err := exitsOf(s.openExact, now)
	if err != nil {
		return err
	}
	s.est.Add(all, known, s.open)
	s.hasOpen = false
	return nil
}

// timesList is the windows' summed numbers in the model's form.
func (s *sampler) timesList() []exits.VCPUStats {
	var out []exits.VCPUStats
	for v, m := range s.times {
		vs := exits.VCPUStats{VCPU: v}
		for _, r := range m {
			vs.Reasons = append(vs.Reasons, r)
		}
		out = append(out, vs)
	}
	return out
}

// openLight loads the BPF programs for the light profile, detached.
func (p *Profile) openLight() {
	if p.statsErr != nil {
		p.traceErr = fmt.Errorf("--profile=light scales its samples by the KVM stats fd, which is unavailable: %w", p.statsErr)
		return
	}
	c, err := source.OpenBPF(bpfagg.Config{TGID: os.Getpid(), NoBreakdown: true, TIDs: p.cfg.TIDs}, p.log)
	if err != nil {
		p.traceErr = fmt.Errorf("--profile=light samples with BPF programs, which the kernel refused: %w", err)
		return
	}
	if !c.Raw() {
		// Perf tracepoint programs reattach through perf_event_open,
		// which mvm's seccomp filter refuses once the VM runs
		// (docs/seccomp.md); raw tracepoints need one bpf(2) command.
		c.Close()
		p.traceErr = errors.New("--profile=light needs raw tracepoint BPF programs, which this kernel refused: " + c.Describe())
		return
	}
	if err := c.Detach(); err != nil {
		c.Close()
		p.traceErr = fmt.Errorf("detach the BPF programs: %w", err)
		return
	}
	p.bpf = c
	p.light = &sampler{p: p, sched: sampling.DefaultSchedule(), times: map[int]map[string]exits.ReasonStats{}}
}

// startLight starts the windows.
func (p *Profile) startLight() {
	ctx, cancel := context.WithCancel(context.Background())
	p.traceStop, p.traceDone = cancel, make(chan struct{})
	go func() {
		defer close(p.traceDone)
		p.light.run(ctx)
	}()
}

// finishLight stops the windows and adds the estimated rows to rep.
func (p *Profile) finishLight(rep *exits.Report) {
	s := p.light
	if p.traceStop != nil {
		p.traceStop()
		<-p.traceDone
	}
	if s.err == nil {
		if snaps := p.cpuSnapshots(); snaps == nil {
			s.err = errors.New("reading the vCPUs' KVM stats fds at the end failed")
		} else {
			s.err = s.closeStratum(snaps)
		}
	}
	if s.err != nil {
		rep.SetSource(exits.SourceTracepoint, "", fmt.Errorf("--profile=light: %w", s.err))
		return
	}
	n := len(rep.Rows)
	rep.AddTrace(p.bpf.Namer(), s.est.Result(s.timesList()), nil)
	for i := n; i < len(rep.Rows); i++ {
		rep.Rows[i].Estimate = exits.EstimateCountTimes
		if s.est.Known(rep.Rows[i].Reason) {
			rep.Rows[i].Estimate = exits.EstimateTimes
		}
	}
	exact := s.est.Exact()
	rep.Sampling = &exits.Sampling{Windows: s.windows, AttachedNS: uint64(s.attached), SwitchNS: uint64(s.switching),
		AttachNS: uint64(s.attachT), DetachNS: uint64(s.detachT),
		SampledExits: s.sampled, ExactExits: exact, Target: s.sched.Target}
	share := 0.0
	if exact > 0 {
		share = 100 * float64(s.sampled) / float64(exact)
	}
	rep.SetSource(exits.SourceTracepoint, fmt.Sprintf("estimated: %d windows of BPF programs on kvm:kvm_exit and kvm:kvm_entry (raw tracepoints: %v), attached %s of the run, saw %d of the %d exits (%.1f%%); counts scaled by the KVM stats fd's exits per vCPU and window (WFx and HVC64 counts exact, from it), times the windows' means weighted by stratum",
		s.windows, p.bpf.Raw(), kvmstat.FormatDuration(uint64(s.attached)), s.sampled, exact, share), nil)
}
