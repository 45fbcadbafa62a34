package fdt

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
)

// Tree is a blob read back by Parse.
type Tree struct {
	Header Header
	// Reservations are the memory reservation block's entries, without the
	// terminating all-zero entry (section 5.3).
	Reservations []Reservation
	Root         *Node
}

// Reservation is one fdt_reserve_entry (section 5.3.2).
type Reservation struct {
	Address, Size uint64
}

// Node is one devicetree node. Props and Children keep blob order.
type Node struct {
	// Name is "node-name[@unit-address]"; empty for the root.
	Name     string
	Props    []Property
	Children []*Node
}

// Property is one property; Value is a copy of the blob's bytes.
type Property struct {
	Name  string
	Value []byte
}

// Parse decodes and validates a version 17 blob (compatible with version
// 16). It accepts exactly what the Devicetree Specification v0.4 chapter 5
// describes and returns an error, never a panic, for anything else:
// a bad magic or version, blocks outside totalsize or misaligned (5.6), a
// reservation block without its terminator (5.3.2), unknown or misplaced
// tokens, non-zero padding, a property after a subnode, FDT_END not last
// (5.4), a name offset outside the strings block (5.5), invalid or
// duplicate node and property names (2.2.1, 2.2.4). Bytes after
// totalsize are ignored, as a blob may sit in a larger buffer.
func Parse(blob []byte) (*Tree, error) {
	if len(blob) < HeaderSize {
		return nil, fmt.Errorf("fdt: blob is %d bytes, shorter than the %d-byte header", len(blob), HeaderSize)
	}
	h := decodeHeader(blob)
	if h.Magic != Magic {
		return nil, fmt.Errorf("fdt: bad magic 0x%08x, want 0x%08x (Devicetree spec 5.2)", h.Magic, Magic)
	}
	if h.Version < Version || h.LastCompVersion > Version {
		return nil, fmt.Errorf("fdt: version %d (last compatible %d) is not readable as version %d (Devicetree spec 5.1)", h.Version, h.LastCompVersion, Version)
	}
	if uint64(h.TotalSize) > uint64(len(blob)) {
		return nil, fmt.Errorf("fdt: header totalsize %d exceeds the %d bytes given", h.TotalSize, len(blob))
	}
	if h.TotalSize < HeaderSize {
		return nil, fmt.Errorf("fdt: header totalsize %d is smaller than the header", h.TotalSize)
	}
	blob = blob[:h.TotalSize]

	structBlk, err := block(blob, "structure", h.OffDTStruct, h.SizeDTStruct, 4)
	if err != nil {
		return nil, err
	}
	strs, err := block(blob, "strings", h.OffDTStrings, h.SizeDTStrings, 1)
	if err != nil {
		return nil, err
	}
	if overlap(h.OffDTStruct, h.SizeDTStruct, h.OffDTStrings, h.SizeDTStrings) {
		return nil, fmt.Errorf("fdt: structure block [%d,+%d) and strings block [%d,+%d) overlap", h.OffDTStruct, h.SizeDTStruct, h.OffDTStrings, h.SizeDTStrings)
	}
	rsv, err := parseReservations(blob, h.OffMemRsvmap)
	if err != nil {
		return nil, err
	}
	root, err := parseStruct(structBlk, strs)
	if err != nil {
		return nil, err
	}
	return &Tree{Header: h, Reservations: rsv, Root: root}, nil
}

// block returns blob[off:off+size] after checking that it lies after the
// header, inside totalsize, and at the alignment section 5.6 requires.
func block(blob []byte, what string, off, size uint32, align uint32) ([]byte, error) {
	if off < HeaderSize {
		return nil, fmt.Errorf("fdt: %s block offset %d lies inside the header", what, off)
	}
	if off%align != 0 {
		return nil, fmt.Errorf("fdt: %s block offset %d is not %d-byte aligned (Devicetree spec 5.6)", what, off, align)
	}
	end := uint64(off) + uint64(size)
	if end > uint64(len(blob)) {
		return nil, fmt.Errorf("fdt: %s block [%d,+%d) extends past totalsize %d", what, off, size, len(blob))
	}
	return blob[off:end], nil
}

