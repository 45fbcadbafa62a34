package vmm

import (
	"strings"
	"testing"

	"github.com/mvm-dev/mvm/runsummary"
)

func TestParseDisk(t *testing.T) {
	for _, c := range []struct {
		spec string
		want Disk
		err  string
	}{
		{"root.img", Disk{Path: "root.img"}, ""},
		{"/a/b.img,ro", Disk{Path: "/a/b.img", ReadOnly: true}, ""},
		{"b.img,ro,rw", Disk{Path: "b.img"}, ""},
		{"", Disk{}, "give an image path"},
		{",ro", Disk{}, "give an image path"},
		{"a.img,readonly", Disk{}, "unknown option"},
	} {
		got, err := ParseDisk(c.spec)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseDisk(%q) error %v, want %q", c.spec, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseDisk(%q) = %+v, %v; want %+v", c.spec, got, err, c.want)
		}
	}
}

func TestParseNet(t *testing.T) {
	n, err := ParseNet("tap=tap0,mac=02:00:00:00:00:2a")
	if err != nil || n.Tap != "tap0" || n.MAC.String() != "02:00:00:00:00:2a" {
		t.Errorf("ParseNet = %+v, %v", n, err)
	}
	if n, err := ParseNet("tap=tap1"); err != nil || n.MAC != nil {
		t.Errorf("ParseNet without mac = %+v, %v; want no MAC (the default is derived later)", n, err)
	}
	for spec, want := range map[string]string{
		"tap0":                        "KEY=VALUE",
		"tap=":                        "1 to 15 characters",
		"tap=abcdefghijklmnop":        "1 to 15 characters",
		"tap=a/b":                     "without '/'",
		"mac=02:00:00:00:00:01":       "no tap given",
		"tap=t,mac=01:00:00:00:00:01": "multicast",
		"tap=t,mac=02:00:00:00:00":    "bad MAC",
		"tap=t,speed=10":              "unknown key",
	} {
		if _, err := ParseNet(spec); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseNet(%q) error %v, want %q", spec, err, want)
		}
	}
}

func TestValidateVirtio(t *testing.T) {
	c := Config{Kernel: "k", CPUs: 1, Memory: 64 << 20, PSCI: runsummary.PSCIAuto, OnReset: ResetExit, RNG: true}
	for range VirtioMax - 1 {
		c.Disks = append(c.Disks, Disk{Path: "d"})
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("%d devices: %v", VirtioMax, err)
	}
	c.Nets = []NetDevice{{Tap: "t"}}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "more than the 32") {
		t.Errorf("%d devices: %v, want a window error", VirtioMax+1, err)
	}
	c.Disks = nil
	c.Nets = []NetDevice{{Tap: "t"}, {Tap: "t"}}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("the same tap twice: %v", err)
	}
}
