//go:build linux

package attach

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mvm-dev/mvm/exits"
	"github.com/mvm-dev/mvm/exits/bpfagg"
	"github.com/mvm-dev/mvm/exits/kvmstat"
	"github.com/mvm-dev/mvm/exits/metrics"
	"github.com/mvm-dev/mvm/exits/source"
	"github.com/mvm-dev/mvm/exits/tracepoint"
	"github.com/mvm-dev/mvm/internal/kvmproc"
)

// Config says what to profile and how.
type Config struct {
	// PID attaches to a running process; Command (argv) starts one
	// instead. Exactly one must be set.
	PID     int
	Command []string
	// Stdin, Stdout and Stderr of the command (nil: mvm's own).
	Stdin          *os.File
	Stdout, Stderr *os.File
	// Env is the command's environment (nil: mvm's own).
	Env []string
	// Sources limits the profile to these sources (exits.SourceKVMStats,
	// exits.SourceTracepoint); empty means all.
	Sources []string
	// Duration ends profiling after this long (0: when the process exits
	// or ctx ends).
	Duration time.Duration
	// Interval is how often Live is called with the report so far (0: a
	// second); Live may be nil.
	Interval time.Duration
	Live     func(*exits.Report)
	// MetricsAddr serves Prometheus metrics on HOST:PORT while profiling.
	MetricsAddr string
	// Logger receives diagnostics (nil: slog.Default()).
	Logger *slog.Logger
	// Tracefs overrides where the tracepoints are read (tests).
	Tracefs string
	// Started, if set, is told the command's PID once it runs (so the
	// caller can forward signals to it).
	Started func(pid int)
	// Via is how tracepoints are read: source.ViaAuto (BPF when the
	// kernel allows it, else perf rings), ViaBPF, ViaPerf, or ViaBoth
	// (perf rows as "tracepoint", BPF counts as "tracepoint_bpf", to
	// cross-check).
	Via string
}

// SourceBPF names the BPF counts in ViaBoth reports.
const SourceBPF = "tracepoint_bpf"

// Result is the outcome of Run.
type Result struct {
	// Report is the profile at the end.
	Report *exits.Report
	// PID is the profiled process; Name its command name.
	PID  int
	Name string
	// Exited says the process ended while profiled; State is how (for a
	// Command; nil for a PID, which mvm cannot reap).
	Exited bool
	State  *os.ProcessState
	// Notes are one-line remarks about what could not be told apart.
	Notes []string
	// waited delivers a command's end when profiling stopped before it.
	waited <-chan error
	cmd    *exec.Cmd
}

// Wait waits for a command that was still running when profiling ended
// (Duration) and returns how it ended; for a PID, or a command that had
// already exited, it returns State at once.
func (r *Result) Wait() *os.ProcessState {
	if r.Exited || r.waited == nil {
		return r.State
	}
	<-r.waited
	r.Exited, r.State = true, r.cmd.ProcessState
	return r.State
}

// ErrBadConfig wraps configuration mistakes.
var ErrBadConfig = errors.New("bad profile configuration")