func overlap(aOff, aSize, bOff, bSize uint32) bool {
	if aSize == 0 || bSize == 0 {
		return false
	}
	aEnd, bEnd := uint64(aOff)+uint64(aSize), uint64(bOff)+uint64(bSize)
	return uint64(aOff) < bEnd && uint64(bOff) < aEnd
}

// parseReservations reads fdt_reserve_entry pairs up to the all-zero
// terminator (section 5.3.2), which must lie inside totalsize.
func parseReservations(blob []byte, off uint32) ([]Reservation, error) {
	if off < HeaderSize {
		return nil, fmt.Errorf("fdt: memory reservation block offset %d lies inside the header", off)
	}
	if off%8 != 0 {
		return nil, fmt.Errorf("fdt: memory reservation block offset %d is not 8-byte aligned (Devicetree spec 5.3.2)", off)
	}
	var out []Reservation
	for p := uint64(off); ; p += reserveEntrySize {
		if p+reserveEntrySize > uint64(len(blob)) {
			return nil, fmt.Errorf("fdt: memory reservation block at %d has no terminating zero entry before totalsize %d (Devicetree spec 5.3.2)", off, len(blob))
		}
		r := Reservation{
			Address: binary.BigEndian.Uint64(blob[p:]),
			Size:    binary.BigEndian.Uint64(blob[p+8:]),
		}
		if r.Address == 0 && r.Size == 0 {
			return out, nil
		}
		out = append(out, r)
	}
}

// structParser walks the structure block's tokens (section 5.4).
type structParser struct {
	s    []byte
	strs []byte
	off  int
}

func (p *structParser) u32() (uint32, error) {
	if p.off+4 > len(p.s) {
		return 0, fmt.Errorf("fdt: structure block truncated at offset %d, expected a 32-bit word", p.off)
	}
	v := binary.BigEndian.Uint32(p.s[p.off:])
	p.off += 4
	return v, nil
}

// skipPad advances to the next 4-byte boundary, checking that the padding
// is inside the block and zero (section 5.4.1).
func (p *structParser) skipPad() error {
	next := align4(p.off)
	if next > len(p.s) {
		return fmt.Errorf("fdt: padding at structure offset %d runs past the end of the block", p.off)
	}
	for i := p.off; i < next; i++ {
		if p.s[i] != 0 {
			return fmt.Errorf("fdt: non-zero padding byte at structure offset %d (Devicetree spec 5.4.1)", i)
		}
	}
	p.off = next
	return nil
}

// propName returns the NUL-terminated name at nameoff in the strings block.
func (p *structParser) propName(nameoff uint32) (string, error) {
	if uint64(nameoff) >= uint64(len(p.strs)) {
		return "", fmt.Errorf("fdt: property name offset %d is outside the %d-byte strings block", nameoff, len(p.strs))
	}
	rest := p.strs[nameoff:]
	n := bytes.IndexByte(rest, 0)
	if n < 0 {
		return "", fmt.Errorf("fdt: property name at strings offset %d is not NUL-terminated", nameoff)
	}
	return string(rest[:n]), nil
}

// openParse tracks one node being read, with the sets that detect
// duplicate names.
type openParse struct {
	node     *Node
	props    map[string]struct{}
	children map[string]struct{}
}

func nodePath(stack []openParse) string {
	if len(stack) <= 1 {
		return "/"
	}
	var sb strings.Builder
	for _, o := range stack[1:] {
		sb.WriteByte('/')
		sb.WriteString(o.node.Name)
	}
	return sb.String()
}

