package vmm

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"unicode/utf8"
)

// DefaultVirtiofsd is where Debian's virtiofsd package installs the
// backend (DESIGN.md section 8).
const DefaultVirtiofsd = "/usr/libexec/virtiofsd"

// maxTagLen is the size of virtio-fs's config-space tag field (virtio 1.2
// section 5.11.4: "char tag[36]", UTF-8, NUL-padded when shorter).
const maxTagLen = 36

// Share is one --share: a host directory exported to the guest through a
// virtio-fs device served by its own virtiofsd.
type Share struct {
	// HostDir is the host directory (as given; checked to exist at New).
	HostDir string
	// At is where the guest is meant to mount it (an absolute path);
	// mvm's own guest init uses it, a user's guest mounts TAG wherever.
	At string
	// Tag is the virtio-fs tag: the guest's mount -t virtiofs TAG DIR.
	Tag string
	// ReadOnly makes virtiofsd refuse writes (--readonly): the guest's
	// writes fail with EROFS.
	ReadOnly bool
}

// ParseShare parses a --share value: HOSTDIR[,at=GUESTPATH][,tag=TAG][,ro].
// i is the share's index among the --share flags; the default tag is
// shareI and the default guest path is HOSTDIR's absolute path.
func ParseShare(spec string, i int) (Share, error) {
	dir, opts, _ := strings.Cut(spec, ",")
	if dir == "" {
		return Share{}, fmt.Errorf("--share %q: give a host directory, e.g. --share /srv/data,tag=data", spec)
	}
	s := Share{HostDir: dir, Tag: fmt.Sprintf("share%d", i)}
	if abs, err := filepath.Abs(dir); err == nil {
		s.At = abs
	}
	for _, o := range strings.Split(opts, ",") {
		k, v, hasValue := strings.Cut(o, "=")
		switch {
		case o == "":
		case o == "ro":
			s.ReadOnly = true
		case o == "rw":
			s.ReadOnly = false
		case k == "at" && hasValue:
			if !path.IsAbs(v) {
				return Share{}, fmt.Errorf("--share %q: at=%q is not an absolute guest path (e.g. at=/mnt/data)", spec, v)
			}
			s.At = path.Clean(v)
		case k == "tag" && hasValue:
			if err := checkTag(v); err != nil {
				return Share{}, fmt.Errorf("--share %q: %w", spec, err)
			}
			s.Tag = v
		default:
			return Share{}, fmt.Errorf("--share %q: unknown option %q (use HOSTDIR[,at=GUESTPATH][,tag=TAG][,ro])", spec, o)
		}
	}
	return s, nil
}

// checkTag checks a virtio-fs tag: 1 to 36 bytes of UTF-8 without NUL
// (the config field is NUL-padded) and, since the guest passes it to
// mount(8), without whitespace or commas.
func checkTag(tag string) error {
	switch {
	case tag == "":
		return errors.New("tag= is empty; give 1 to 36 characters")
	case len(tag) > maxTagLen:
		return fmt.Errorf("tag %q is %d bytes; virtio-fs tags hold at most %d", tag, len(tag), maxTagLen)
	case !utf8.ValidString(tag):
		return fmt.Errorf("tag %q is not UTF-8", tag)
	case strings.ContainsAny(tag, "\x00 \t\n,"):
		return fmt.Errorf("tag %q holds a NUL, space or comma", tag)
	}
	return nil
}

// validateShares checks the shares against each other: tags and guest
// paths must be unique.
func (c *Config) validateShares() error {
	tags, ats := map[string]bool{}, map[string]bool{}
	for _, s := range c.Shares {
		if tags[s.Tag] {
			return fmt.Errorf("--share: tag %q is given twice; give each share its own tag=", s.Tag)
		}
		tags[s.Tag] = true
		if ats[s.At] {
			return fmt.Errorf("--share: guest path %s is given twice; give each share its own at=", s.At)
		}
		ats[s.At] = true
	}
	return nil
}

