package fdt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
)

// Builder writes a devicetree as a version 17 blob, one node at a time, in
// the order the structure block stores it (Devicetree Specification v0.4
// section 5.4.2): BeginNode, the node's properties, its child nodes, EndNode.
//
// Mistakes (an invalid name, a property after a child node, a second root,
// unbalanced nodes, a blob beyond 4 GiB) do not panic: the first one is
// remembered, later calls do nothing, and Finish returns it. That keeps
// callers that emit many properties free of per-call error checks while
// still refusing to produce a blob the guest would misread.
//
// The zero Builder is not ready for use; call NewBuilder.
type Builder struct {
	structBlk []byte
	strs      []byte
	strOff    map[string]uint32
	open      []*openNode
	rootDone  bool
	bootCPU   uint32
	err       error
}

// openNode is the bookkeeping for a node between BeginNode and EndNode.
type openNode struct {
	name     string
	props    map[string]struct{}
	children map[string]struct{}
	hasChild bool
}

// NewBuilder returns an empty Builder.
func NewBuilder() *Builder {
	return &Builder{strOff: make(map[string]uint32)}
}

// Err returns the first error recorded so far, or nil.
func (b *Builder) Err() error { return b.err }

// SetBootCPU sets the header's boot_cpuid_phys field, which section 5.2 says
// shall equal the reg value of the boot CPU's node. arm64 Linux finds its
// boot CPU from MPIDR_EL1 instead, but other readers may use it.
func (b *Builder) SetBootCPU(id uint32) { b.bootCPU = id }

func (b *Builder) fail(format string, args ...any) {
	if b.err == nil {
		b.err = fmt.Errorf("fdt: "+format, args...)
	}
}

// path is the full path of the innermost open node, for error messages.
func (b *Builder) path() string {
	if len(b.open) <= 1 {
		return "/"
	}
	var sb strings.Builder
	for _, n := range b.open[1:] {
		sb.WriteByte('/')
		sb.WriteString(n.name)
	}
	return sb.String()
}

func (b *Builder) token(t uint32) {
	b.structBlk = binary.BigEndian.AppendUint32(b.structBlk, t)
}

// pad appends zero bytes up to the next 4-byte boundary; section 5.4.1
// requires zeroed padding before every token.
func (b *Builder) pad() {
	for len(b.structBlk)%4 != 0 {
		b.structBlk = append(b.structBlk, 0)
	}
}

// BeginNode opens a node. The first node must be the root, whose name is
// empty (section 2.2.1: the root has no node-name or unit-address); every
// other name is "node-name" or "node-name@unit-address" and unique among
// its siblings.
func (b *Builder) BeginNode(name string) {
	if b.err != nil {
		return
	}
	if b.rootDone {
		b.fail("node %q begun after the root node was closed; a blob has exactly one root (Devicetree spec 5.4.2)", name)
		return
	}
	if len(b.open) == 0 {
		if name != "" {
			b.fail("the first node is the root and its name must be empty, got %q (Devicetree spec 2.2.1)", name)
			return
		}
	} else {
		if err := checkNodeName(name); err != nil {
			b.fail("in %s: %w", b.path(), err)
			return
		}
		parent := b.open[len(b.open)-1]
		if _, dup := parent.children[name]; dup {
			b.fail("node %s has two child nodes named %q", b.path(), name)
			return
		}
		if parent.children == nil {
			parent.children = make(map[string]struct{})
		}
		parent.children[name] = struct{}{}
		parent.hasChild = true
	}
	b.token(tokenBeginNode)
	b.structBlk = append(b.structBlk, name...)
	b.structBlk = append(b.structBlk, 0)
	b.pad()
	b.open = append(b.open, &openNode{name: name})
}

// EndNode closes the innermost open node.
func (b *Builder) EndNode() {
	if b.err != nil {
		return
	}
	if len(b.open) == 0 {
		b.fail("EndNode without a matching BeginNode")
		return
	}
	b.token(tokenEndNode)
	b.open = b.open[:len(b.open)-1]
	if len(b.open) == 0 {
		b.rootDone = true
	}
}

// stringOffset returns the offset of name in the strings block, adding it
// the first time. Names are stored once and shared by every property that
// uses them, as section 5.5 allows (FDT_PROP refers to names by offset).
func (b *Builder) stringOffset(name string) (uint32, bool) {
	if off, ok := b.strOff[name]; ok {
		return off, true
	}
	if uint64(len(b.strs)) > math.MaxUint32 {
		return 0, false
	}
	off := uint32(len(b.strs))
	b.strs = append(b.strs, name...)
	b.strs = append(b.strs, 0)
	b.strOff[name] = off
	return off, true
}

// PropBytes adds a property with a raw value to the innermost open node.
// All properties of a node must come before its first child node
// (section 5.4.2), and property names are unique within a node.
func (b *Builder) PropBytes(name string, value []byte) {
	if b.err != nil {
		return
	}
	if len(b.open) == 0 {
		b.fail("property %q outside any node", name)
		return
	}
	n := b.open[len(b.open)-1]
	if n.hasChild {
		b.fail("property %q of %s follows a child node; properties must precede subnodes (Devicetree spec 5.4.2)", name, b.path())
		return
	}
	if err := checkPropName(name); err != nil {
		b.fail("in %s: %w", b.path(), err)
		return
	}
	if _, dup := n.props[name]; dup {
		b.fail("node %s has two properties named %q", b.path(), name)
		return
	}
	if uint64(len(value)) > math.MaxUint32 {
		b.fail("property %q of %s is %d bytes, more than a 32-bit length can describe", name, b.path(), len(value))
		return
	}
	off, ok := b.stringOffset(name)
	if !ok {
		b.fail("strings block exceeds 4 GiB")
		return
	}
	if n.props == nil {
		n.props = make(map[string]struct{})
	}
	n.props[name] = struct{}{}
	b.token(tokenProp)
	b.structBlk = binary.BigEndian.AppendUint32(b.structBlk, uint32(len(value)))
	b.structBlk = binary.BigEndian.AppendUint32(b.structBlk, off)
	b.structBlk = append(b.structBlk, value...)
	b.pad()
}