// parseStruct builds the tree from the structure block. It is iterative so
// that a deeply nested hostile blob cannot exhaust the stack.
func parseStruct(s, strs []byte) (*Node, error) {
	p := &structParser{s: s, strs: strs}
	var root *Node
	var stack []openParse
	for {
		tokOff := p.off
		tok, err := p.u32()
		if err != nil {
			return nil, fmt.Errorf("%w (no FDT_END token)", err)
		}
		switch tok {
		case tokenBeginNode:
			rest := p.s[p.off:]
			n := bytes.IndexByte(rest, 0)
			if n < 0 {
				return nil, fmt.Errorf("fdt: node name at structure offset %d is not NUL-terminated", p.off)
			}
			name := string(rest[:n])
			p.off += n + 1
			if err := p.skipPad(); err != nil {
				return nil, err
			}
			node := &Node{Name: name}
			switch {
			case root == nil:
				if name != "" {
					return nil, fmt.Errorf("fdt: root node has name %q, want empty (Devicetree spec 2.2.1)", name)
				}
				root = node
			case len(stack) == 0:
				return nil, fmt.Errorf("fdt: second top-level node %q at structure offset %d; a blob has one root (Devicetree spec 5.4.2)", name, tokOff)
			default:
				if err := checkNodeName(name); err != nil {
					return nil, fmt.Errorf("fdt: in %s: %w", nodePath(stack), err)
				}
				parent := &stack[len(stack)-1]
				if _, dup := parent.children[name]; dup {
					return nil, fmt.Errorf("fdt: node %s has two child nodes named %q", nodePath(stack), name)
				}
				if parent.children == nil {
					parent.children = make(map[string]struct{})
				}
				parent.children[name] = struct{}{}
				parent.node.Children = append(parent.node.Children, node)
			}
			stack = append(stack, openParse{node: node})
		case tokenEndNode:
			if len(stack) == 0 {
				return nil, fmt.Errorf("fdt: FDT_END_NODE at structure offset %d closes no node", tokOff)
			}
			stack = stack[:len(stack)-1]
		case tokenProp:
			length, err := p.u32()
			if err != nil {
				return nil, err
			}
			nameoff, err := p.u32()
			if err != nil {
				return nil, err
			}
			if len(stack) == 0 {
				return nil, fmt.Errorf("fdt: FDT_PROP at structure offset %d is outside any node", tokOff)
			}
			top := &stack[len(stack)-1]
			name, err := p.propName(nameoff)
			if err != nil {
				return nil, err
			}
			if len(top.node.Children) > 0 {
				return nil, fmt.Errorf("fdt: property %q of %s follows a subnode (Devicetree spec 5.4.2)", name, nodePath(stack))
			}
			if err := checkPropName(name); err != nil {
				return nil, fmt.Errorf("fdt: in %s: %w", nodePath(stack), err)
			}
			if _, dup := top.props[name]; dup {
				return nil, fmt.Errorf("fdt: node %s has two properties named %q", nodePath(stack), name)
			}
			if uint64(length) > uint64(len(p.s)-p.off) {
				return nil, fmt.Errorf("fdt: property %q of %s has length %d, past the end of the structure block", name, nodePath(stack), length)
			}
			val := append([]byte(nil), p.s[p.off:p.off+int(length)]...)
			p.off += int(length)
			if err := p.skipPad(); err != nil {
				return nil, err
			}
			if top.props == nil {
				top.props = make(map[string]struct{})
			}
			top.props[name] = struct{}{}
			top.node.Props = append(top.node.Props, Property{Name: name, Value: val})
		case tokenNop:
		case tokenEnd:
			if root == nil {
				return nil, fmt.Errorf("fdt: FDT_END at structure offset %d before any node", tokOff)
			}
			if len(stack) != 0 {
				return nil, fmt.Errorf("fdt: FDT_END at structure offset %d while %s is still open", tokOff, nodePath(stack))
			}
			if p.off != len(p.s) {
				return nil, fmt.Errorf("fdt: FDT_END at structure offset %d is not the last token of the %d-byte block (Devicetree spec 5.4.1)", tokOff, len(p.s))
			}
			return root, nil
		default:
			return nil, fmt.Errorf("fdt: unknown token 0x%x at structure offset %d (Devicetree spec 5.4.1)", tok, tokOff)
		}
	}
}

