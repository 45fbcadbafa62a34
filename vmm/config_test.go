package vmm

import (
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/mvm-dev/mvm/runsummary"
)

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

// FormatSize's output with a unit parses back to the same size (the
// parser --memory and bench's memory= use).
func TestFormatSizeRoundTrip(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 10000; i++ {
		v := r.Uint64() >> uint(r.Intn(64))
		v &^= 1<<10 - 1 // a whole number of KiB, so FormatSize uses a unit
		if v == 0 {
			continue
		}
		s := FormatSize(v)
		got, err := runsummary.ParseSize(s)
		if err != nil || got != v {
			t.Fatalf("runsummary.ParseSize(FormatSize(%d) = %q) = %d, %v", v, s, got, err)
		}
	}
}

func validConfig() Config {
	return Config{
		Kernel:  "Image",
		CPUs:    1,
		Memory:  512 << 20,
		PSCI:    runsummary.PSCIAuto,
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
		{"MaxCPUs", func(c *Config) { c.CPUs = runsummary.MaxCPUs }},
		{"MinMemory", func(c *Config) { c.Memory = MinMemory }},
		{"MaxMemory", func(c *Config) { c.Memory = MaxMemory }},
		{"psci user", func(c *Config) { c.PSCI = runsummary.PSCIUser }},
		{"psci kernel", func(c *Config) { c.PSCI = runsummary.PSCIKernel }},
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
		{"too many cpus", "--cpus", func(c *Config) { c.CPUs = runsummary.MaxCPUs + 1 }},
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

func TestParseResetAction(t *testing.T) {
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
	for _, mode := range []runsummary.PSCIMode{"bogus", ""} {
		c := validConfig()
		c.PSCI = mode
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), "--psci") {
			t.Errorf("PSCI %q: Validate() = %v, want an error naming --psci", mode, err)
		}
	}
}
