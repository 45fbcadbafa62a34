package fdt

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

// sampleTree exercises every kind of value the Builder writes.
func sampleTree() *Node {
	return &Node{
		Props: []Property{
			{"#address-cells", u32(2)},
			{"#size-cells", u32(2)},
			{"compatible", []byte("linux,dummy-virt\x00")},
			{"interrupt-parent", u32(1)},
		},
		Children: []*Node{
			{Name: "chosen", Props: []Property{
				{"bootargs", []byte("console=ttyS0 earlycon quiet\x00")},
				{"linux,initrd-start", u64(0x48000000)},
				{"linux,initrd-end", u64(0x48123456)},
			}},
			{Name: "cpus", Props: []Property{
				{"#address-cells", u32(2)},
				{"#size-cells", u32(0)},
			}, Children: []*Node{
				{Name: "cpu@0", Props: []Property{{"reg", u64(0)}, {"enable-method", []byte("psci\x00")}}},
				{Name: "cpu@ff00000100", Props: []Property{{"reg", u64(0xff00000100)}, {"enable-method", []byte("psci\x00")}}},
			}},
			{Name: "intc@8000000", Props: []Property{
				{"compatible", []byte("arm,gic-v3\x00")},
				{"#interrupt-cells", u32(3)},
				{"#address-cells", u32(0)},
				{"interrupt-controller", nil},
				{"reg", append(u64(0x8000000), u64(0x10000)...)},
				{"phandle", u32(1)},
				{"odd", []byte{1, 2, 3, 4, 5}},
				{"x?y+z.w_v#", []byte{0xff}},
			}},
		},
	}
}

func u32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// writeTree replays a tree into a Builder.
func writeTree(b *Builder, n *Node) {
	b.BeginNode(n.Name)
	for _, p := range n.Props {
		b.PropBytes(p.Name, p.Value)
	}
	for _, c := range n.Children {
		writeTree(b, c)
	}
	b.EndNode()
}

func mustBuild(t testing.TB, root *Node) []byte {
	t.Helper()
	b := NewBuilder()
	writeTree(b, root)
	blob, err := b.Finish()
	if err != nil {
		t.Fatalf("Finish: %v", err)
	}
	return blob
}

// equalNodes compares trees, treating nil and empty values as equal.
func equalNodes(a, b *Node) bool {
	if a.Name != b.Name || len(a.Props) != len(b.Props) || len(a.Children) != len(b.Children) {
		return false
	}
	for i := range a.Props {
		if a.Props[i].Name != b.Props[i].Name || !bytes.Equal(a.Props[i].Value, b.Props[i].Value) {
			return false
		}
	}
	for i := range a.Children {
		if !equalNodes(a.Children[i], b.Children[i]) {
			return false
		}
	}
	return true
}

func TestRoundTrip(t *testing.T) {
	want := sampleTree()
	blob := mustBuild(t, want)
	tree, err := Parse(blob)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if !equalNodes(tree.Root, want) {
		t.Errorf("round trip changed the tree")
	}
	h := tree.Header
	if h.Magic != 0xd00dfeed || h.Version != 17 || h.LastCompVersion != 16 {
		t.Errorf("header magic/version = %#x/%d/%d", h.Magic, h.Version, h.LastCompVersion)
	}
	if int(h.TotalSize) != len(blob) {
		t.Errorf("totalsize %d, blob %d bytes", h.TotalSize, len(blob))
	}
	if h.OffMemRsvmap%8 != 0 || h.OffDTStruct%4 != 0 {
		t.Errorf("misaligned blocks: rsvmap %d struct %d", h.OffMemRsvmap, h.OffDTStruct)
	}
	if len(tree.Reservations) != 0 {
		t.Errorf("reservations = %v, want none", tree.Reservations)
	}
	if tree.Lookup("/cpus/cpu@ff00000100") == nil || tree.Lookup("/nope") != nil || tree.Lookup("/") != tree.Root {
		t.Errorf("Lookup misbehaves")
	}
}