// PropEmpty adds a property with no value, used for true/false properties
// such as interrupt-controller (section 2.2.4, <empty>).
func (b *Builder) PropEmpty(name string) { b.PropBytes(name, nil) }

// PropU32 adds a property holding one big-endian 32-bit cell (<u32>,
// section 2.2.4).
func (b *Builder) PropU32(name string, v uint32) { b.PropCells(name, v) }

// PropU64 adds a property holding one 64-bit value as two cells, most
// significant first (<u64>, section 2.2.4).
func (b *Builder) PropU64(name string, v uint64) { b.PropU64s(name, v) }

// PropCells adds a property holding a list of 32-bit cells
// (<prop-encoded-array>), e.g. interrupts = <0 1 4>.
func (b *Builder) PropCells(name string, cells ...uint32) {
	v := make([]byte, 0, 4*len(cells))
	for _, c := range cells {
		v = binary.BigEndian.AppendUint32(v, c)
	}
	b.PropBytes(name, v)
}

// PropU64s adds a property holding 64-bit values, each as two cells, most
// significant first. With #address-cells = #size-cells = 2 this is the
// encoding of reg = <base size ...> (section 2.3.6).
func (b *Builder) PropU64s(name string, vals ...uint64) {
	v := make([]byte, 0, 8*len(vals))
	for _, x := range vals {
		v = binary.BigEndian.AppendUint64(v, x)
	}
	b.PropBytes(name, v)
}

// PropString adds a NUL-terminated string property (<string>, section
// 2.2.4). The string itself must not contain NUL.
func (b *Builder) PropString(name, s string) {
	b.PropStrings(name, s)
}

// PropStrings adds a string list property (<stringlist>, section 2.2.4),
// such as compatible = "arm,psci-1.0", "arm,psci-0.2". Each string is
// NUL-terminated; none may contain NUL, and the list must not be empty.
func (b *Builder) PropStrings(name string, ss ...string) {
	if b.err != nil {
		return
	}
	if len(b.open) == 0 {
		b.fail("property %q outside any node", name)
		return
	}
	if len(ss) == 0 {
		b.fail("property %q of %s: a string list needs at least one string", name, b.path())
		return
	}
	var v []byte
	for _, s := range ss {
		if strings.IndexByte(s, 0) >= 0 {
			b.fail("property %q of %s: string %q contains a NUL byte", name, b.path(), s)
			return
		}
		v = append(v, s...)
		v = append(v, 0)
	}
	b.PropBytes(name, v)
}

// Finish assembles the blob: header (section 5.2), an empty memory
// reservation block (a single terminating all-zero entry, section 5.3.2) at
// an 8-byte aligned offset, the structure block ending in FDT_END
// (section 5.4), then the strings block (section 5.5). It returns the first
// error recorded by earlier calls, or an error if nodes are still open or
// the blob would not fit the 32-bit size fields. Finish does not modify the
// Builder, so calling it again returns an identical blob.
func (b *Builder) Finish() ([]byte, error) {
	if b.err != nil {
		return nil, b.err
	}
	if len(b.open) > 0 {
		return nil, fmt.Errorf("fdt: %d node(s) still open, innermost %s; every BeginNode needs an EndNode", len(b.open), b.path())
	}
	if !b.rootDone {
		return nil, errors.New("fdt: no root node was written")
	}
	const offRsvmap = HeaderSize // 40 is already 8-byte aligned
	offStruct := uint64(offRsvmap + reserveEntrySize)
	sizeStruct := uint64(len(b.structBlk)) + 4 // + FDT_END
	offStrings := offStruct + sizeStruct
	sizeStrings := uint64(len(b.strs))
	total := offStrings + sizeStrings
	if total > math.MaxUint32 {
		return nil, fmt.Errorf("fdt: blob would be %d bytes, beyond the 4 GiB the 32-bit header fields can describe", total)
	}
	blob := make([]byte, total)
	h := Header{
		Magic:           Magic,
		TotalSize:       uint32(total),
		OffDTStruct:     uint32(offStruct),
		OffDTStrings:    uint32(offStrings),
		OffMemRsvmap:    offRsvmap,
		Version:         Version,
		LastCompVersion: LastCompVersion,
		BootCPUIDPhys:   b.bootCPU,
		SizeDTStrings:   uint32(sizeStrings),
		SizeDTStruct:    uint32(sizeStruct),
	}
	h.put(blob)
	// The reservation block's terminating entry is already zero.
	copy(blob[offStruct:], b.structBlk)
	binary.BigEndian.PutUint32(blob[offStruct+uint64(len(b.structBlk)):], tokenEnd)
	copy(blob[offStrings:], b.strs)
	return blob, nil
}
