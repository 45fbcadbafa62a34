package vmm

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckListenAddr(t *testing.T) {
	for _, addr := range []string{
		":9100", "127.0.0.1:9100", "0.0.0.0:0", "[::1]:9100", "[::]:65535",
		"localhost:9100", "metrics.example.org:80", "[fe80::1%eth0]:9100",
	} {
		if err := CheckListenAddr(addr); err != nil {
			t.Errorf("CheckListenAddr(%q) = %v, want nil", addr, err)
		}
	}
	for _, c := range []struct{ addr, says string }{
		{"notanaddr", "not HOST:PORT"},
		{"", "not HOST:PORT"},
		{"9100", "not HOST:PORT"},
		{"127.0.0.1:", "not HOST:PORT"},
		{"::1:9100", "not HOST:PORT"}, // an IPv6 host needs brackets
		{":65536", `port "65536"`},
		{":-1", `port "-1"`},
		{":http-but-not-really", `port "http-but-not-really"`},
		{"bad_host:9100", `host "bad_host"`},
		{"-lead.example:9100", `host "-lead.example"`},
		{"a b:9100", `host "a b"`},
		{"[not_an_ip]:9100", `host "not_an_ip"`},
	} {
		err := CheckListenAddr(c.addr)
		if err == nil || !strings.Contains(err.Error(), c.says) || strings.Contains(err.Error(), "\n") {
			t.Errorf("CheckListenAddr(%q) = %v, want one line with %q", c.addr, err, c.says)
		}
	}
}

// FuzzCheckListenAddr: the check never panics, and what it accepts with a
// numeric port and an IP literal (or no host) net.Listen parses too; the
// reverse holds as well: an address that Listen binds is accepted.
func FuzzCheckListenAddr(f *testing.F) {
	for _, s := range []string{":9100", "127.0.0.1:0", "[::1]:0", "notanaddr", "a:b:c", "[::1", "host:http"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, addr string) {
		err := CheckListenAddr(addr)
		host, port, serr := net.SplitHostPort(addr)
		if err == nil && serr != nil {
			t.Fatalf("CheckListenAddr(%q) accepted what SplitHostPort rejects: %v", addr, serr)
		}
		// Bind only loopback or wildcard literals on port 0: nothing
		// leaves the machine and no fixed port is taken.
		if serr == nil && port == "0" && (host == "" || host == "127.0.0.1" || host == "::1") {
			ln, lerr := net.Listen("tcp", addr)
			if lerr == nil {
				ln.Close()
				if err != nil {
					t.Fatalf("net.Listen(%q) works but CheckListenAddr says %v", addr, err)
				}
			}
		}
	})
}

// checkInput and New check the disks and the guest symbols besides the
// boot images, and every mistake is an InputError, never a host error.
func TestCheckInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	payload := write("payload.bin", arm64Code())
	disk := write("disk.img", make([]byte, 4096))
	syms := write("System.map", []byte("ffff800080000000 T _text\nffff800080010000 T start_kernel\n"))
	missing := filepath.Join(dir, "missing")

	good := validConfig()
	good.Kernel = payload
	good.Disks = []Disk{{Path: disk}, {Path: disk, ReadOnly: true}}
	good.Profile, good.GuestSymbols = true, syms
	in, err := checkInput(good)
	if err != nil {
		t.Fatalf("checkInput(good) = %v", err)
	}
	if in.symbols == nil {
		t.Error("checkInput kept no symbol table for --guest-symbols")
	}
	if err := CheckBoot(good); err != nil {
		t.Errorf("CheckBoot(good) = %v", err)
	}
	// Without --profile the symbols are not read (the CLI refuses the
	// combination; the library does not need them).
	noProf := good
	noProf.Profile, noProf.GuestSymbols = false, missing
	if in, err := checkInput(noProf); err != nil || in.symbols != nil {
		t.Errorf("checkInput without Profile = %v, %v; want the symbols left alone", in.symbols, err)
	}

	for _, c := range []struct {
		name string
		edit func(*Config)
		says []string
	}{
		{"bad config", func(c *Config) { c.CPUs = 0 }, []string{"--cpus"}},
		{"bad metrics address", func(c *Config) { c.MetricsAddr = "notanaddr" }, []string{"--metrics-addr", "notanaddr"}},
		{"missing kernel", func(c *Config) { c.Kernel = missing }, []string{"kernel", missing, "does not exist"}},
		{"missing disk", func(c *Config) { c.Disks = []Disk{{Path: disk}, {Path: missing}} }, []string{"--disk", missing, "does not exist"}},
		{"disk a directory", func(c *Config) { c.Disks = []Disk{{Path: dir, ReadOnly: true}} }, []string{"--disk", "directory"}},
		{"disk not whole sectors", func(c *Config) { c.Disks = []Disk{{Path: payload}} }, []string{"--disk", "multiple of 512"}},
		{"missing symbols", func(c *Config) { c.GuestSymbols = missing }, []string{"--guest-symbols", missing, "does not exist"}},
		{"symbols a directory", func(c *Config) { c.GuestSymbols = dir }, []string{"--guest-symbols", "directory"}},
		{"not symbols", func(c *Config) { c.GuestSymbols = payload }, []string{"--guest-symbols", payload}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := good
			c.edit(&cfg)
			for name, err := range map[string]error{"CheckBoot": CheckBoot(cfg), "New": newErr(cfg)} {
				var ie *InputError
				if !errors.As(err, &ie) || errors.Is(err, ErrNeedsARM64) {
					t.Errorf("%s = %v (%T), want an InputError", name, err, err)
					continue
				}
				for _, s := range c.says {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("%s = %v, want it to say %q", name, err, s)
					}
				}
			}
		})
	}
}

// newErr is New's error; a VM it builds (on an arm64 host) is closed.
func newErr(cfg Config) error {
	m, err := New(cfg)
	if m != nil {
		m.Close()
	}
	return err
}