// Child returns the direct child with the given full name
// ("node-name@unit-address"), or nil.
func (n *Node) Child(name string) *Node {
	if n == nil {
		return nil
	}
	for _, c := range n.Children {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// Prop returns the named property, or nil. The decoding methods accept the
// nil result and report the property as not present.
func (n *Node) Prop(name string) *Property {
	if n == nil {
		return nil
	}
	for i := range n.Props {
		if n.Props[i].Name == name {
			return &n.Props[i]
		}
	}
	return nil
}

// Lookup returns the node at an absolute path such as "/cpus/cpu@0"
// (section 2.2.3, full unit names required), or nil.
func (t *Tree) Lookup(path string) *Node {
	if t == nil || !strings.HasPrefix(path, "/") {
		return nil
	}
	n := t.Root
	for _, part := range strings.Split(path[1:], "/") {
		if part == "" {
			continue
		}
		n = n.Child(part)
		if n == nil {
			return nil
		}
	}
	return n
}

// errMissingProp is what the decoders return when called on the nil
// *Property that Node.Prop returns for an absent property, so lookups can
// be chained without a panic.
const errMissingProp = fdtError("fdt: property not present")

// fdtError is a constant error type, so the sentinel above needs no
// package-level variable.
type fdtError string

func (e fdtError) Error() string { return string(e) }

// U32 decodes a <u32> value.
func (p *Property) U32() (uint32, error) {
	if p == nil {
		return 0, errMissingProp
	}
	if len(p.Value) != 4 {
		return 0, fmt.Errorf("fdt: property %q is %d bytes, not a 4-byte <u32>", p.Name, len(p.Value))
	}
	return binary.BigEndian.Uint32(p.Value), nil
}

// U64 decodes a <u64> value (two cells, most significant first).
func (p *Property) U64() (uint64, error) {
	if p == nil {
		return 0, errMissingProp
	}
	if len(p.Value) != 8 {
		return 0, fmt.Errorf("fdt: property %q is %d bytes, not an 8-byte <u64>", p.Name, len(p.Value))
	}
	return binary.BigEndian.Uint64(p.Value), nil
}

// Cells decodes the value as 32-bit big-endian cells.
func (p *Property) Cells() ([]uint32, error) {
	if p == nil {
		return nil, errMissingProp
	}
	if len(p.Value)%4 != 0 {
		return nil, fmt.Errorf("fdt: property %q is %d bytes, not a whole number of 32-bit cells", p.Name, len(p.Value))
	}
	out := make([]uint32, len(p.Value)/4)
	for i := range out {
		out[i] = binary.BigEndian.Uint32(p.Value[4*i:])
	}
	return out, nil
}

// U64s decodes the value as 64-bit big-endian values (pairs of cells).
func (p *Property) U64s() ([]uint64, error) {
	if p == nil {
		return nil, errMissingProp
	}
	if len(p.Value)%8 != 0 {
		return nil, fmt.Errorf("fdt: property %q is %d bytes, not a whole number of 64-bit values", p.Name, len(p.Value))
	}
	out := make([]uint64, len(p.Value)/8)
	for i := range out {
		out[i] = binary.BigEndian.Uint64(p.Value[8*i:])
	}
	return out, nil
}

// Strings decodes a <stringlist> (or a single <string>, a list of one).
func (p *Property) Strings() ([]string, error) {
	if p == nil {
		return nil, errMissingProp
	}
	if len(p.Value) == 0 || p.Value[len(p.Value)-1] != 0 {
		return nil, fmt.Errorf("fdt: property %q is not a NUL-terminated string list", p.Name)
	}
	return strings.Split(string(p.Value[:len(p.Value)-1]), "\x00"), nil
}

// Str decodes a single <string>.
func (p *Property) Str() (string, error) {
	ss, err := p.Strings()
	if err != nil {
		return "", err
	}
	if len(ss) != 1 {
		return "", fmt.Errorf("fdt: property %q holds %d strings, want one", p.Name, len(ss))
	}
	return ss[0], nil
}
