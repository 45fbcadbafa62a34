package vmm

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"strings"

	"github.com/mvm-dev/mvm/devices/virtio"
	"github.com/mvm-dev/mvm/exits/symbols"
)

// InputError is a mistake in what mvm was asked to run: a flag's value, or
// a file it names that is missing, unreadable or of the wrong kind. New
// and CheckBoot find every one of them before they probe the host (the
// arm64 check, /dev/kvm, KVM capabilities), so a bad command line says
// what is wrong with it on any host. Commands report it as bad input
// (exit status 2); every other error of New is the host's or the VM's.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }

// Unwrap returns the mistake.
func (e *InputError) Unwrap() error { return e.Err }

// asInput marks err as an InputError (nil stays nil).
func asInput(err error) error {
	var ie *InputError
	if err == nil || errors.As(err, &ie) {
		return err
	}
	return &InputError{err}
}

// input is everything New reads from the files a Config names, checked
// before the host is touched.
type input struct {
	boot bootPlan
	// symbols is the --guest-symbols table (with Profile), else nil.
	symbols *symbols.Table
	// sandbox is virtiofsd's --sandbox for the shares (checkShares).
	sandbox string
}

// checkInput checks the configuration and every file it names: the boot
// images (prepare), the disk images (opened with the access the guest
// will have, then closed; the lock is taken when the VM opens them) and
// the guest symbols, which it parses and keeps for the profile.
func checkInput(cfg Config) (input, error) {
	var in input
	var err error
	if in.boot, err = prepare(cfg); err != nil {
		return in, err
	}
	for _, d := range cfg.Disks {
		if err := virtio.CheckDisk(d.Path, d.ReadOnly); err != nil {
			return in, &InputError{fmt.Errorf("--disk: %w", err)}
		}
	}
	if in.sandbox, err = checkShares(cfg); err != nil {
		return in, &InputError{err}
	}
	if cfg.Profile && cfg.GuestSymbols != "" {
		if in.symbols, err = openSymbols(cfg.GuestSymbols); err != nil {
			return in, &InputError{fmt.Errorf("--guest-symbols %w", err)}
		}
	}
	return in, nil
}

// openSymbols reads a --guest-symbols file, saying in words when it is
// missing, a directory or unreadable.
func openSymbols(path string) (*symbols.Table, error) {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%s does not exist", path)
	case err == nil && st.IsDir():
		return nil, fmt.Errorf("%s is a directory, not a symbol file", path)
	}
	tab, err := symbols.Open(path)
	switch {
	case errors.Is(err, fs.ErrPermission):
		return nil, fmt.Errorf("%s is not readable: permission denied", path)
	case err != nil:
		return nil, err // symbols.Open's errors name path
	}
	return tab, nil
}

// CheckListenAddr checks a HOST:PORT to serve on (--metrics-addr) the way
// net.Listen("tcp", addr) reads it, without binding it or resolving the
// host: whether the port is free is known only when the listener binds.
func CheckListenAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return fmt.Errorf("%q is not HOST:PORT (e.g. 127.0.0.1:9100, or :9100 for every interface)", addr)
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("%q: port %q is neither a number from 0 to 65535 nor a TCP service name", addr, port)
	}
	if host != "" && !isHostName(host) {
		if _, err := netip.ParseAddr(host); err != nil {
			return fmt.Errorf("%q: host %q is neither an IP address nor a host name", addr, host)
		}
	}
	return nil
}

// isHostName reports whether s is a DNS host name: dot-separated labels
// of letters, digits and hyphens, 1 to 63 characters each, not starting or
// ending with a hyphen, 253 characters in all (RFC 1123 section 2.1).
func isHostName(s string) bool {
	if len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(strings.TrimSuffix(s, "."), ".") {
		if len(l) == 0 || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}
