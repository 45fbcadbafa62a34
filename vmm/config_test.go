package vmm

import (
	"math"
	"math/rand"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	const (
		k = uint64(1) << 10
		m = uint64(1) << 20
		g = uint64(1) << 30
		T = uint64(1) << 40
	)
	good := []struct {
		in   string
		want uint64
	}{
		{"0", 0},
		{"1", 1},
		{"4096", 4096},
		{"16777216", 16 * m},
		{"18446744073709551615", math.MaxUint64},
		{"1K", k},
		{"1k", k},
		{"1KB", k},
		{"1kb", k},
		{"1KiB", k},
		{"1kib", k},
		{"64K", 64 * k},
		{"512M", 512 * m},
		{"512m", 512 * m},
		{"512MB", 512 * m},
		{"512MiB", 512 * m},
		{"1G", g},
		{"1g", g},
		{"2GiB", 2 * g},
		{"3GB", 3 * g},
		{"1T", T},
		{"1TiB", T},
		{"1B", 1},
		{"100b", 100},
		{" 2G ", 2 * g},
		{"\t1G\n", g},
		{"0G", 0},
		{"007M", 7 * m},
		{"16777215T", (1<<24 - 1) * T}, // largest T value that fits
		{"17179869183G", (1<<34 - 1) * g},
		{"17592186044415M", (1<<44 - 1) * m},
		{"18014398509481983K", (1<<54 - 1) * k},
	}
	for _, tt := range good {
		got, err := ParseSize(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
	bad := []struct {
		in, why string
	}{
		{"", "empty"},
		{"   ", "empty"},
		{"abc", ""},
		{"M", ""},
		{"G", ""},
		{"B", ""},
		{"KB", ""},
		{"-1", ""},
		{"-1G", ""},
		{"+1G", ""},
		{"1.5G", ""},
		{"1,024", ""},
		{"0x100", ""},
		{"1e9", ""},
		{"1X", ""},
		{"1P", ""},
		{"1GG", ""},
		{"1MK", ""},
		{"G1", ""},
		{"1 G", ""},
		{"1GiBs", ""},
		{"18446744073709551616", ""}, // 2^64: does not parse as uint64
		{"99999999999999999999999", ""},
		{"16777216T", "too large"}, // 2^24 T = 2^64
		{"17179869184G", "too large"},
		{"17592186044416M", "too large"},
		{"18014398509481984K", "too large"},
		{"18446744073709551615K", "too large"},
		{"99999999T", "too large"},
	}
	for _, tt := range bad {
		got, err := ParseSize(tt.in)
		if err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", tt.in, got)
			continue
		}
		if tt.why != "" && !strings.Contains(err.Error(), tt.why) {
			t.Errorf("ParseSize(%q) error %q, want it to say %q", tt.in, err, tt.why)
		}
		if strings.TrimSpace(tt.in) != "" && !strings.Contains(err.Error(), tt.in) {
			t.Errorf("ParseSize(%q) error %q does not quote the input", tt.in, err)
		}
	}
}

func TestFormatSize(t *testing.T) {
	tests := []struct {
		in   uint64
		want string
	}{
		{0, "0 bytes"},
		{1023, "1023 bytes"},
		{1024, "1K"},
		{1536, "1536 bytes"},
		{64 << 10, "64K"},
		{1<<20 + 1<<10, "1025K"},
		{16 << 20, "16M"},
		{512 << 20, "512M"},
		{1 << 30, "1G"},
		{3<<30 + 1<<20, "3073M"},
		{2 << 40, "2T"},
		{1 << 50, "1024T"},
		{math.MaxUint64, "18446744073709551615 bytes"},
		{math.MaxUint64 &^ (1<<40 - 1), "16777215T"},
	}
	for _, tt := range tests {
		if got := FormatSize(tt.in); got != tt.want {
			t.Errorf("FormatSize(%d) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// FormatSize's output with a unit parses back to the same size.
func TestFormatSizeRoundTrip(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 10000; i++ {
		v := r.Uint64() >> uint(r.Intn(64))
		v &^= 1<<10 - 1 // a whole number of KiB, so FormatSize uses a unit
		if v == 0 {
			continue
		}
		s := FormatSize(v)
		got, err := ParseSize(s)
		if err != nil || got != v {
			t.Fatalf("ParseSize(FormatSize(%d) = %q) = %d, %v", v, s, got, err)
		}
	}
}

func validConfig() Config {
	return Config{
		Kernel:  "Image",
		CPUs:    1,
		Memory:  512 << 20,
		PSCI:    PSCIAuto,
		OnReset: ResetExit,
	}
}

func TestConfigValidate(t *testing.T) {
	if c := validConfig(); c.Validate() != nil {
		t.Fatalf("valid config: %v", c.Validate())
	}
	good := []struct {
		name string
		edit func(*Config)
	}{
		{"MaxCPUs", func(c *Config) { c.CPUs = MaxCPUs }},
		{"MinMemory", func(c *Config) { c.Memory = MinMemory }},
		{"MaxMemory", func(c *Config) { c.Memory = MaxMemory }},
		{"psci user", func(c *Config) { c.PSCI = PSCIUser }},
		{"psci kernel", func(c *Config) { c.PSCI = PSCIKernel }},
		{"reboot", func(c *Config) { c.OnReset = ResetReboot }},
		{"2G+64K", func(c *Config) { c.Memory = 2<<30 + PageSize }},
	}
	for _, tt := range good {
		c := validConfig()
		tt.edit(&c)
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
	bad := []struct {
		name string
		flag string
		edit func(*Config)
	}{
		{"no kernel", "--kernel", func(c *Config) { c.Kernel = "" }},
		{"0 cpus", "--cpus", func(c *Config) { c.CPUs = 0 }},
		{"negative cpus", "--cpus", func(c *Config) { c.CPUs = -4 }},
		{"too many cpus", "--cpus", func(c *Config) { c.CPUs = MaxCPUs + 1 }},
		{"huge cpus", "--cpus", func(c *Config) { c.CPUs = 100000 }},
		{"no memory", "--memory", func(c *Config) { c.Memory = 0 }},
		{"1K memory", "--memory", func(c *Config) { c.Memory = 1 << 10 }},
		{"just under the minimum", "--memory", func(c *Config) { c.Memory = MinMemory - PageSize }},
		{"over the maximum", "--memory", func(c *Config) { c.Memory = MaxMemory + PageSize }},
		{"huge memory", "--memory", func(c *Config) { c.Memory = math.MaxUint64 &^ (PageSize - 1) }},
		{"not a multiple of 64K", "--memory", func(c *Config) { c.Memory = 512<<20 + 4096 }},
		{"odd bytes", "--memory", func(c *Config) { c.Memory = 512<<20 + 1 }},
		{"bad reset action", "--on-reset", func(c *Config) { c.OnReset = "halt" }},
		{"empty reset action", "--on-reset", func(c *Config) { c.OnReset = "" }},
	}
	for _, tt := range bad {
		c := validConfig()
		tt.edit(&c)
		err := c.Validate()
		if err == nil {
			t.Errorf("%s: Validate succeeded, want an error naming %s", tt.name, tt.flag)
			continue
		}
		if !strings.Contains(err.Error(), tt.flag) {
			t.Errorf("%s: error %q does not name %s", tt.name, err, tt.flag)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %q is more than one line", tt.name, err)
		}
	}
}

func TestParsePSCIModeAndResetAction(t *testing.T) {
	for _, s := range []string{"auto", "user", "kernel"} {
		if m, err := ParsePSCIMode(s); err != nil || string(m) != s {
			t.Errorf("ParsePSCIMode(%q) = %q, %v", s, m, err)
		}
	}
	for _, s := range []string{"", "AUTO", "kvm", "user ", "hvc"} {
		if _, err := ParsePSCIMode(s); err == nil {
			t.Errorf("ParsePSCIMode(%q) succeeded", s)
		} else if !strings.Contains(err.Error(), "auto, user or kernel") {
			t.Errorf("ParsePSCIMode(%q): error %q does not list the choices", s, err)
		}
	}
	for _, s := range []string{"exit", "reboot"} {
		if a, err := ParseResetAction(s); err != nil || string(a) != s {
			t.Errorf("ParseResetAction(%q) = %q, %v", s, a, err)
		}
	}
	for _, s := range []string{"", "Exit", "restart", "halt"} {
		if _, err := ParseResetAction(s); err == nil {
			t.Errorf("ParseResetAction(%q) succeeded", s)
		} else if !strings.Contains(err.Error(), "exit or reboot") {
			t.Errorf("ParseResetAction(%q): error %q does not list the choices", s, err)
		}
	}
}

// Every bad field names its flag; a bad PSCI mode does not.
func TestConfigValidatePSCINamesFlag(t *testing.T) {
	for _, mode := range []PSCIMode{"bogus", ""} {
		c := validConfig()
		c.PSCI = mode
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), "--psci") {
			t.Errorf("PSCI %q: Validate() = %v, want an error naming --psci", mode, err)
		}
	}
}