// Run profiles the process until it exits, cfg.Duration passes or ctx ends.
// Errors that stop it from profiling anything (the process is gone, holds no
// VM, mvm lacks ptrace access) come back as errors wrapping
// kvmproc.ErrGone, kvmproc.ErrNotKVM or a *kvmproc.AccessError; sources that
// cannot be used are reported in the Sources list and in Result.Notes.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if (cfg.PID != 0) == (len(cfg.Command) > 0) {
		return nil, fmt.Errorf("%w: give either a PID or a command", ErrBadConfig)
	}
	for _, s := range cfg.Sources {
		if s != exits.SourceKVMStats && s != exits.SourceTracepoint {
			return nil, fmt.Errorf("%w: unknown source %q (kvm_stats, tracepoint)", ErrBadConfig, s)
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	switch cfg.Via {
	case "":
		cfg.Via = source.ViaAuto
	case source.ViaAuto, source.ViaBPF, source.ViaPerf, source.ViaBoth:
	default:
		return nil, fmt.Errorf("%w: tracepoint path %q (auto, bpf, perf, both)", ErrBadConfig, cfg.Via)
	}
	r := &run{cfg: cfg, log: cfg.Logger, stats: map[int]*statsFile{}}
	defer r.close()
	return r.run(ctx)
}

// run is one profiling session.
type run struct {
	cfg  Config
	log  *slog.Logger
	proc *kvmproc.Process
	cmd  *kvmproc.Started
	// waited receives the command's exit (Command mode).
	waited chan error

	// plan decides between the BPF counters and the perf rings.
	plan     source.Plan
	trace    *tracepoint.Profiler
	traceErr error
	bpf      *bpfagg.Counter
	bpfErr   error
	tidVCPU  map[int]int // vCPU threads found so far
	traceRun chan struct{}
	stopRun  context.CancelFunc

	mu       sync.Mutex
	stats    map[int]*statsFile // vCPU id (-1: the VM) -> file
	statsErr error
	mapped   map[int]bool // TIDs whose vCPU is known
	vcpus    int          // vCPU descriptors seen
	start    time.Time
	notes    []string
}

// statsFile is a copied KVM stats file with its baseline.
type statsFile struct {
	f      *kvmstat.File
	before *kvmstat.StatsSnapshot
	// final is the last snapshot, once taken (finish).
	final *kvmstat.StatsSnapshot
}

var errNotAsked = errors.New("not requested (--sources)")

// ringPages is the size of each tracepoint ring in pages: 4 MiB, four
// times mvm run's, since another VMM's rings are per CPU or per thread of
// the whole process and bursts of sysreg traps (tens of thousands a second
// in the lab) overflowed 1 MiB between drains.
const ringPages = 1024

func (r *run) run(ctx context.Context) (*Result, error) {
	r.tidVCPU = map[int]int{}
	r.plan = source.Plan{Via: r.cfg.Via}
	if !source.Wants(r.cfg.Sources, exits.SourceTracepoint) {
		r.plan.NotAsked, r.traceErr = errNotAsked, errNotAsked
	} else if r.plan.MayReadPerf() {
		// Before the process is known: a command's inherited events are
		// opened before it runs; BPF may replace them (openBPF).
		r.trace, r.traceErr = tracepoint.New(tracepoint.Config{Tracefs: r.cfg.Tracefs, Logger: r.log, RingPages: ringPages})
	}
	if !source.Wants(r.cfg.Sources, exits.SourceKVMStats) {
		r.statsErr = errNotAsked
	}
	var err error
	if len(r.cfg.Command) > 0 {
		err = r.startCommand()
	} else {
		err = r.attachPID(ctx)
	}
	if err != nil {
		return nil, err
	}
	res := &Result{PID: r.proc.PID}
	res.Name, _ = r.proc.Name()
	r.start = time.Now()
	if r.trace != nil {
		tctx, cancel := context.WithCancel(context.Background())
		r.stopRun, r.traceRun = cancel, make(chan struct{})
		go func() {
			defer close(r.traceRun)
			if err := r.trace.Run(tctx); err != nil {
				r.log.Warn("tracepoint reader stopped", "err", err)
			}
		}()
	}
	srv, err := r.serveMetrics()
	if err != nil {
		r.abandon()
		return nil, err
	}
	if srv != nil {
		defer srv.Close()
	}

	res.Exited, res.State = r.follow(ctx)
	res.Report = r.finish()
	r.checkTrace(res.Report)
	if (r.trace != nil || r.bpf != nil) && len(r.mapped) < r.vcpus {
		r.note(fmt.Sprintf("%d of %d vCPU threads identified (by thread name or the KVM_RUN they sat in); the others' exits show under vCPU -1", len(r.mapped), r.vcpus))
	}
	res.Notes = r.notes
	if r.cmd != nil {
		res.waited, res.cmd = r.waited, r.cmd.Cmd
	}
	return res, nil
}

// openBPF loads the counting programs for process pid if the plan
// tries BPF, and settles the choice: with ViaAuto a working BPF path
// replaces the perf rings; where BPF is refused, the perf rings stay and
// the reason is kept for the Sources list.
func (r *run) openBPF(pid int) {
	try, bpfErr := r.plan.TryBPF()
	if !try {
		return
	}
	r.bpf, bpfErr = source.OpenBPF(bpfagg.Config{Tracefs: r.cfg.Tracefs, TGID: pid}, r.log)
	c := r.plan.Decide(bpfErr)
	r.bpfErr = c.BPFErr
	if c.Err != nil {
		r.traceErr = c.Err
	}
	if !c.Perf && r.trace != nil {
		r.trace.Close()
		r.trace = nil
	}
}

// startCommand starts the command stopped at exec, opens the inherited
// tracepoint events on it and lets it run.
func (r *run) startCommand() error {
	c := exec.Command(r.cfg.Command[0], r.cfg.Command[1:]...)
	c.Stdin, c.Stdout, c.Stderr = orStd(r.cfg.Stdin, os.Stdin), orStd(r.cfg.Stdout, os.Stdout), orStd(r.cfg.Stderr, os.Stderr)
	c.Env = r.cfg.Env
	st, err := kvmproc.Start(c)
	if err != nil {
		return fmt.Errorf("start %s: %w", r.cfg.Command[0], err)
	}
	r.cmd = st
	if r.proc, err = kvmproc.Open(st.PID()); err != nil {
		st.Kill()
		return err
	}
	r.openBPF(st.PID())
	if r.trace != nil {
		cpus, err := onlineCPUs()
		if err == nil {
			err = r.trace.AttachProcess(st.PID(), cpus)
		}
		if err != nil {
			r.dropTrace(err)
		}
	}
	if err := st.Resume(); err != nil {
		st.Kill()
		return err
	}
	r.waited = make(chan error, 1)
	go func() { r.waited <- st.Cmd.Wait() }()
	if r.cfg.Started != nil {
		r.cfg.Started(st.PID())
	}
	return nil
}

// attachPID looks into a running process: its VM, vCPUs, stats files and
// vCPU threads. Stats are counted from now.
func (r *run) attachPID(ctx context.Context) error {
	p, err := kvmproc.Open(r.cfg.PID)
	if err != nil {
		return err
	}
	r.proc = p
	k, err := p.KVM()
	if err != nil {
		return err
	}
	// Tracepoints first, stats baseline second (and at the end the other
	// way round), so the tracepoints cover at least the stats' window.
	defer r.copyStats(k, false)
	if r.plan.NotAsked != nil {
		return nil
	}
	// vCPU threads by name, else by the KVM_RUN they sit in; a thread
	// running guest code is caught on a later look (up to ~100 ms, before
	// anything is counted, so the windows of the sources stay close).
	vts, err := p.MapVCPUs(ctx, k, 20, 5*time.Millisecond)
	if err != nil {
		r.dropTrace(err)
		r.bpfErr = err
		return nil
	}
	r.openBPF(p.PID)
	if r.trace == nil && r.bpf == nil {
		return nil
	}
	byTID := map[int]int{}
	r.mapped = map[int]bool{}
	for _, v := range vts {
		byTID[v.TID] = v.VCPU
		r.mapped[v.TID] = true
		r.tidVCPU[v.TID] = v.VCPU
	}
	r.vcpus = len(k.VCPUs)
	if r.trace == nil {
		return nil
	}
	ts, err := p.Threads()
	if err != nil {
		return err
	}
	// Every thread is followed (only vCPU threads fire kvm_exit); those
	// not mapped to a vCPU show as vCPU -1.
	for _, t := range ts {
		vcpu, ok := byTID[t.TID]
		if !ok {
			vcpu = -1
		}
		if err := r.trace.Attach(vcpu, t.TID); err != nil {
			if errors.Is(err, unix.ESRCH) {
				continue // the thread exited meanwhile
			}
			r.dropTrace(err)
			return nil
		}
	}
	r.vcpus = len(k.VCPUs)
	return nil
}

// copyStats copies the stats files of k not copied yet. fromZero counts
// them from the VM's creation (a command profiled from its start), else
// from now.
func (r *run) copyStats(k *kvmproc.KVM, fromZero bool) {
	if r.statsErr != nil && !errors.Is(r.statsErr, errNoStatsYet) && !errors.Is(r.statsErr, errNoStatsFiles) {
		return // not asked for, or copying failed for good
	}
	fds := append(slices.Clone(k.VCPUStats), k.VMStats...)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, fd := range fds {
		id := fd.VCPU
		if fd.Kind == kvmproc.KindVMStats {
			id = -1
		}
		if _, ok := r.stats[id]; ok {
			continue
		}
		f, err := r.proc.CopyFD(fd.Num)
		if err != nil {
			r.statsErr = err
			return
		}
		sf, err := kvmstat.FromFile(f)
		if err != nil {
			r.statsErr = err
			return
		}
		var before *kvmstat.StatsSnapshot
		if fromZero {
			before, err = sf.Layout.Decode(make([]byte, sf.Layout.DataSize))
		} else {
			before, err = sf.Snapshot()
		}
		if err != nil {
			sf.Close()
			r.statsErr = err
			return
		}
		r.stats[id] = &statsFile{f: sf, before: before}
	}
	switch {
	case len(r.stats) > 0:
		r.statsErr = nil
	case len(k.VCPUs) > 0:
		r.statsErr = errNoStatsFiles // so far: QEMU opens them just after each vCPU
	default:
		r.statsErr = errNoStatsYet
	}
}

var (
	errNoStatsYet = errors.New("the process created no vCPU while profiled")
	// KVM answers KVM_GET_STATS_FD only to the VM's creator.
	errNoStatsFiles = errors.New("the VMM holds no KVM stats files to copy (KVM refuses KVM_GET_STATS_FD from other processes; QEMU opens one per vCPU)")
)

// follow waits for the end and, for a command, keeps looking for new KVM
// objects and vCPU threads; it calls Live every interval.
func (r *run) follow(ctx context.Context) (exited bool, state *os.ProcessState) {
	var deadline <-chan time.Time
	if r.cfg.Duration > 0 {
		t := time.NewTimer(r.cfg.Duration)
		defer t.Stop()
		deadline = t.C
	}
	// Look for new stats files and vCPU threads every 20 ms while they
	// keep appearing, backing off to a second once nothing changes: each
	// look reads /proc/PID/fd and the tasks' syscall files, which costs
	// the profiled guest too.
	const minGap, maxGap = 20 * time.Millisecond, time.Second
	gap := minGap
	scan := time.NewTimer(gap)
	defer scan.Stop()
	live := time.NewTicker(r.cfg.Interval)
	defer live.Stop()
	gone := make(chan struct{})
	if r.waited == nil {
		wctx, cancel := context.WithCancel(ctx)
		stopped := make(chan struct{})
		defer func() { cancel(); <-stopped }() // before the pidfd closes
		go func() {
			defer close(stopped)
			if r.proc.WaitExit(wctx) == nil {
				close(gone)
			}
		}()
	}
	for {
		select {
		case err := <-r.waited:
			r.rescan() // a last look at what the command left
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				return true, ee.ProcessState
			}
			return true, r.cmd.Cmd.ProcessState
		case <-gone:
			return true, nil
		case <-ctx.Done():
			return false, nil
		case <-deadline:
			return false, nil
		case <-scan.C:
			if r.rescan() || r.progress()[2] == 0 { // changed, or no VM yet
				gap = minGap
			} else {
				gap = min(2*gap, maxGap)
			}
			scan.Reset(gap)
		case <-live.C:
			if r.cfg.Live != nil {
				r.cfg.Live(r.report())
			}
		}
	}
}

