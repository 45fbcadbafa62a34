package vmm

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseShare(t *testing.T) {
	abs, err := filepath.Abs("data")
	if err != nil {
		t.Fatal(err)
	}
	good := []struct {
		spec string
		i    int
		want Share
	}{
		{"/srv", 0, Share{HostDir: "/srv", At: "/srv", Tag: "share0"}},
		{"data", 3, Share{HostDir: "data", At: abs, Tag: "share3"}},
		{"/srv,ro", 1, Share{HostDir: "/srv", At: "/srv", Tag: "share1", ReadOnly: true}},
		{"/srv,ro,rw", 1, Share{HostDir: "/srv", At: "/srv", Tag: "share1"}},
		{"/srv,tag=data,at=/mnt/x/../d/", 0, Share{HostDir: "/srv", At: "/mnt/d", Tag: "data"}},
		{"/srv,at=/,ro,tag=" + strings.Repeat("é", 18), 0, Share{HostDir: "/srv", At: "/", Tag: strings.Repeat("é", 18), ReadOnly: true}},
	}
	for _, c := range good {
		got, err := ParseShare(c.spec, c.i)
		if err != nil || got != c.want {
			t.Errorf("ParseShare(%q, %d) = %+v, %v; want %+v", c.spec, c.i, got, err, c.want)
		}
	}
	bad := []struct{ spec, want string }{
		{"", "give a host directory"},
		{",ro", "give a host directory"},
		{"/srv,rx", "unknown option"},
		{"/srv,at=mnt", "not an absolute guest path"},
		{"/srv,tag=", "empty"},
		{"/srv,tag=" + strings.Repeat("x", 37), "at most 36"},
		{"/srv,tag=" + strings.Repeat("é", 19), "at most 36"}, // 38 bytes
		{"/srv,tag=a\x00b", "NUL"},
		{"/srv,tag=\xff", "not UTF-8"},
		{"/srv,size=1", "unknown option"},
	}
	for _, c := range bad {
		_, err := ParseShare(c.spec, 0)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseShare(%q) error %v, want one line mentioning %q", c.spec, err, c.want)
		}
	}
}

func TestValidateShares(t *testing.T) {
	c := Config{Shares: []Share{{HostDir: "/a", At: "/a", Tag: "a"}, {HostDir: "/b", At: "/b", Tag: "b"}}}
	if err := c.validateShares(); err != nil {
		t.Errorf("distinct shares: %v", err)
	}
	c.Shares[1].Tag = "a"
	if err := c.validateShares(); err == nil || !strings.Contains(err.Error(), `tag "a" is given twice`) {
		t.Errorf("duplicate tag: %v", err)
	}
	c.Shares[1].Tag, c.Shares[1].At = "b", "/a"
	if err := c.validateShares(); err == nil || !strings.Contains(err.Error(), "guest path /a is given twice") {
		t.Errorf("duplicate guest path: %v", err)
	}
}

func TestCheckShares(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "virtiofsd")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain")
	os.WriteFile(plain, nil, 0o644)
	share := func(d string, ro bool, at string) Config {
		return Config{Virtiofsd: bin, Shares: []Share{{HostDir: d, At: at, Tag: "t", ReadOnly: ro}}}
	}
	if sb, err := checkShares(Config{Virtiofsd: filepath.Join(dir, "none")}); err != nil || sb != "" {
		t.Errorf("no shares, missing virtiofsd: %q, %v (virtiofsd is only needed with --share)", sb, err)
	}
	if sb, err := checkShares(share(dir, true, "/")); err != nil || sb == "" {
		t.Errorf("read-only root share: sandbox %q, %v; want a sandbox and no error", sb, err)
	}
	for _, c := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"missing virtiofsd", Config{Virtiofsd: filepath.Join(dir, "none"), Shares: []Share{{HostDir: dir}}}, "does not exist"},
		{"virtiofsd not executable", Config{Virtiofsd: plain, Shares: []Share{{HostDir: dir}}}, "not an executable"},
		{"virtiofsd a directory", Config{Virtiofsd: dir, Shares: []Share{{HostDir: dir}}}, "not an executable"},
		{"missing dir", share(filepath.Join(dir, "nope"), true, "/"), "does not exist"},
		{"dir a file", share(plain, true, "/"), "not a directory"},
	} {
		_, err := checkShares(c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error mentioning %q", c.name, err, c.want)
		}
	}
	sb, err := checkShares(share(dir, false, "/x"))
	if os.Geteuid() == 0 && (err != nil || sb == "none") {
		t.Errorf("writable share as root: %v", err)
	}
	if os.Geteuid() != 0 && (err == nil || !strings.Contains(err.Error(), "root")) {
		t.Errorf("writable share without root: %v, want a refusal naming root", err)
	}
}