// checkShares checks the files the shares name, each host directory and
// the virtiofsd binary, and returns the --sandbox virtiofsd is to run
// with (ShareSandbox; "" without shares). Without root it probes once
// whether virtiofsd can have a user namespace: that answer both refuses
// a writable share where the host allows none and picks the sandbox the
// devices start with, so the probe (a process start) runs once a run.
func checkShares(cfg Config) (string, error) {
	if len(cfg.Shares) == 0 {
		return "", nil
	}
	bin := cfg.virtiofsd()
	st, err := os.Stat(bin)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("--share needs virtiofsd, and %s does not exist (install Debian's virtiofsd package or pass --virtiofsd PATH)", bin)
	case err != nil:
		return "", fmt.Errorf("--virtiofsd %w", err)
	case st.IsDir() || st.Mode().Perm()&0o111 == 0:
		return "", fmt.Errorf("--virtiofsd %s is not an executable file", bin)
	}
	for _, s := range cfg.Shares {
		st, err := os.Stat(s.HostDir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return "", fmt.Errorf("--share: host directory %s does not exist", s.HostDir)
		case err != nil:
			return "", fmt.Errorf("--share: %w", err)
		case !st.IsDir():
			return "", fmt.Errorf("--share: %s is not a directory", s.HostDir)
		}
	}
	root := os.Geteuid() == 0
	var usernsErr error
	if !root {
		usernsErr = userNamespaceErr(bin)
	}
	if usernsErr != nil {
		for _, s := range cfg.Shares {
			// Without root virtiofsd builds its namespace sandbox in a
			// user namespace of its own; where the host refuses those,
			// --sandbox none would let the guest follow symlinks out of
			// the directory, which only the read-only root share may
			// accept.
			if !(s.ReadOnly && s.At == "/") {
				return "", fmt.Errorf("--share %s: virtiofsd's sandbox needs root or an unprivileged user namespace, and this host refuses one (%v); run mvm as root or allow user namespaces (sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0); only a read-only share at=/ may run without the sandbox", s.HostDir, usernsErr)
			}
		}
	}
	mounts := ""
	if root {
		if data, err := os.ReadFile("/proc/self/mounts"); err == nil {
			mounts = string(data)
		}
	}
	return ShareSandbox(root, usernsErr, mounts), nil
}

// userNamespaceErr says why this (non-root) process cannot start virtiofsd
// in a new user namespace, which is what virtiofsd's namespace sandbox does
// without root (it maps the caller's uid and gid into it); nil when it can.
// The probe starts bin --version with CLONE_NEWUSER, as the sandbox would.
func userNamespaceErr(bin string) error {
	cmd := exec.Command(bin, "--version")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("a user namespace for %s: %w", filepath.Base(bin), err)
	}
	return nil
}

// virtiofsd is the backend binary --share uses.
func (c *Config) virtiofsd() string {
	if c.Virtiofsd != "" {
		return c.Virtiofsd
	}
	return DefaultVirtiofsd
}

// ShareSandbox is virtiofsd's --sandbox for a share: as root its namespace
// sandbox, or chroot where / is the initramfs (mounts, /proc/self/mounts'
// text, says so: pivot_root(2) fails with EINVAL when the current root is
// rootfs, and virtiofsd's namespace sandbox pivots into the shared
// directory); without root the namespace sandbox too, which virtiofsd
// then builds in a user namespace, or none where the host refuses user
// namespaces (usernsErr, userNamespaceErr's answer; checkShares allows
// that only for the read-only root share).
func ShareSandbox(root bool, usernsErr error, mounts string) string {
	switch {
	case !root && usernsErr != nil:
		return "none"
	case root && rootIsRootfs(mounts):
		return "chroot"
	}
	return "namespace"
}

// rootIsRootfs reports whether the last mount on / in a /proc/self/mounts
// text (fstab(5) format: device, mount point, type, ...) is rootfs.
func rootIsRootfs(mounts string) bool {
	fstype := ""
	for _, line := range strings.Split(mounts, "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[1] == "/" {
			fstype = f[2]
		}
	}
	return fstype == "rootfs"
}