// progress counts what rescan has found so far.
func (r *run) progress() [3]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return [3]int{len(r.stats), len(r.mapped), r.vcpus}
}

// rescan copies new stats files and maps vCPU threads not mapped yet:
// a thread is seen in KVM_RUN only while it is blocked there (a halted
// vCPU), so busy ones are found on a later look, and their whole history
// moves to their vCPU then.
func (r *run) rescan() (changed bool) {
	before := r.progress()
	defer func() { changed = r.progress() != before }()
	k, err := r.proc.KVM()
	if err != nil {
		return // not yet a KVM process, or gone
	}
	r.copyStats(k, r.cmd != nil)
	if r.trace == nil && r.bpf == nil {
		r.mu.Lock()
		r.vcpus = max(r.vcpus, len(k.VCPUs))
		r.mu.Unlock()
		return
	}
	r.mu.Lock()
	if r.mapped == nil {
		r.mapped = map[int]bool{}
	}
	r.vcpus = max(r.vcpus, len(k.VCPUs))
	done := len(r.mapped) >= len(k.VCPUs)
	r.mu.Unlock()
	if done {
		return
	}
	vts, err := r.proc.MapVCPUs(context.Background(), k, 1, 0)
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range vts {
		if !r.mapped[v.TID] {
			r.mapped[v.TID] = true
			r.tidVCPU[v.TID] = v.VCPU
			if r.trace != nil {
				r.trace.SetVCPU(v.TID, v.VCPU)
			}
		}
	}
	return
}

