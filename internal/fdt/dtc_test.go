package fdt

import (
	"bytes"
	"fmt"
	"github.com/mvm-dev/mvm/internal/fdt/fdttest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestDTCReadsOurBlob(t *testing.T) {
	want := sampleTree()
	blob := mustBuild(t, want)
	got, warnings := fdttest.Decompile(t, blob)
	if warnings != "" {
		t.Errorf("dtc warnings:\n%s", warnings)
	}
	// Every node and property we wrote must come back from dtc with the
	// same bytes, and nothing else may appear.
	wantFlat := map[string]map[string][]byte{}
	flatten(want, "", wantFlat)
	if len(got) != len(wantFlat) {
		t.Errorf("dtc shows %d nodes, want %d", len(got), len(wantFlat))
	}
	for path, props := range wantFlat {
		gp, ok := got[path]
		if !ok {
			t.Errorf("dtc output lacks node %s", path)
			continue
		}
		if len(gp) != len(props) {
			t.Errorf("%s: dtc shows %d properties, want %d", path, len(gp), len(props))
		}
		for name, v := range props {
			gv, ok := gp[name]
			if !ok {
				t.Errorf("%s: dtc output lacks property %s", path, name)
				continue
			}
			if !bytes.Equal(gv, v) {
				t.Errorf("%s %s: dtc value % x, want % x", path, name, gv, v)
			}
		}
	}
}

func flatten(n *Node, parent string, out map[string]map[string][]byte) {
	path := "/"
	if n.Name != "" {
		path = strings.TrimSuffix(parent, "/") + "/" + n.Name
	}
	props := map[string][]byte{}
	for _, p := range n.Props {
		props[p.Name] = p.Value
	}
	out[path] = props
	for _, c := range n.Children {
		flatten(c, path, out)
	}
}

// TestParseDTCBlob goes the other way: dtc compiles source we wrote by
// hand, and Parse must read dtc's blob (which uses suffix-merged strings
// and its own layout) correctly.
func TestParseDTCBlob(t *testing.T) {
	dtc := fdttest.DTC(t)
	src := `/dts-v1/;
/memreserve/ 0x40000000 0x1000;
/ {
	#address-cells = <2>;
	#size-cells = <2>;
	compatible = "linux,dummy-virt";
	cells = <1 2 0xffffffff>;
	big = /bits/ 64 <0x1122334455667788>;
	bytes = [de ad be ef 01];
	list = "arm,psci-1.0", "arm,psci-0.2";
	flag;
	intc: intc@8000000 {
		phandle = <1>;
		interrupt-controller;
		size-cells = <3>;
		reg = <0 0x8000000 0 0x10000>;
	};
	chosen {
		bootargs = "console=ttyS0 quiet";
	};
};
`
	dir := t.TempDir()
	in, out := filepath.Join(dir, "t.dts"), filepath.Join(dir, "t.dtb")
	if err := os.WriteFile(in, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command(dtc, "-I", "dts", "-O", "dtb", "-o", out, in).CombinedOutput(); err != nil {
		t.Fatalf("dtc: %v\n%s", err, b)
	}
	blob, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	tree, err := Parse(blob)
	if err != nil {
		t.Fatalf("Parse(dtc blob): %v", err)
	}
	if len(tree.Reservations) != 1 || tree.Reservations[0] != (Reservation{0x40000000, 0x1000}) {
		t.Errorf("reservations = %+v", tree.Reservations)
	}
	root := tree.Root
	if v, _ := root.Prop("#address-cells").U32(); v != 2 {
		t.Errorf("#address-cells = %d", v)
	}
	if c, _ := root.Prop("cells").Cells(); fmt.Sprint(c) != "[1 2 4294967295]" {
		t.Errorf("cells = %v", c)
	}
	if v, _ := root.Prop("big").U64(); v != 0x1122334455667788 {
		t.Errorf("big = %#x", v)
	}
	if !bytes.Equal(root.Prop("bytes").Value, []byte{0xde, 0xad, 0xbe, 0xef, 1}) {
		t.Errorf("bytes = % x", root.Prop("bytes").Value)
	}
	if l, _ := root.Prop("list").Strings(); fmt.Sprint(l) != "[arm,psci-1.0 arm,psci-0.2]" {
		t.Errorf("list = %q", l)
	}
	if p := root.Prop("flag"); p == nil || len(p.Value) != 0 {
		t.Errorf("flag = %+v", p)
	}
	// "size-cells" is a suffix of "#size-cells": dtc may share the bytes.
	if v, _ := tree.Lookup("/intc@8000000").Prop("size-cells").U32(); v != 3 {
		t.Errorf("size-cells = %d", v)
	}
	if r, _ := tree.Lookup("/intc@8000000").Prop("reg").U64s(); fmt.Sprint(r) != "[134217728 65536]" {
		t.Errorf("reg = %v", r)
	}
	if s, _ := tree.Lookup("/chosen").Prop("bootargs").Str(); s != "console=ttyS0 quiet" {
		t.Errorf("bootargs = %q", s)
	}
}
