//go:build linux

package tracepoint

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
)

// fakeFS is a set of existing paths; paths under a denied prefix fail with
// a permission error.
type fakeFS struct {
	exists map[string]bool
	denied string
}

func (f *fakeFS) stat(p string) error {
	if f.denied != "" && strings.HasPrefix(p, f.denied) {
		return &fs.PathError{Op: "stat", Path: p, Err: fs.ErrPermission}
	}
	if f.exists[p] {
		return nil
	}
	return &fs.PathError{Op: "stat", Path: p, Err: fs.ErrNotExist}
}

func kvmTracefs(root string) map[string]bool {
	return map[string]bool{
		root + "/events":                      true,
		root + "/events/kvm/kvm_entry/format": true,
		root + "/events/kvm/kvm_exit/format":  true,
	}
}

// TestProbeEnv covers every reason Probe gives, with a fake system, so the
// unprivileged paths are tested without dropping privileges.
func TestProbeEnv(t *testing.T) {
	const capPerfmonMask, capSysAdminMask = 1 << 38, 1 << 21
	type tc struct {
		name      string
		env       Env
		fs        *fakeFS
		mountErr  error
		wantRoot  string
		want      Reason
		wantInMsg string
		mounted   bool
	}
	cases := []tc{
		{name: "root with tracefs", env: Env{EUID: 0, Paranoid: 2}, fs: &fakeFS{exists: kvmTracefs(TracefsPath)}, wantRoot: TracefsPath},
		{name: "debugfs tracing only", env: Env{EUID: 0, Paranoid: 2}, fs: &fakeFS{exists: kvmTracefs(DebugTracefsPath)}, wantRoot: DebugTracefsPath},
		{name: "no perf events", env: Env{EUID: 0, ParanoidErr: &fs.PathError{Op: "open", Path: "/proc/sys/kernel/perf_event_paranoid", Err: fs.ErrNotExist}},
			fs: &fakeFS{}, want: ReasonNoPerf, wantInMsg: "CONFIG_PERF_EVENTS"},
		{name: "paranoid unreadable", env: Env{EUID: 0, ParanoidErr: errors.New("EIO")}, fs: &fakeFS{}, want: ReasonNoPerf, wantInMsg: "EIO"},
		{name: "not root, paranoid 2", env: Env{EUID: 1000, Paranoid: 2}, fs: &fakeFS{exists: kvmTracefs(TracefsPath)},
			want: ReasonNotPermitted, wantInMsg: "kernel.perf_event_paranoid is 2"},
		{name: "not root, paranoid 0", env: Env{EUID: 1000, Paranoid: 0}, fs: &fakeFS{exists: kvmTracefs(TracefsPath)},
			want: ReasonNotPermitted, wantInMsg: "CAP_PERFMON"},
		{name: "not root, CAP_PERFMON", env: Env{EUID: 1000, Paranoid: 2, CapEff: capPerfmonMask}, fs: &fakeFS{exists: kvmTracefs(TracefsPath)}, wantRoot: TracefsPath},
		{name: "not root, CAP_SYS_ADMIN", env: Env{EUID: 1000, Paranoid: 3, CapEff: capSysAdminMask}, fs: &fakeFS{exists: kvmTracefs(TracefsPath)}, wantRoot: TracefsPath},
		{name: "paranoid -1 but tracefs root-only", env: Env{EUID: 1000, Paranoid: -1}, fs: &fakeFS{denied: "/sys/kernel"},
			want: ReasonNotPermitted, wantInMsg: "root-only"},
		{name: "CAP_PERFMON, kvm format root-only", env: Env{EUID: 1000, Paranoid: 2, CapEff: capPerfmonMask},
			fs: &fakeFS{exists: map[string]bool{TracefsPath + "/events": true}, denied: TracefsPath + "/events/kvm"}, want: ReasonNotPermitted, wantInMsg: "cannot read"},
		{name: "no tracefs, no mount", env: Env{EUID: 0}, fs: &fakeFS{}, want: ReasonNoTracefs, wantInMsg: "not mounted"},
		{name: "no tracefs, mounted", env: Env{EUID: 0, Mount: func(string) error { return nil }}, fs: &fakeFS{}, mounted: true, wantRoot: TracefsPath},
		{name: "no tracefs, mount fails", env: Env{EUID: 0}, fs: &fakeFS{}, mountErr: errors.New("EPERM"), want: ReasonNoTracefs, wantInMsg: "EPERM"},
		{name: "no tracefs, not root", env: Env{EUID: 1000, Paranoid: 2, CapEff: capPerfmonMask, Mount: func(string) error { return nil }}, fs: &fakeFS{},
			want: ReasonNoTracefs, wantInMsg: "needs root"},
		{name: "no kvm events", env: Env{EUID: 0}, fs: &fakeFS{exists: map[string]bool{TracefsPath + "/events": true}},
			want: ReasonNoKVMEvents, wantInMsg: "kvm module"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := c.env
			env.TracefsRoots = []string{TracefsPath, DebugTracefsPath}
			env.Stat = c.fs.stat
			mounted := false
			if c.mounted || c.mountErr != nil {
				env.Mount = func(p string) error {
					if c.mountErr != nil {
						return c.mountErr
					}
					mounted = true
					for k := range kvmTracefs(p) {
						if c.fs.exists == nil {
							c.fs.exists = map[string]bool{}
						}
						c.fs.exists[k] = true
					}
					return nil
				}
			}
			root, err := ProbeEnv(env)
			if c.want == 0 {
				if err != nil || root != c.wantRoot {
					t.Fatalf("ProbeEnv = %q, %v; want %q", root, err, c.wantRoot)
				}
				if mounted != c.mounted {
					t.Fatalf("mounted = %v", mounted)
				}
				return
			}
			var u *UnavailableError
			if !errors.As(err, &u) || u.Reason != c.want || !IsReason(err, c.want) {
				t.Fatalf("ProbeEnv error %v, want reason %v", err, c.want)
			}
			if !strings.Contains(err.Error(), c.wantInMsg) || !strings.HasPrefix(err.Error(), "tracepoints unavailable: ") {
				t.Fatalf("message %q lacks %q", err, c.wantInMsg)
			}
		})
	}
	if ReasonNoPerf.String() == "" || Reason(99).String() != "Reason(99)" {
		t.Error("reason names")
	}
}

func TestParseCapEff(t *testing.T) {
	status := []byte("Name:\tmvm\nCapInh:\t0000000000000000\nCapPrm:\t000001ffffffffff\nCapEff:\t000001ffffffffff\n")
	c, err := parseCapEff(status)
	if err != nil || c != 0x1ffffffffff {
		t.Fatalf("CapEff %#x %v", c, err)
	}
	if _, err := parseCapEff([]byte("Name: x\n")); err == nil {
		t.Error("missing CapEff accepted")
	}
	if _, err := parseCapEff([]byte("CapEff:\tzz\n")); err == nil {
		t.Error("bad CapEff accepted")
	}
}