func (r *run) dropTrace(err error) {
	if r.trace != nil {
		r.trace.Close()
		r.trace = nil
	}
	r.traceErr = err
}

func (r *run) note(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notes = append(r.notes, s)
}

// report builds the report so far (live) from the stats and the trace
// aggregate.
func (r *run) report() *exits.Report {
	rep := &exits.Report{DurationNS: uint64(time.Since(r.start))}
	rep.SetSource(exits.SourceUserspace, "", errors.New("the exits that reach another VMM are counted inside it"))
	r.addStats(rep)
	switch {
	case r.trace != nil:
		rep.AddTrace(r.trace.Namer(), r.trace.Aggregator().Snapshot(), r.trace.Aggregator().Details())
		how := "kvm:kvm_entry and kvm:kvm_exit samples of every thread of the process (perf_event_open per thread)"
		if r.cmd != nil {
			how = "kvm:kvm_entry and kvm:kvm_exit samples of the command and every thread it created (perf_event_open, inherited, per CPU)"
		}
		if r.bpfErr != nil && r.cfg.Via == source.ViaAuto {
			how += "; BPF not used: " + r.bpfErr.Error()
		}
		rep.SetSource(exits.SourceTracepoint, how, nil)
	case r.bpf != nil && r.cfg.Via != source.ViaBoth:
		// fall through to the BPF rows below, as the tracepoint source
	default:
		err := r.traceErr
		if r.bpfErr != nil && r.cfg.Via == source.ViaAuto {
			err = fmt.Errorf("%v; BPF: %v", err, r.bpfErr)
		}
		rep.SetSource(exits.SourceTracepoint, "", err)
	}
	if r.bpf == nil {
		if r.cfg.Via == source.ViaBoth {
			rep.SetSource(SourceBPF, "", r.bpfErr)
		}
		return rep
	}
	snap, err := r.bpf.Snapshot(r.vcpuOf)
	how := r.bpf.Describe()
	if r.cfg.Via != source.ViaBoth {
		if err != nil {
			rep.SetSource(exits.SourceTracepoint, "", err)
			return rep
		}
		rep.AddTrace(r.bpf.Namer(), snap.VCPUs, snap.Details)
		rep.SetSource(exits.SourceTracepoint, how, nil)
		return rep
	}
	if err != nil {
		rep.SetSource(SourceBPF, "", err)
		return rep
	}
	for _, row := range exits.TraceRows(r.bpf.Namer(), snap.VCPUs, snap.Details) {
		row.Source = SourceBPF
		rep.Rows = append(rep.Rows, row)
	}
	rep.SetSource(SourceBPF, how, nil)
	return rep
}