func TestTypedProps(t *testing.T) {
	b := NewBuilder()
	b.SetBootCPU(7)
	b.BeginNode("")
	b.PropU32("a", 0xdeadbeef)
	b.PropU64("b", 0x0102030405060708)
	b.PropCells("c", 0, 13, 0xf04)
	b.PropU64s("d", 1, 2, 3)
	b.PropString("e", "hello")
	b.PropStrings("f", "arm,psci-1.0", "arm,psci-0.2")
	b.PropEmpty("g")
	b.PropBytes("h", []byte{9})
	b.PropCells("i")
	b.EndNode()
	blob, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	tree, err := Parse(blob)
	if err != nil {
		t.Fatal(err)
	}
	if tree.Header.BootCPUIDPhys != 7 {
		t.Errorf("boot_cpuid_phys = %d", tree.Header.BootCPUIDPhys)
	}
	r := tree.Root
	if v, err := r.Prop("a").U32(); err != nil || v != 0xdeadbeef {
		t.Errorf("a = %#x, %v", v, err)
	}
	if v, err := r.Prop("b").U64(); err != nil || v != 0x0102030405060708 {
		t.Errorf("b = %#x, %v", v, err)
	}
	if v, err := r.Prop("c").Cells(); err != nil || len(v) != 3 || v[2] != 0xf04 {
		t.Errorf("c = %v, %v", v, err)
	}
	if v, err := r.Prop("d").U64s(); err != nil || len(v) != 3 || v[2] != 3 {
		t.Errorf("d = %v, %v", v, err)
	}
	if v, err := r.Prop("e").Str(); err != nil || v != "hello" {
		t.Errorf("e = %q, %v", v, err)
	}
	if v, err := r.Prop("f").Strings(); err != nil || len(v) != 2 || v[1] != "arm,psci-0.2" {
		t.Errorf("f = %q, %v", v, err)
	}
	if _, err := r.Prop("f").Str(); err == nil {
		t.Errorf("Str on a two-string list succeeded")
	}
	if p := r.Prop("g"); p == nil || len(p.Value) != 0 {
		t.Errorf("g = %+v", p)
	}
	if _, err := r.Prop("h").U32(); err == nil {
		t.Errorf("U32 on 1 byte succeeded")
	}
	if _, err := r.Prop("g").Strings(); err == nil {
		t.Errorf("Strings on empty value succeeded")
	}
	// An absent property is a nil *Property; decoding it is an error, not
	// a panic, so lookups chain.
	missing := tree.Lookup("/no/such").Prop("x")
	if _, err := missing.U32(); err == nil || !strings.Contains(err.Error(), "not present") {
		t.Errorf("U32 on a missing property: %v", err)
	}
	if _, err := missing.Str(); err == nil {
		t.Errorf("Str on a missing property succeeded")
	}
}

func TestStringsDeduplicated(t *testing.T) {
	b := NewBuilder()
	b.BeginNode("")
	for _, n := range []string{"a@1", "a@2", "a@3"} {
		b.BeginNode(n)
		b.PropString("compatible", "x")
		b.PropU32("reg", 1)
		b.EndNode()
	}
	b.EndNode()
	blob, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	h := decodeHeader(blob)
	strs := string(blob[h.OffDTStrings : h.OffDTStrings+h.SizeDTStrings])
	if strs != "compatible\x00reg\x00" {
		t.Errorf("strings block = %q, want each name once", strs)
	}
}

