//go:build linux

package tracepoint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/mvm-dev/mvm/exits"
)

// Config configures a Profiler.
type Config struct {
	// Tracefs is the tracefs directory; "" runs Probe, which finds it
	// and mounts it if absent and permitted.
	Tracefs string
	// RingPages is the ring buffer size per vCPU thread in pages, a power
	// of two (0: DefaultRingPages).
	RingPages int
	// Interval is the longest time Run waits between drains (0: 100ms).
	Interval time.Duration
	// Logger receives diagnostics (nil: slog.Default()).
	Logger *slog.Logger
}

// Profiler samples kvm:kvm_entry and kvm:kvm_exit on vCPU threads and
// aggregates them per vCPU and exit reason, as perf kvm stat does.
type Profiler struct {
	sess        *Session
	agg         *Aggregator
	entry, exit *Format
	code, sub   Field
	interval    time.Duration
	log         *slog.Logger
	batch       []Event
}

// New reads the kvm_entry/kvm_exit formats and picks the reason names from
// the fields kvm_exit has (arm64: ret/esr_ec; x86: exit_reason/isa). It
// fails with an *UnavailableError when tracepoints cannot be used.
func New(cfg Config) (*Profiler, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	root := cfg.Tracefs
	if root == "" {
		env := SystemEnv(true)
		env.Logger = log
		var err error
		if root, err = ProbeEnv(env); err != nil {
			return nil, err
		}
	}
	entry, err := ReadFormat(root, "kvm", "kvm_entry")
	if err != nil {
		return nil, err
	}
	exit, err := ReadFormat(root, "kvm", "kvm_exit")
	if err != nil {
		return nil, err
	}
	namer, err := exits.NamerForFields(func(name string) bool { _, ok := exit.Field(name); return ok })
	if err != nil {
		return nil, fmt.Errorf("kvm:kvm_exit in %s: %w", root, err)
	}
	code, _ := exit.Field(namer.CodeField())
	sub, _ := exit.Field(namer.SubField())
	sess, err := NewSession([]*Format{entry, exit}, cfg.RingPages)
	if err != nil {
		return nil, err
	}
	interval := cfg.Interval
	if interval <= 0 {
		interval = 100 * time.Millisecond
	}
	return &Profiler{
		sess: sess, agg: NewAggregator(namer),
		entry: entry, exit: exit, code: code, sub: sub,
		interval: interval, log: log,
	}, nil
}

// Namer is the reason namer chosen from the kvm_exit format.
func (p *Profiler) Namer() exits.Namer { return p.agg.Namer() }

// Aggregator is the live aggregate (for the Prometheus collector and the
// final report).
func (p *Profiler) Aggregator() *Aggregator { return p.agg }

// Attach starts sampling the thread tid that runs vCPU vcpuID. Attach
// before the thread's first KVM_RUN to see every exit.
func (p *Profiler) Attach(vcpuID, tid int) error {
	p.agg.SetVCPU(tid, vcpuID)
	if err := p.sess.Attach(tid); err != nil {
		return fmt.Errorf("attach vCPU %d: %w", vcpuID, err)
	}
	return nil
}

// AttachProcess starts sampling process pid and every thread it creates
// from now on, with one inherited event per CPU in cpus (OnlineCPUs), as
// perf kvm stat record does for a command. Call it while pid has not yet
// started threads (a command stopped at exec) to see every exit. Threads
// are attributed to vCPUs with SetVCPU, at any time before the report.
func (p *Profiler) AttachProcess(pid int, cpus []int) error {
	for _, c := range cpus {
		if err := p.sess.AttachInherited(pid, c); err != nil {
			return fmt.Errorf("attach process %d: %w", pid, err)
		}
	}
	return nil
}

// SetVCPU says that thread tid runs vCPU vcpu (for threads found after
// AttachProcess).
func (p *Profiler) SetVCPU(tid, vcpu int) { p.agg.SetVCPU(tid, vcpu) }

// Drain moves every record available into the aggregate. It does not block.
// Call it from one goroutine at a time (Run does).
func (p *Profiler) Drain() error {
	p.batch = p.batch[:0]
	err := p.sess.Drain(func(ev *Format, rec Record) {
		te := Event{TID: int(rec.TID), CPU: int(rec.CPU), Time: rec.Time}
		switch {
		case rec.Kind == RecordLost:
			te.Kind, te.Lost = EventLost, rec.Lost
		case ev == p.entry:
			te.Kind = EventEntry
		case ev == p.exit:
			te.Kind = EventExit
			te.Code, _ = p.code.Uint(rec.Raw)
			te.Sub, _ = p.sub.Uint(rec.Raw)
		default:
			return
		}
		p.batch = append(p.batch, te)
	})
	p.agg.Add(p.batch)
	return err
}

// Run drains whenever a ring fills past its watermark, a thread exits, or
// Interval passes, until ctx ends; then it drains a last time. It returns
// nil when ctx ends and the first drain or poll error otherwise.
func (p *Profiler) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		if err := p.sess.Poll(p.interval); err != nil {
			return err
		}
		if err := p.Drain(); err != nil {
			if errors.Is(err, ErrCorrupt) {
				// The skipped records are missing from the counts;
				// keep profiling the rest.
				p.log.Warn("tracepoint ring buffer", "err", err)
				continue
			}
			return err
		}
	}
	return p.Drain()
}

// Counts returns how many kvm_entry and kvm_exit events fired on the
// attached threads according to the events' own counters, lost samples
// included.
func (p *Profiler) Counts() (entries, exitCount uint64, err error) {
	c, err := p.sess.Counts()
	if err != nil {
		return 0, 0, err
	}
	return c[0], c[1], nil
}

// Close stops sampling. The aggregate stays readable.
func (p *Profiler) Close() error { return p.sess.Close() }