// checkTrace notes a tracepoint source that counted no exit while KVM's
// stats counted some in a window it covers: a profile that would read as
// "no exits" is wrong, and the note says what the tracepoint side saw.
func (r *run) checkTrace(rep *exits.Report) {
	if r.trace == nil && r.bpf == nil {
		return
	}
	counted := untraced(rep)
	if counted == 0 {
		return
	}
	what := "perf rings"
	if r.bpf != nil {
		seen, err := r.bpf.Seen()
		what = fmt.Sprintf("the BPF programs saw %d threads of process %d and %d entries; exits pending %d, in open rows %d, dropped %d",
			seen.Threads, r.proc.PID, seen.Entries, seen.Pending, seen.Open, seen.Drops)
		if err != nil {
			what += fmt.Sprintf(" (%v)", err)
		}
	}
	r.note(fmt.Sprintf("the tracepoints counted no exit while KVM's stats counted %d (%s): their figures are missing, not zero", counted, what))
}

// untraced is the exits KVM's stats counted in rep when its tracepoint
// rows count none, else 0.
func untraced(rep *exits.Report) uint64 {
	var traced, counted uint64
	for _, row := range rep.RowsOf(exits.SourceTracepoint, exits.TotalVCPU) {
		traced += row.Count
	}
	for _, s := range rep.KVMStats {
		if s.VCPU == exits.TotalVCPU && s.Name == "exits" {
			counted = s.Delta
		}
	}
	if traced > 0 {
		return 0
	}
	return counted
}

// vcpuOf maps a thread to its vCPU as far as found.
func (r *run) vcpuOf(tid int) (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.tidVCPU[tid]
	return v, ok
}