// TestShareSandbox: the one answer of the user-namespace probe (and, as
// root, whether / is the initramfs) picks virtiofsd's --sandbox.
func TestShareSandbox(t *testing.T) {
	refused := errors.New("operation not permitted")
	initramfs := "rootfs / rootfs rw 0 0\n"
	disk := "/dev/vda / ext4 rw 0 0\n"
	for _, c := range []struct {
		root   bool
		userns error
		mounts string
		want   string
	}{
		{true, nil, disk, "namespace"},
		{true, nil, initramfs, "chroot"},
		{false, nil, "", "namespace"},
		{false, refused, "", "none"},
		{false, refused, initramfs, "none"},
	} {
		if got := ShareSandbox(c.root, c.userns, c.mounts); got != c.want {
			t.Errorf("ShareSandbox(root %v, userns %v, %q) = %q, want %q", c.root, c.userns, c.mounts, got, c.want)
		}
	}
}

func TestRootIsRootfs(t *testing.T) {
	for _, c := range []struct {
		mounts string
		want   bool
	}{
		{"rootfs / rootfs rw 0 0\nproc /proc proc rw 0 0\n", true},
		{"rootfs / rootfs rw 0 0\n/dev/vda / ext4 rw 0 0\n", false},
		{"/dev/sda1 / ext4 rw 0 0\ntmpfs /tmp tmpfs rw 0 0\n", false},
		{"", false},
	} {
		if got := rootIsRootfs(c.mounts); got != c.want {
			t.Errorf("rootIsRootfs(%q) = %v, want %v", c.mounts, got, c.want)
		}
	}
}

func FuzzParseShare(f *testing.F) {
	for _, s := range []string{"/srv", "/srv,ro,tag=a,at=/x", "d,at=rel", ",", "/a,tag=\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		s, err := ParseShare(spec, 0)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("multi-line error %q", err)
			}
			return
		}
		if s.HostDir == "" || checkTag(s.Tag) != nil || !strings.HasPrefix(s.At, "/") && s.At != "" {
			t.Errorf("ParseShare(%q) accepted %+v", spec, s)
		}
	})
}

// TestPrivateOverheadMemfd: with guest RAM in a memfd (--share) its pages
// are shared memory, not Anonymous, so nothing is subtracted; without, the
// resident guest RAM is part of Anonymous and is.
func TestPrivateOverheadMemfd(t *testing.T) {
	anon := MemoryUse{RSS: 200 << 20, GuestResident: 100 << 20, Anonymous: 103 << 20}
	if got := anon.PrivateOverhead(); got != 3<<20 {
		t.Errorf("anonymous guest RAM: private overhead %d, want %d", got, 3<<20)
	}
	shared := MemoryUse{RSS: 200 << 20, GuestResident: 100 << 20, Anonymous: 3 << 20, GuestMemfd: true}
	if got := shared.PrivateOverhead(); got != 3<<20 {
		t.Errorf("memfd guest RAM: private overhead %d, want %d (Anonymous holds no guest page)", got, 3<<20)
	}
	if shared.Overhead() != anon.Overhead() {
		t.Errorf("RSS overhead differs by where guest RAM lives: %d and %d", shared.Overhead(), anon.Overhead())
	}
}

// userNamespaceErr starts the binary in a new user namespace: it works for
// a real executable on this host (root may always make one) and names the
// binary when it cannot start at all.
func TestUserNamespaceErr(t *testing.T) {
	if data, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil && strings.TrimSpace(string(data)) == "0" {
		t.Fatal("this host allows no user namespaces (user.max_user_namespaces=0); the test needs one")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "virtiofsd")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n[ \"$1\" = --version ] && exit 0\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := userNamespaceErr(bin); err != nil {
		t.Errorf("a user namespace for a working binary: %v", err)
	}
	err := userNamespaceErr(filepath.Join(dir, "none"))
	if err == nil || !strings.Contains(err.Error(), "none") {
		t.Errorf("a missing binary: %v, want an error naming it", err)
	}
}
