// Package fdttest decompiles device tree blobs with dtc, for tests that
// check a blob independently of mvm's own FDT parser: dtc (Debian package
// device-tree-compiler) turns the blob into DTS and ParseDTS reads that
// back as path -> property -> the bytes the blob holds.
package fdttest

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

// DTC finds dtc (Debian package device-tree-compiler). The dtc tests are
// the independent check that our blobs mean what we think, so a missing dtc
// is a failure, not a skip: CI installs it.
func DTC(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("dtc")
	if err != nil {
		t.Fatalf("dtc not found (install device-tree-compiler): %v", err)
	}
	return p
}

// Decompile runs `dtc -I dtb -O dts` on blob and returns the decoded tree
// as path -> property -> raw value bytes, plus dtc's warnings (stderr).
func Decompile(t testing.TB, blob []byte) (map[string]map[string][]byte, string) {
	t.Helper()
	dtc := DTC(t)
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
	tree, err := ParseDTS(stdout.String())
	if err != nil {
		t.Fatalf("reading dtc output: %v\n%s", err, stdout.String())
	}
	return tree, stderr.String()
}

// ParseDTS reads the subset of DTS that `dtc -O dts` emits for a blob
// (no labels, no references, no includes) into path -> property -> bytes.
func ParseDTS(src string) (map[string]map[string][]byte, error) {
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
