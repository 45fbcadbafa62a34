package bench

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

func baseSettings() Settings {
	return Settings{
		Kernel: "Image", Initrd: "initrd.gz", Cmdline: "console=ttyS0 earlycon=uart8250,mmio,0x09000000",
		CPUs: []int{1}, Memory: "512M", PSCI: "auto",
	}
}

func TestParseVariant(t *testing.T) {
	cases := []struct {
		spec string
		want VariantSpec
	}{
		{"B:kernel=Image.new", VariantSpec{"B", []Override{{"kernel", "Image.new"}}}},
		{"A':cmdline-append=cpuhp.parallel=0,label=serial", VariantSpec{"A'", []Override{{"cmdline-append", "cpuhp.parallel=0"}, {"label", "serial"}}}},
		// A command line keeps its commas; a known key after a comma starts a new pair.
		{"B:cmdline=console=ttyS0 earlycon=uart8250,mmio,0x09000000 quiet,cpus=4",
			VariantSpec{"B", []Override{{"cmdline", "console=ttyS0 earlycon=uart8250,mmio,0x09000000 quiet"}, {"cpus", "4"}}}},
		{"B:cpus=1,4,8,memory=1G", VariantSpec{"B", []Override{{"cpus", "1,4,8"}, {"memory", "1G"}}}},
		{"B: cpus = 2 , psci=user", VariantSpec{"B", []Override{{"cpus", "2"}, {"psci", "user"}}}},
		{"fast-1:kernel=/a,b/Image", VariantSpec{"fast-1", []Override{{"kernel", "/a,b/Image"}}}},
		{"B:initrd=", VariantSpec{"B", []Override{{"initrd", ""}}}},
	}
	for _, c := range cases {
		got, err := ParseVariant(c.spec)
		if err != nil {
			t.Errorf("ParseVariant(%q): %v", c.spec, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("ParseVariant(%q) = %+v, want %+v", c.spec, got, c.want)
		}
	}
}

func TestParseVariantErrors(t *testing.T) {
	cases := []struct{ spec, want string }{
		{"", "empty variant name"},
		{":kernel=x", "empty variant name"},
		{"B C:kernel=x", "letters, digits"},
		{"B/1:kernel=x", "letters, digits"},
		{"B:frobnicate=1", `unknown key "frobnicate"`},
		{"B:cpus=4,frobnicate=1", `unknown key "frobnicate"`},
		{"B:kernel=x,bogus=1", `unknown key "bogus"`},
		{"B:memory=1G,2G", `"2G" is not KEY=VALUE`},
		{"B:kernel", `"kernel" is not KEY=VALUE`},
		{"B:cpus=1,cpus=2", "given twice"},
		// Failed before the fix: a name alone was taken as a variant that
		// overrides nothing, a silent copy of the baseline.
		{"B", "no KEY=VALUE given"},
		{"B:", "no KEY=VALUE given"},
		{"B: ", "no KEY=VALUE given"},
		{strings.Repeat("x", 33), "longer than 32"},
	}
	for _, c := range cases {
		_, err := ParseVariant(c.spec)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseVariant(%q) error %v, want one mentioning %q", c.spec, err, c.want)
		}
	}
}