func TestBuilderErrors(t *testing.T) {
	cases := []struct {
		name string
		ops  func(b *Builder)
		want string
	}{
		{"no root", func(b *Builder) {}, "no root"},
		{"unclosed", func(b *Builder) { b.BeginNode(""); b.BeginNode("a") }, "still open, innermost /a"},
		{"extra end", func(b *Builder) { b.BeginNode(""); b.EndNode(); b.EndNode() }, "without a matching"},
		{"two roots", func(b *Builder) { b.BeginNode(""); b.EndNode(); b.BeginNode("") }, "exactly one root"},
		{"named root", func(b *Builder) { b.BeginNode("root") }, "root"},
		{"empty child", func(b *Builder) { b.BeginNode(""); b.BeginNode("") }, "empty node-name"},
		{"slash", func(b *Builder) { b.BeginNode(""); b.BeginNode("a/b") }, "not allowed"},
		{"digit first", func(b *Builder) { b.BeginNode(""); b.BeginNode("1a") }, "start with a letter"},
		{"long name", func(b *Builder) { b.BeginNode(""); b.BeginNode(strings.Repeat("a", 32)) }, "limit is 31"},
		{"empty unit", func(b *Builder) { b.BeginNode(""); b.BeginNode("a@") }, "empty unit address"},
		{"bad unit", func(b *Builder) { b.BeginNode(""); b.BeginNode("a@1@2") }, "unit address"},
		{"dup child", func(b *Builder) {
			b.BeginNode("")
			b.BeginNode("a")
			b.EndNode()
			b.BeginNode("a")
		}, "two child nodes"},
		{"prop outside", func(b *Builder) { b.PropU32("a", 1) }, "outside any node"},
		{"prop after child", func(b *Builder) {
			b.BeginNode("")
			b.BeginNode("a")
			b.EndNode()
			b.PropU32("x", 1)
		}, "follows a child node"},
		{"dup prop", func(b *Builder) { b.BeginNode(""); b.PropU32("x", 1); b.PropU32("x", 2) }, "two properties"},
		{"empty prop name", func(b *Builder) { b.BeginNode(""); b.PropEmpty("") }, "empty"},
		{"bad prop name", func(b *Builder) { b.BeginNode(""); b.PropEmpty("a b") }, "not allowed"},
		{"long prop name", func(b *Builder) { b.BeginNode(""); b.PropEmpty(strings.Repeat("p", 32)) }, "limit is 31"},
		{"nul in string", func(b *Builder) { b.BeginNode(""); b.PropString("s", "a\x00b") }, "NUL"},
		{"empty list", func(b *Builder) { b.BeginNode(""); b.PropStrings("s") }, "at least one"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBuilder()
			tc.ops(b)
			if first := b.Err(); first != nil {
				// Later calls must not clear or replace the first error.
				b.EndNode()
				b.BeginNode("$")
				b.PropU32("", 1)
				if b.Err() != first {
					t.Errorf("first error %q replaced by %q", first, b.Err())
				}
			}
			blob, err := b.Finish()
			if err == nil {
				t.Fatalf("Finish succeeded (%d bytes), want error containing %q", len(blob), tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func TestFinishIsRepeatable(t *testing.T) {
	b := NewBuilder()
	writeTree(b, sampleTree())
	a, err1 := b.Finish()
	c, err2 := b.Finish()
	if err1 != nil || err2 != nil || !bytes.Equal(a, c) {
		t.Errorf("second Finish differs: %v %v", err1, err2)
	}
}

// TestParseRejects corrupts a valid blob in targeted ways; each must be
// reported as an error.
func TestParseRejects(t *testing.T) {
	good := mustBuild(t, sampleTree())
	h := decodeHeader(good)
	be := binary.BigEndian
	structAt := func(i int) int { return int(h.OffDTStruct) + i }
	cases := []struct {
		name   string
		mutate func(b []byte) []byte
		want   string
	}{
		{"short", func(b []byte) []byte { return b[:39] }, "shorter than"},
		{"magic", func(b []byte) []byte { b[0] = 0; return b }, "bad magic"},
		{"version 16", func(b []byte) []byte { be.PutUint32(b[20:], 16); return b }, "version"},
		{"last comp 18", func(b []byte) []byte { be.PutUint32(b[24:], 18); return b }, "version"},
		{"totalsize big", func(b []byte) []byte { be.PutUint32(b[4:], uint32(len(b)+1)); return b }, "exceeds"},
		{"totalsize tiny", func(b []byte) []byte { be.PutUint32(b[4:], 8); return b }, "smaller than the header"},
		{"struct misaligned", func(b []byte) []byte { be.PutUint32(b[8:], h.OffDTStruct+2); return b }, "aligned"},
		{"struct in header", func(b []byte) []byte { be.PutUint32(b[8:], 4); return b }, "inside the header"},
		{"struct past end", func(b []byte) []byte { be.PutUint32(b[36:], h.SizeDTStruct+h.SizeDTStrings+4); return b }, "past totalsize"},
		{"strings past end", func(b []byte) []byte { be.PutUint32(b[32:], h.SizeDTStrings+1); return b }, "past totalsize"},
		{"overlap", func(b []byte) []byte { be.PutUint32(b[12:], h.OffDTStruct); return b }, "overlap"},
		{"rsvmap misaligned", func(b []byte) []byte { be.PutUint32(b[16:], 44); return b }, "8-byte aligned"},
		{"rsvmap unterminated", func(b []byte) []byte {
			be.PutUint32(b[16:], uint32(len(b)-8)&^7)
			return b
		}, "terminating zero entry"},
		{"struct truncated", func(b []byte) []byte { be.PutUint32(b[36:], h.SizeDTStruct-4); return b }, "no FDT_END"},
		{"unknown token", func(b []byte) []byte { be.PutUint32(b[structAt(0):], 7); return b }, "unknown token"},
		{"end first", func(b []byte) []byte { be.PutUint32(b[structAt(0):], tokenEnd); return b }, "before any node"},
		{"root named", func(b []byte) []byte { b[structAt(4)] = 'x'; return b }, "root node has name"},
		{"end not last", func(b []byte) []byte {
			// Grow the struct block by one NOP after FDT_END, into the
			// strings block's first bytes: FDT_END is then not last.
			be.PutUint32(b[36:], h.SizeDTStruct+4)
			be.PutUint32(b[12:], h.OffDTStrings+4)
			be.PutUint32(b[32:], h.SizeDTStrings-4)
			return b
		}, "not the last token"},
		{"prop name offset", func(b []byte) []byte {
			// First FDT_PROP follows the root's BEGIN_NODE and 4 bytes of name+pad.
			be.PutUint32(b[structAt(16):], h.SizeDTStrings)
			return b
		}, "outside the"},
		{"prop length", func(b []byte) []byte { be.PutUint32(b[structAt(12):], 1<<30); return b }, "past the end"},
		{"nonzero padding", func(b []byte) []byte {
			// The empty root name is one NUL then three padding bytes.
			b[structAt(5)] = 1
			return b
		}, "padding"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.mutate(append([]byte(nil), good...))
			tree, err := Parse(b)
			if err == nil {
				t.Fatalf("Parse accepted a corrupt blob: %+v", tree.Header)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

// TestParseRejectsStructure covers tree-shape errors that are easier to
// write as token streams than as edits of a good blob.
func TestParseRejectsStructure(t *testing.T) {
	begin := func(name string) []byte {
		v := be32(tokenBeginNode)
		v = append(v, name...)
		v = append(v, 0)
		for len(v)%4 != 0 {
			v = append(v, 0)
		}
		return v
	}
	prop := func(nameoff uint32, val []byte) []byte {
		v := append(be32(tokenProp), be32(uint32(len(val)))...)
		v = append(v, be32(nameoff)...)
		v = append(v, val...)
		for len(v)%4 != 0 {
			v = append(v, 0)
		}
		return v
	}
	end, endNode, nop := be32(tokenEnd), be32(tokenEndNode), be32(tokenNop)
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	strs := []byte("a\x00b c\x00d")
	cases := []struct {
		name   string
		stream []byte
		want   string
	}{
		{"ok with nops", cat(nop, begin(""), nop, prop(0, nil), nop, begin("x"), endNode, nop, endNode, nop, end), ""},
		{"two roots", cat(begin(""), endNode, begin(""), endNode, end), "second top-level"},
		{"unclosed", cat(begin(""), end), "still open"},
		{"extra end node", cat(begin(""), endNode, endNode, end), "closes no node"},
		{"prop outside", cat(prop(0, nil), end), "outside any node"},
		{"prop after child", cat(begin(""), begin("x"), endNode, prop(0, nil), endNode, end), "follows a subnode"},
		{"dup prop", cat(begin(""), prop(0, nil), prop(0, nil), endNode, end), "two properties"},
		{"dup child", cat(begin(""), begin("x"), endNode, begin("x"), endNode, endNode, end), "two child nodes"},
		{"bad prop name", cat(begin(""), prop(2, nil), endNode, end), "not allowed"},
		{"bad node name", cat(begin(""), begin("-x"), endNode, endNode, end), "start with a letter"},
		{"name unterminated", cat(begin(""), be32(tokenBeginNode), []byte("abcd")), "not NUL-terminated"},
		{"prop name unterminated", cat(begin(""), prop(6, nil), endNode, end), "not NUL-terminated"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			blob := assemble(tc.stream, strs)
			_, err := Parse(blob)
			if tc.want == "" && tc.name == "ok with nops" {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Parse accepted it")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func be32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

// assemble wraps a raw structure block and strings block in a header.
func assemble(structBlk, strs []byte) []byte {
	offStruct := HeaderSize + reserveEntrySize
	offStrings := offStruct + len(structBlk)
	blob := make([]byte, offStrings+len(strs))
	h := Header{
		Magic: Magic, TotalSize: uint32(len(blob)),
		OffDTStruct: uint32(offStruct), OffDTStrings: uint32(offStrings), OffMemRsvmap: HeaderSize,
		Version: Version, LastCompVersion: LastCompVersion,
		SizeDTStrings: uint32(len(strs)), SizeDTStruct: uint32(len(structBlk)),
	}
	h.put(blob)
	copy(blob[offStruct:], structBlk)
	copy(blob[offStrings:], strs)
	return blob
}
