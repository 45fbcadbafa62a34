//go:build linux

package tracepoint

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Reason classifies why tracepoints cannot be used.
type Reason int

// Reasons tracepoints are unusable.
const (
	// ReasonNoPerf: the kernel has no perf events
	// (/proc/sys/kernel/perf_event_paranoid is missing).
	ReasonNoPerf Reason = iota + 1
	// ReasonNotPermitted: neither root nor CAP_PERFMON/CAP_SYS_ADMIN while
	// kernel.perf_event_paranoid forbids raw tracepoint samples, or
	// tracefs is not readable.
	ReasonNotPermitted
	// ReasonNoTracefs: tracefs is not mounted and cannot be mounted.
	ReasonNoTracefs
	// ReasonNoKVMEvents: tracefs has no kvm:kvm_entry/kvm:kvm_exit (the
	// kvm module is not loaded, or the kernel has no KVM tracepoints).
	ReasonNoKVMEvents
)

// String implements fmt.Stringer.
func (r Reason) String() string {
	switch r {
	case ReasonNoPerf:
		return "no perf events"
	case ReasonNotPermitted:
		return "not permitted"
	case ReasonNoTracefs:
		return "no tracefs"
	case ReasonNoKVMEvents:
		return "no kvm tracepoints"
	}
	return "Reason(" + strconv.Itoa(int(r)) + ")"
}

// UnavailableError says precisely why tracepoints cannot be used.
type UnavailableError struct {
	Reason Reason
	// Detail is the human explanation, including what would fix it.
	Detail string
	// Err is the underlying error, if any.
	Err error
}

func (e *UnavailableError) Error() string {
	s := "tracepoints unavailable: " + e.Detail
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// IsReason reports whether err is an *UnavailableError with reason r.
func IsReason(err error, r Reason) bool {
	var u *UnavailableError
	return errors.As(err, &u) && u.Reason == r
}

// Capability bits (include/uapi/linux/capability.h).
const (
	capSysAdmin = 21
	capPerfmon  = 38
)

// Default places of tracefs: its own mount point (Linux 4.1+) and the
// debugfs automount.
const (
	TracefsPath      = "/sys/kernel/tracing"
	DebugTracefsPath = "/sys/kernel/debug/tracing"
)

// Env is what Probe looks at. SystemEnv fills it from the running system;
// tests fill it by hand.
type Env struct {
	// EUID is the effective user id, CapEff the effective capability mask
	// (CapEff in /proc/self/status).
	EUID   int
	CapEff uint64
	// Paranoid is kernel.perf_event_paranoid; ParanoidErr the error
	// reading it.
	Paranoid    int
	ParanoidErr error
	// TracefsRoots are the candidate tracefs directories, in order.
	TracefsRoots []string
	// Stat reports whether a path exists (nil) or why not.
	Stat func(path string) error
	// Mount mounts tracefs at a path; nil means never mount.
	Mount func(path string) error
	// Logger receives a line when tracefs gets mounted.
	Logger *slog.Logger
}

// SystemEnv describes the running process and system. With mount set,
// Probe may mount tracefs at TracefsPath when it is absent and the process
// is privileged.
func SystemEnv(mount bool) Env {
	env := Env{
		EUID:         os.Geteuid(),
		TracefsRoots: []string{TracefsPath, DebugTracefsPath},
		Stat:         func(p string) error { _, err := os.Stat(p); return err },
		Logger:       slog.Default(),
	}
	env.CapEff, _ = readCapEff()
	env.Paranoid, env.ParanoidErr = readParanoid()
	if mount {
		env.Mount = func(p string) error { return unix.Mount("nodev", p, "tracefs", 0, "") }
	}
	return env
}

func readParanoid() (int, error) {
	b, err := os.ReadFile("/proc/sys/kernel/perf_event_paranoid")
	if err != nil {
		return 0, err
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("parse perf_event_paranoid %q: %w", b, err)
	}
	return v, nil
}

func readCapEff() (uint64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	return parseCapEff(b)
}

// parseCapEff finds "CapEff:\t<hex>" in /proc/<pid>/status.
func parseCapEff(status []byte) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CapEff:"); ok {
			c, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				return 0, fmt.Errorf("parse CapEff %q: %w", v, err)
			}
			return c, nil
		}
	}
	return 0, errors.New("no CapEff line in status")
}

func (e Env) hasCap(c uint) bool { return e.CapEff&(1<<c) != 0 }

// Probe checks that kvm tracepoints can be read on this system, mounting
// tracefs if needed and permitted. It returns nil or an *UnavailableError.
func Probe() error {
	_, err := ProbeEnv(SystemEnv(true))
	return err
}

