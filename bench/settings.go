package bench

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/mvm-dev/mvm/runsummary"
)

// BaselineName is the name of the variant the plain flags define.
const BaselineName = "A"

// Keys a --variant may set. Each overrides the mvm run flag of the same
// name, except cmdline-append, which adds to the baseline's command line
// instead of replacing anything, and label, which only names the column.
const (
	KeyKernel        = "kernel"
	KeyInitrd        = "initrd"
	KeyCmdline       = "cmdline"
	KeyAppend        = "append"
	KeyCmdlineAppend = "cmdline-append"
	KeyCPUs          = "cpus"
	KeyMemory        = "memory"
	KeyPSCI          = "psci"
	KeyLabel         = "label"
)

// Keys lists the variant keys in the order the help text shows them.
func Keys() []string {
	return []string{KeyKernel, KeyInitrd, KeyCmdline, KeyCmdlineAppend, KeyAppend, KeyCPUs, KeyMemory, KeyPSCI, KeyLabel}
}

// freeTextKey reports whether a key's value is free text that may itself
// contain commas (kernel command lines do: earlycon=uart8250,mmio,0x...).
func freeTextKey(k string) bool {
	switch k {
	case KeyCmdline, KeyAppend, KeyCmdlineAppend, KeyLabel:
		return true
	}
	return false
}

// Settings are the parts of a boot that variants may differ in. The other
// mvm run flags (--marker, --log-level, ...) are the same for every variant.
type Settings struct {
	Kernel  string `json:"kernel"`
	Initrd  string `json:"initrd,omitempty"`
	Cmdline string `json:"cmdline"`
	// Append is mvm run's --append; CmdlineAppend is what a variant adds
	// after it (cmdline-append=...).
	Append        string `json:"append,omitempty"`
	CmdlineAppend string `json:"cmdline_append,omitempty"`
	CPUs          []int  `json:"cpus"`
	Memory        string `json:"memory"`
	PSCI          string `json:"psci"`
	// Label describes the variant in the table header ("7.3-rc2").
	Label string `json:"label,omitempty"`
}

// Override is one KEY=VALUE of a --variant.
type Override struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Variant is one column of the comparison: the baseline's settings with
// some overridden.
type Variant struct {
	Name      string     `json:"name"`
	Overrides []Override `json:"overrides,omitempty"`
	Settings  Settings   `json:"settings"`
}

// VariantSpec is a parsed --variant flag before it is applied.
type VariantSpec struct {
	Name      string
	Overrides []Override
}

// ParseVariant parses NAME[:KEY=VALUE[,KEY=VALUE...]]. Values of cmdline,
// append, cmdline-append and label may contain commas: a comma starts a new
// pair only when a known key and "=" follow it. A vCPU list (cpus=1,4,8)
// keeps its commas too. To put ",KEY=" itself into a command line, give
// that key in a second --variant flag with the same name.
func ParseVariant(spec string) (VariantSpec, error) {
	name, rest, _ := strings.Cut(spec, ":")
	name = strings.TrimSpace(name)
	if err := checkVariantName(name); err != nil {
		return VariantSpec{}, fmt.Errorf("--variant %q: %w", spec, err)
	}
	v := VariantSpec{Name: name}
	if strings.TrimSpace(rest) == "" {
		// A variant that overrides nothing is a copy of the baseline: most
		// likely the keys were forgotten. An A/A run says so with a label.
		return VariantSpec{}, fmt.Errorf("--variant %q: no KEY=VALUE given: use %s:KEY=VALUE,... (keys: %s; an A/A run: %s:label=again)",
			spec, name, strings.Join(Keys(), ", "), name)
	}
	seen := map[string]bool{}
	for _, seg := range strings.Split(rest, ",") {
		key, val, hasEq := strings.Cut(seg, "=")
		key = strings.TrimSpace(key)
		if hasEq && isKey(key) {
			if seen[key] {
				return VariantSpec{}, fmt.Errorf("--variant %q: key %s given twice", spec, key)
			}
			seen[key] = true
			v.Overrides = append(v.Overrides, Override{Key: key, Value: strings.TrimSpace(val)})
			continue
		}
		if n := len(v.Overrides); n > 0 && continues(v.Overrides[n-1].Key, seg, hasEq) {
			v.Overrides[n-1].Value += "," + strings.TrimRight(seg, " ")
			continue
		}
		if hasEq {
			return VariantSpec{}, fmt.Errorf("--variant %q: unknown key %q (known keys: %s)", spec, key, strings.Join(Keys(), ", "))
		}
		return VariantSpec{}, fmt.Errorf("--variant %q: %q is not KEY=VALUE (known keys: %s)", spec, strings.TrimSpace(seg), strings.Join(Keys(), ", "))
	}
	return v, nil
}

