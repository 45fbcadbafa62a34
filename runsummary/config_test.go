package runsummary

import (
	"math"
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

func TestParsePSCIMode(t *testing.T) {
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
}