// ProbeEnv checks env and returns the tracefs directory to use.
//
// The rules follow the kernel: a tracepoint event with PERF_SAMPLE_RAW
// needs perfmon_capable() (CAP_PERFMON or CAP_SYS_ADMIN, which root has)
// unless kernel.perf_event_paranoid is -1 (perf_trace_event_perm in
// kernel/trace/trace_event_perf.c); tracefs directories are root-only by
// default; mounting needs CAP_SYS_ADMIN.
func ProbeEnv(env Env) (string, error) {
	if env.ParanoidErr != nil {
		if errors.Is(env.ParanoidErr, fs.ErrNotExist) {
			return "", &UnavailableError{Reason: ReasonNoPerf,
				Detail: "the kernel has no perf events (/proc/sys/kernel/perf_event_paranoid is missing; CONFIG_PERF_EVENTS=n?)"}
		}
		return "", &UnavailableError{Reason: ReasonNoPerf, Detail: "cannot read kernel.perf_event_paranoid", Err: env.ParanoidErr}
	}
	perfmon := env.EUID == 0 || env.hasCap(capPerfmon) || env.hasCap(capSysAdmin)
	if !perfmon && env.Paranoid > -1 {
		return "", &UnavailableError{Reason: ReasonNotPermitted, Detail: fmt.Sprintf(
			"not root and no CAP_PERFMON: raw tracepoint samples need CAP_PERFMON (or CAP_SYS_ADMIN) while kernel.perf_event_paranoid is %d; "+
				"run as root, grant CAP_PERFMON, or set kernel.perf_event_paranoid=-1", env.Paranoid)}
	}
	root, err := findTracefs(env)
	if err != nil {
		return "", err
	}
	for _, ev := range []string{"kvm_entry", "kvm_exit"} {
		p := filepath.Join(root, "events", "kvm", ev, "format")
		if err := env.Stat(p); err != nil {
			if errors.Is(err, fs.ErrPermission) {
				return "", &UnavailableError{Reason: ReasonNotPermitted,
					Detail: "cannot read " + p + " (tracefs is root-only by default)", Err: err}
			}
			return "", &UnavailableError{Reason: ReasonNoKVMEvents,
				Detail: "no kvm:" + ev + " tracepoint in " + root + " (kvm module not loaded?)", Err: err}
		}
	}
	return root, nil
}

func findTracefs(env Env) (string, error) {
	var denied error
	for _, root := range env.TracefsRoots {
		err := env.Stat(filepath.Join(root, "events"))
		if err == nil {
			return root, nil
		}
		if errors.Is(err, fs.ErrPermission) && denied == nil {
			denied = err
		}
	}
	if denied != nil {
		return "", &UnavailableError{Reason: ReasonNotPermitted,
			Detail: "tracefs is mounted but not readable (root-only by default)", Err: denied}
	}
	where := strings.Join(env.TracefsRoots, " or ")
	if env.Mount == nil {
		return "", &UnavailableError{Reason: ReasonNoTracefs, Detail: "tracefs is not mounted at " + where}
	}
	if env.EUID != 0 && !env.hasCap(capSysAdmin) {
		return "", &UnavailableError{Reason: ReasonNoTracefs, Detail: "tracefs is not mounted at " + where +
			" and mounting it needs root (mount -t tracefs nodev " + TracefsPath + ")"}
	}
	if err := env.Mount(TracefsPath); err != nil {
		return "", &UnavailableError{Reason: ReasonNoTracefs, Detail: "tracefs is not mounted at " + where +
			" and mounting it at " + TracefsPath + " failed", Err: err}
	}
	if env.Logger != nil {
		env.Logger.Info("mounted tracefs for kvm tracepoints", "path", TracefsPath)
	}
	if err := env.Stat(filepath.Join(TracefsPath, "events")); err != nil {
		return "", &UnavailableError{Reason: ReasonNoTracefs, Detail: "mounted tracefs at " + TracefsPath + " but it has no events directory", Err: err}
	}
	return TracefsPath, nil
}

// ReadFormat reads <tracefs>/events/<system>/<name>/format.
func ReadFormat(tracefs, system, name string) (*Format, error) {
	p := filepath.Join(tracefs, "events", system, name, "format")
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("read tracepoint format: %w", err)
	}
	f, err := ParseFormat(system, b)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", p, err)
	}
	if f.Name != name {
		return nil, fmt.Errorf("parse %s: %w: names event %q", p, ErrFormat, f.Name)
	}
	return f, nil
}