func (r *run) addStats(rep *exits.Report) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.stats) == 0 {
		err := r.statsErr
		if err == nil {
			err = errNoStatsYet
		}
		rep.SetSource(exits.SourceKVMStats, "", err)
		return
	}
	ids := make([]int, 0, len(r.stats))
	for id := range r.stats {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	files := make([]source.Stats, 0, len(ids))
	for _, id := range ids {
		sf := r.stats[id]
		after, err := sf.final, error(nil)
		if after == nil {
			after, err = sf.f.Snapshot()
		}
		if err != nil {
			rep.SetSource(exits.SourceKVMStats, "", err)
			return
		}
		f := source.Stats{VCPU: exits.VMVCPU, Before: sf.before, After: after}
		if id >= 0 {
			f.VCPU = strconv.Itoa(id)
		}
		files = append(files, f)
	}
	if source.AddStats(rep, files) != nil {
		return // the source is marked failed
	}
	what := "the VMM's own KVM stats files, copied with pidfd_getfd"
	if r.cmd != nil {
		what += ", counted from each vCPU's creation"
	} else {
		what += ", deltas from attaching"
	}
	if _, ok := r.stats[-1]; !ok {
		what += "; the VM's own stats are not open in the VMM"
	}
	rep.SetSource(exits.SourceKVMStats, what, nil)
}

// liveStats is the metrics callback.
func (r *run) liveStats() ([]kvmstat.Labeled, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []kvmstat.Labeled
	for id, sf := range r.stats {
		s, err := sf.f.Snapshot()
		if err != nil {
			return nil, err
		}
		label := exits.VMVCPU
		if id >= 0 {
			label = strconv.Itoa(id)
		}
		out = append(out, kvmstat.Labeled{VCPU: label, Snapshot: s})
	}
	slices.SortFunc(out, func(a, b kvmstat.Labeled) int { return exits.VCPUOrder(a.VCPU) - exits.VCPUOrder(b.VCPU) })
	return out, nil
}

func (r *run) serveMetrics() (*http.Server, error) {
	if r.cfg.MetricsAddr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", r.cfg.MetricsAddr)
	if err != nil {
		return nil, fmt.Errorf("metrics address %s: %w", r.cfg.MetricsAddr, err)
	}
	cc := metrics.CollectorConfig{KVMStats: r.liveStats}
	if r.trace != nil {
		cc.Trace = r.trace.Aggregator()
	} else if r.bpf != nil {
		cc.Trace = bpfagg.Live{Counter: r.bpf, VCPUOf: r.vcpuOf, Logger: r.log}
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics.Handler(r.log, metrics.NewCollector(cc)))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	return srv, nil
}

// finish stops the tracepoint reader and builds the final report.
func (r *run) finish() *exits.Report {
	r.mu.Lock()
	for _, sf := range r.stats {
		if snap, err := sf.f.Snapshot(); err == nil {
			sf.final = snap
		}
	}
	r.mu.Unlock()
	if r.trace != nil && r.stopRun != nil {
		r.stopRun()
		<-r.traceRun
		r.stopRun = nil
	}
	if r.trace != nil {
		if err := r.trace.Drain(); err != nil {
			r.log.Warn("last tracepoint drain", "err", err)
		}
		// Each thread's last exit waits for an entry that never comes:
		// account it, so the breakdown rows add up to their reason.
		r.trace.Flush()
	}
	return r.report()
}

// abandon kills a command that was started but cannot be profiled.
func (r *run) abandon() {
	if r.cmd != nil && r.cmd.Cmd.ProcessState == nil {
		r.cmd.Cmd.Process.Kill()
		<-r.waited
	}
}

func (r *run) close() {
	if r.stopRun != nil {
		r.stopRun()
		<-r.traceRun
	}
	if r.trace != nil {
		r.trace.Close()
	}
	if r.bpf != nil {
		r.bpf.Close()
	}
	r.mu.Lock()
	for _, sf := range r.stats {
		sf.f.Close()
	}
	r.mu.Unlock()
	if r.proc != nil {
		r.proc.Close()
	}
}

func onlineCPUs() ([]int, error) {
	b, err := os.ReadFile(tracepoint.OnlineCPUsFile)
	if err != nil {
		return nil, fmt.Errorf("online CPUs: %w", err)
	}
	return tracepoint.ParseCPUList(strings.TrimSpace(string(b)))
}

func orStd(f, std *os.File) *os.File {
	if f != nil {
		return f
	}
	return std
}
