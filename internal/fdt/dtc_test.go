package fdt

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// dtcPath finds dtc (Debian package device-tree-compiler). The dtc tests are
// the independent check that our blobs mean what we think, so a missing dtc
// is a failure, not a skip: CI installs it.
func dtcPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("dtc")
	if err != nil {
		t.Fatalf("dtc not found (install device-tree-compiler): %v", err)
	}
	return p
}

// decompile runs `dtc -I dtb -O dts` on blob and returns the decoded tree
// as path -> property -> raw value bytes, plus dtc's warnings (stderr).
func decompile(t *testing.T, blob []byte) (map[string]map[string][]byte, string) {
	t.Helper()
	dtc := dtcPath(t)
	in := filepath.Join(t.TempDir(), "t.dtb")
	if err := os.WriteFile(in, blob, 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(dtc, "-I", "dtb", "-O", "dts", in)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("dtc -I dtb -O dts failed: %v\n%s", err, stderr.String())
	}
	tree, err := parseDTS(stdout.String())
	if err != nil {
		t.Fatalf("reading dtc output: %v\n%s", err, stdout.String())
	}
	return tree, stderr.String()
}

// parseDTS reads the subset of DTS that `dtc -O dts` emits for a blob
// (no labels, no references, no includes) into path -> property -> bytes.
func parseDTS(src string) (map[string]map[string][]byte, error) {
	out := map[string]map[string][]byte{}
	var stack []string
	path := func() string {
		if len(stack) <= 1 {
			return "/"
		}
		return "/" + strings.Join(stack[1:], "/")
	}
	for i, line := range strings.Split(src, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || line == "/dts-v1/;" || strings.HasPrefix(line, "/memreserve/"):
		case strings.HasSuffix(line, " {"):
			name := strings.TrimSuffix(line, " {")
			if name == "/" {
				name = ""
			}
			stack = append(stack, name)
			if out[path()] == nil {
				out[path()] = map[string][]byte{}
			}
		case line == "};":
			if len(stack) == 0 {
				return nil, fmt.Errorf("line %d: unbalanced };", i+1)
			}
			stack = stack[:len(stack)-1]
		case strings.HasSuffix(line, ";"):
			if len(stack) == 0 {
				return nil, fmt.Errorf("line %d: property outside a node", i+1)
			}
			body := strings.TrimSuffix(line, ";")
			name, val, hasVal := strings.Cut(body, " = ")
			var v []byte
			if hasVal {
				var err error
				if v, err = dtsValue(val); err != nil {
					return nil, fmt.Errorf("line %d: %v", i+1, err)
				}
			}
			out[path()][name] = v
		default:
			return nil, fmt.Errorf("line %d: cannot read %q", i+1, line)
		}
	}
	if len(stack) != 0 {
		return nil, fmt.Errorf("unclosed node %s", path())
	}
	return out, nil
}

// dtsValue converts a DTS property value (comma-separated <cells>, [bytes]
// and "strings") back to the bytes a blob stores.
func dtsValue(s string) ([]byte, error) {
	var out []byte
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		switch s[0] {
		case '<':
			end := strings.IndexByte(s, '>')
			if end < 0 {
				return nil, fmt.Errorf("unterminated <> in %q", s)
			}
			for _, f := range strings.Fields(s[1:end]) {
				c, err := strconv.ParseUint(f, 0, 32)
				if err != nil {
					return nil, fmt.Errorf("cell %q: %v", f, err)
				}
				out = binary.BigEndian.AppendUint32(out, uint32(c))
			}
			s = s[end+1:]
		case '[':
			end := strings.IndexByte(s, ']')
			if end < 0 {
				return nil, fmt.Errorf("unterminated [] in %q", s)
			}
			for _, f := range strings.Fields(s[1:end]) {
				c, err := strconv.ParseUint(f, 16, 8)
				if err != nil {
					return nil, fmt.Errorf("byte %q: %v", f, err)
				}
				out = append(out, byte(c))
			}
			s = s[end+1:]
		case '"':
			i := 1
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] != '\\' {
					out = append(out, s[i])
					continue
				}
				i++
				if i >= len(s) {
					return nil, fmt.Errorf("dangling backslash in %q", s)
				}
				switch s[i] {
				case '0':
					out = append(out, 0)
				case 'n':
					out = append(out, '\n')
				case 't':
					out = append(out, '\t')
				case 'r':
					out = append(out, '\r')
				case 'x':
					if i+2 >= len(s) {
						return nil, fmt.Errorf("short \\x escape in %q", s)
					}
					c, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
					if err != nil {
						return nil, fmt.Errorf("escape in %q: %v", s, err)
					}
					out = append(out, byte(c))
					i += 2
				default:
					out = append(out, s[i])
				}
			}
			if i >= len(s) {
				return nil, fmt.Errorf("unterminated string in %q", s)
			}
			out = append(out, 0)
			s = s[i+1:]
		default:
			return nil, fmt.Errorf("unexpected %q", s)
		}
		s = strings.TrimSpace(s)
		if strings.HasPrefix(s, ",") {
			s = s[1:]
		}
	}
	return out, nil
}

func TestDTCReadsOurBlob(t *testing.T) {
	want := sampleTree()
	blob := mustBuild(t, want)
	got, warnings := decompile(t, blob)
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
	dtc := dtcPath(t)
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