// continues reports whether a comma-separated segment that does not start a
// known key belongs to the previous key's value.
func continues(prevKey, seg string, hasEq bool) bool {
	switch {
	case freeTextKey(prevKey):
		return true
	case prevKey == KeyCPUs:
		_, err := strconv.Atoi(strings.TrimSpace(seg))
		return err == nil
	case prevKey == KeyKernel || prevKey == KeyInitrd:
		// A path with a comma; "x=y" after a path is far more likely a
		// mistyped key than part of a file name.
		return !hasEq
	}
	return false
}

func isKey(k string) bool { return slices.Contains(Keys(), k) }

// checkVariantName keeps names usable as table headers and as the value of
// a Go benchmark name key (no '/', '=', spaces; benchstat splits on those).
func checkVariantName(name string) error {
	if name == "" {
		return errors.New("empty variant name: use NAME:KEY=VALUE,... e.g. B:cmdline-append=cpuhp.parallel=0")
	}
	if len(name) > 32 {
		return fmt.Errorf("variant name %q is longer than 32 characters", name)
	}
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_.'+-", r)
		if !ok {
			return fmt.Errorf("variant name %q: use letters, digits and _ . ' + - only", name)
		}
	}
	return nil
}

// Apply returns base with the overrides applied, checking each value.
func Apply(base Settings, ovs []Override) (Settings, error) {
	s := base
	s.CPUs = slices.Clone(base.CPUs)
	s.Label = ""
	for _, o := range ovs {
		switch o.Key {
		case KeyKernel:
			if o.Value == "" {
				return s, errors.New("kernel= needs a path")
			}
			s.Kernel = o.Value
		case KeyInitrd:
			s.Initrd = o.Value // empty: boot without an initrd
		case KeyCmdline:
			s.Cmdline = o.Value
		case KeyAppend:
			s.Append = o.Value
		case KeyCmdlineAppend:
			s.CmdlineAppend = joinWords(s.CmdlineAppend, o.Value)
		case KeyCPUs:
			cpus, err := ParseCPUList(o.Value)
			if err != nil {
				return s, fmt.Errorf("cpus=%s: %w", o.Value, err)
			}
			s.CPUs = cpus
		case KeyMemory:
			if _, err := runsummary.ParseSize(o.Value); err != nil {
				return s, fmt.Errorf("memory=%s: %w", o.Value, err)
			}
			s.Memory = o.Value
		case KeyPSCI:
			if _, err := runsummary.ParsePSCIMode(o.Value); err != nil {
				return s, fmt.Errorf("psci=%s: %w", o.Value, err)
			}
			s.PSCI = o.Value
		case KeyLabel:
			s.Label = o.Value
		default:
			return s, fmt.Errorf("unknown key %q (known keys: %s)", o.Key, strings.Join(Keys(), ", "))
		}
	}
	return s, nil
}

// ParseCPUList parses a comma-separated list of vCPU counts ("1,4,8") into
// ascending order.
func ParseCPUList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not a vCPU count: use a list like 1,4,8", f)
		}
		if n < 1 || n > runsummary.MaxCPUs {
			return nil, fmt.Errorf("%d vCPUs: use 1 to %d", n, runsummary.MaxCPUs)
		}
		if slices.Contains(out, n) {
			return nil, fmt.Errorf("%d vCPUs listed twice", n)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}