func TestApply(t *testing.T) {
	base := baseSettings()
	base.Append = "rdinit=/init"
	base.Label = "base label"
	s, err := Apply(base, []Override{
		{"cmdline-append", "mvm.delay_ms=3000"}, {"cpus", "8,2"}, {"memory", "1G"}, {"psci", "kernel"}, {"label", "slow"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.Append != "rdinit=/init" || s.CmdlineAppend != "mvm.delay_ms=3000" {
		t.Errorf("append %q, cmdline-append %q", s.Append, s.CmdlineAppend)
	}
	if !slices.Equal(s.CPUs, []int{2, 8}) || s.Memory != "1G" || s.PSCI != "kernel" || s.Label != "slow" {
		t.Errorf("got %+v", s)
	}
	if !slices.Equal(base.CPUs, []int{1}) {
		t.Errorf("Apply changed the base's CPUs: %v", base.CPUs)
	}
	s, _ = Apply(base, nil)
	if s.Label != "" {
		t.Errorf("a variant inherited A's label %q", s.Label)
	}
	for _, bad := range []Override{{"memory", "lots"}, {"psci", "maybe"}, {"cpus", "0"}, {"cpus", "1,1"}, {"cpus", "513"}, {"kernel", ""}, {"nope", "1"}} {
		if _, err := Apply(base, []Override{bad}); err == nil {
			t.Errorf("Apply(%+v) succeeded", bad)
		}
	}
}

func TestBuildVariants(t *testing.T) {
	base := baseSettings()
	specs := []VariantSpec{
		{"B", []Override{{"cmdline", "a,b"}}},
		{"C", []Override{{"cpus", "2"}}},
		{"B", []Override{{"cpus", "4"}, {"cmdline", "c"}}}, // merges into B, later wins
	}
	vs, err := BuildVariants(base, specs)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 3 || vs[0].Name != "A" || vs[1].Name != "B" || vs[2].Name != "C" {
		t.Fatalf("variants %+v", vs)
	}
	if vs[1].Settings.Cmdline != "c" || !slices.Equal(vs[1].Settings.CPUs, []int{4}) {
		t.Errorf("B = %+v", vs[1].Settings)
	}
	if got := Rows(vs); !slices.Equal(got, []int{1, 2, 4}) {
		t.Errorf("Rows = %v", got)
	}
	if _, err := BuildVariants(base, []VariantSpec{{"A", nil}}); err == nil || !strings.Contains(err.Error(), "baseline") {
		t.Errorf("a variant named A: %v", err)
	}
	if _, err := BuildVariants(base, []VariantSpec{{"B", []Override{{"memory", "x"}}}}); err == nil || !strings.Contains(err.Error(), "--variant B") {
		t.Errorf("bad memory: %v", err)
	}
}

func TestParseCPUList(t *testing.T) {
	got, err := ParseCPUList("8, 1,4")
	if err != nil || !slices.Equal(got, []int{1, 4, 8}) {
		t.Errorf("got %v, %v", got, err)
	}
	if FormatCPUList(got) != "1,4,8" {
		t.Errorf("FormatCPUList = %q", FormatCPUList(got))
	}
	for _, bad := range []string{"", "0", "-1", "x", "1,,2", "2,2", "1000"} {
		if _, err := ParseCPUList(bad); err == nil {
			t.Errorf("ParseCPUList(%q) succeeded", bad)
		}
	}
}

func TestRunArgs(t *testing.T) {
	s := baseSettings()
	s.Append = "rdinit=/init"
	s.CmdlineAppend = "mvm.delay_ms=5"
	got := RunArgs(s, 4, true)
	want := []string{"run", "--kernel", "Image", "--initrd", "initrd.gz",
		"--cmdline", "console=ttyS0 earlycon=uart8250,mmio,0x09000000",
		"--append", "rdinit=/init mvm.delay_ms=5 quiet",
		"--cpus", "4", "--memory", "512M", "--psci", "auto"}
	if !slices.Equal(got, want) {
		t.Errorf("RunArgs =\n%q\nwant\n%q", got, want)
	}
	// quiet is not added twice, nor when not asked for.
	s.Cmdline += " quiet"
	if a := strings.Join(RunArgs(s, 1, true), " "); strings.Count(a, "quiet") != 1 {
		t.Errorf("quiet twice: %s", a)
	}
	s = baseSettings()
	s.Initrd = ""
	a := RunArgs(s, 1, false)
	if slices.Contains(a, "--initrd") || slices.Contains(a, "--append") {
		t.Errorf("RunArgs without initrd/append: %q", a)
	}
}

func TestDescribeVariant(t *testing.T) {
	vs, err := BuildVariants(baseSettings(), []VariantSpec{{"B", []Override{{"kernel", "new"}, {"label", "x"}}}, {"A2", nil}})
	if err != nil {
		t.Fatal(err)
	}
	if d := vs[0].Describe(); !strings.Contains(d, "kernel=Image") || !strings.Contains(d, "memory=512M") {
		t.Errorf("A: %s", d)
	}
	if d := vs[1].Describe(); d != "A with kernel=new" {
		t.Errorf("B: %s", d)
	}
	if d := vs[2].Describe(); d != "same as A" {
		t.Errorf("A2: %s", d)
	}
}
