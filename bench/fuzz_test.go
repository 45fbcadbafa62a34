package bench

import (
	"strings"
	"testing"
)

// FuzzParseVariant: any input either parses into a valid name and known
// keys whose values apply or are rejected by Apply with an error, or is
// rejected with an error; never a panic. A parsed spec re-joined from its
// pairs parses to the same pairs.
func FuzzParseVariant(f *testing.F) {
	for _, s := range []string{
		"B", "B:kernel=Image", "A':cmdline-append=cpuhp.parallel=0,label=serial",
		"B:cmdline=console=ttyS0 earlycon=uart8250,mmio,0x09000000,cpus=1,4,8",
		"B:cpus=4,frob=1", "x:memory=1G,psci=user", ":", "B:,", "B:=", "B:kernel=a,b,c=d",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		v, err := ParseVariant(spec)
		if err != nil {
			if v.Name != "" || v.Overrides != nil {
				t.Fatalf("ParseVariant(%q) returned %+v with error %v", spec, v, err)
			}
			return
		}
		if err := checkVariantName(v.Name); err != nil {
			t.Fatalf("ParseVariant(%q) accepted name %q: %v", spec, v.Name, err)
		}
		seen := map[string]bool{}
		parts := make([]string, 0, len(v.Overrides))
		for _, o := range v.Overrides {
			if !isKey(o.Key) || seen[o.Key] {
				t.Fatalf("ParseVariant(%q): bad or repeated key %q", spec, o.Key)
			}
			seen[o.Key] = true
			parts = append(parts, o.Key+"="+o.Value)
		}
		// Applying may reject values, but must not panic.
		_, _ = Apply(baseSettings(), v.Overrides)
		if len(parts) == 0 {
			return
		}
		again, err := ParseVariant(v.Name + ":" + strings.Join(parts, ","))
		if err != nil {
			t.Fatalf("re-parse of %q: %v", spec, err)
		}
		if len(again.Overrides) != len(v.Overrides) {
			t.Fatalf("re-parse of %q: %+v, first %+v", spec, again.Overrides, v.Overrides)
		}
		for i := range again.Overrides {
			if again.Overrides[i] != v.Overrides[i] {
				t.Fatalf("re-parse of %q: %+v, first %+v", spec, again.Overrides, v.Overrides)
			}
		}
	})
}