// FormatCPUList is the inverse of ParseCPUList.
func FormatCPUList(cpus []int) string {
	s := make([]string, len(cpus))
	for i, n := range cpus {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// BuildVariants applies the --variant specs to the baseline. Specs with
// the same name merge, later keys winning, so a value that cannot be
// written in one flag can be given in another. It checks the overrides'
// syntax, not the baseline: mvm bench checks every variant's whole mvm run
// command line, the baseline's too, the way mvm run does before the first
// boot.
func BuildVariants(base Settings, specs []VariantSpec) ([]Variant, error) {
	vs := []Variant{{Name: BaselineName, Settings: base}}
	index := map[string]int{}
	for _, sp := range specs {
		if sp.Name == BaselineName {
			return nil, fmt.Errorf("--variant %s: %s is the baseline the plain flags define; give the variant another name", sp.Name, BaselineName)
		}
		i, ok := index[sp.Name]
		if !ok {
			i = len(vs)
			index[sp.Name] = i
			vs = append(vs, Variant{Name: sp.Name})
		}
		vs[i].Overrides = mergeOverrides(vs[i].Overrides, sp.Overrides)
	}
	for i := 1; i < len(vs); i++ {
		s, err := Apply(base, vs[i].Overrides)
		if err != nil {
			return nil, fmt.Errorf("--variant %s: %w", vs[i].Name, err)
		}
		vs[i].Settings = s
	}
	return vs, nil
}

func mergeOverrides(old, add []Override) []Override {
	out := slices.Clone(old)
	for _, o := range add {
		if i := slices.IndexFunc(out, func(x Override) bool { return x.Key == o.Key }); i >= 0 && o.Key != KeyCmdlineAppend {
			out[i] = o
			continue
		}
		out = append(out, o)
	}
	return out
}

// Rows is the union of the variants' vCPU counts, ascending: one table row
// each.
func Rows(vs []Variant) []int {
	var rows []int
	for _, v := range vs {
		for _, n := range v.Settings.CPUs {
			if !slices.Contains(rows, n) {
				rows = append(rows, n)
			}
		}
	}
	slices.Sort(rows)
	return rows
}

// RunArgs is the mvm command line (without the program name) that boots
// settings s on cpus vCPUs. quiet adds the kernel parameter "quiet" unless
// the command line already has it: console output costs two UART exits a
// character and would dominate small boots.
func RunArgs(s Settings, cpus int, quiet bool) []string {
	args := []string{"run", "--kernel", s.Kernel}
	if s.Initrd != "" {
		args = append(args, "--initrd", s.Initrd)
	}
	app := joinWords(s.Append, s.CmdlineAppend)
	if quiet && !s.hasQuiet() {
		app = joinWords(app, "quiet")
	}
	args = append(args, "--cmdline", s.Cmdline)
	if app != "" {
		args = append(args, "--append", app)
	}
	return append(args, "--cpus", strconv.Itoa(cpus), "--memory", s.Memory, "--psci", s.PSCI)
}

func joinWords(a, b string) string {
	return strings.TrimSpace(strings.TrimSpace(a) + " " + strings.TrimSpace(b))
}

// Describe renders a variant for the output's header: the baseline as its
// settings, the others as their overrides.
// hasQuiet: the settings' own command line already says "quiet", so
// RunArgs adds nothing.
func (s Settings) hasQuiet() bool {
	return slices.Contains(strings.Fields(s.Cmdline+" "+s.Append+" "+s.CmdlineAppend), "quiet")
}

func (v Variant) Describe() string {
	if len(v.Overrides) == 0 {
		if v.Name == BaselineName {
			return describeSettings(v.Settings)
		}
		return "same as " + BaselineName
	}
	parts := make([]string, 0, len(v.Overrides))
	for _, o := range v.Overrides {
		if o.Key == KeyLabel {
			continue
		}
		parts = append(parts, o.Key+"="+o.Value)
	}
	if len(parts) == 0 {
		return "same as " + BaselineName
	}
	return BaselineName + " with " + strings.Join(parts, ", ")
}

func describeSettings(s Settings) string {
	var b strings.Builder
	fmt.Fprintf(&b, "kernel=%s", s.Kernel)
	if s.Initrd != "" {
		fmt.Fprintf(&b, " initrd=%s", s.Initrd)
	}
	fmt.Fprintf(&b, " memory=%s psci=%s cmdline=%q", s.Memory, s.PSCI, s.Cmdline)
	if s.Append != "" {
		fmt.Fprintf(&b, " append=%q", s.Append)
	}
	return b.String()
}
