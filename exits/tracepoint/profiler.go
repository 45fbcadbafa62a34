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
	// NoBreakdown leaves out the detail tracepoints (kvm_sys_access,
	// kvm_guest_fault, kvm_hvc_arm64, kvm_wfx_arm64) that break reasons
	// down, for measuring what they cost.
	NoBreakdown bool
	// Layout describes the guest to the aggregator (regions, RAM, vCPUs).
	Layout exits.Layout
	// Options tune the aggregator (NoBreakdown implies Plain).
	Options Options
}

// detailEvent is a detail tracepoint the profiler reads, and the field
// its value comes from.
type detailEvent struct {
	kind   DetailKind
	format *Format
	field  Field
	// sysreg: the kvm_sys_access fields, packed into the value.
	op0, op1, crn, crm, op2, write Field
}

// Profiler samples kvm:kvm_entry and kvm:kvm_exit on vCPU threads and
// aggregates them per vCPU and exit reason, as perf kvm stat does.
type Profiler struct {
	sess        *Session
	agg         *Aggregator
	entry, exit *Format
	code, sub   Field
	pc          Field
	hasPC       bool
	details     []detailEvent
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
	pc, hasPC := exit.Field("vcpu_pc")
	events := []*Format{entry, exit}
	var details []detailEvent
	if !cfg.NoBreakdown && namer.Arch() == "arm64" {
		details = readDetails(root, log)
		for _, d := range details {
			events = append(events, d.format)
		}
	}
	sess, err := NewSession(events, cfg.RingPages)
	if err != nil {
		return nil, err
	}
	interval := cfg.Interval
	if interval <= 0 {
		interval = 100 * time.Millisecond
	}
	agg := NewAggregator(namer)
	opts := cfg.Options
	opts.Plain = opts.Plain || cfg.NoBreakdown
	agg.Configure(cfg.Layout, opts)
	return &Profiler{
		sess: sess, agg: agg,
		entry: entry, exit: exit, code: code, sub: sub, pc: pc, hasPC: hasPC, details: details,
		interval: interval, log: log,
	}, nil
}

// readDetails reads the formats of the detail tracepoints this kernel has;
// a missing one only leaves its reason without a breakdown ("unknown").
func readDetails(root string, log *slog.Logger) []detailEvent {
	var out []detailEvent
	get := func(name string, fields ...string) (*Format, []Field, bool) {
		f, err := ReadFormat(root, "kvm", name)
		if err != nil {
			log.Debug("tracepoint for the exit breakdown unavailable", "event", name, "err", err)
			return nil, nil, false
		}
		var fs []Field
		for _, n := range fields {
			fd, ok := f.Field(n)
			if !ok {
				log.Warn("tracepoint format lacks a field the breakdown reads", "event", name, "field", n)
				return nil, nil, false
			}
			fs = append(fs, fd)
		}
		return f, fs, true
	}
	if f, fs, ok := get("kvm_sys_access", "Op0", "Op1", "CRn", "CRm", "Op2", "is_write"); ok {
		out = append(out, detailEvent{kind: DetailSysReg, format: f, op0: fs[0], op1: fs[1], crn: fs[2], crm: fs[3], op2: fs[4], write: fs[5]})
	} else if f, fs, ok := get("kvm_handle_sys_reg", "hsr"); ok {
		out = append(out, detailEvent{kind: DetailSysRegESR, format: f, field: fs[0]})
	}
	if f, fs, ok := get("kvm_guest_fault", "ipa"); ok {
		out = append(out, detailEvent{kind: DetailFault, format: f, field: fs[0]})
	}
	if f, fs, ok := get("kvm_hvc_arm64", "r0"); ok {
		out = append(out, detailEvent{kind: DetailHVC, format: f, field: fs[0]})
	}
	if f, fs, ok := get("kvm_wfx_arm64", "is_wfe"); ok {
		out = append(out, detailEvent{kind: DetailWFx, format: f, field: fs[0]})
	}
	return out
}

// value extracts the detail's value from a raw record.
func (d *detailEvent) value(raw []byte) uint64 {
	if d.kind != DetailSysReg {
		v, _ := d.field.Uint(raw)
		return v
	}
	u := func(f Field) uint64 { v, _ := f.Uint(raw); return v }
	v := u(d.op0)&3<<14 | u(d.op1)&7<<11 | u(d.crn)&15<<7 | u(d.crm)&15<<3 | u(d.op2)&7
	if u(d.write) != 0 {
		v |= 1 << 16
	}
	return v
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
			if p.hasPC {
				te.PC, _ = p.pc.Uint(rec.Raw)
			}
		default:
			d := p.detailOf(ev)
			if d == nil {
				return
			}
			te.Kind, te.Detail, te.Val = EventDetail, d.kind, d.value(rec.Raw)
		}
		p.batch = append(p.batch, te)
	})
	p.agg.Add(p.batch)
	return err
}

func (p *Profiler) detailOf(ev *Format) *detailEvent {
	for i := range p.details {
		if p.details[i].format == ev {
			return &p.details[i]
		}
	}
	return nil
}

// Details names the detail tracepoints in use.
func (p *Profiler) Details() []string {
	var out []string
	for _, d := range p.details {
		out = append(out, d.format.String())
	}
	return out
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

// Flush processes what the aggregator still holds; call it after the last
// Drain, once the vCPUs have stopped.
func (p *Profiler) Flush() { p.agg.Flush() }

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
