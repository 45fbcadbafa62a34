package fdt

import (
	"encoding/binary"
	"fmt"
	"testing"
)

// FuzzParse feeds arbitrary bytes to Parse. It must never panic, and
// whatever it accepts must survive a rebuild: writing the parsed tree with
// the Builder and parsing that gives the same tree.
func FuzzParse(f *testing.F) {
	f.Add(mustBuild(f, sampleTree()))
	f.Add(assemble(append(append(be32(tokenBeginNode), 0, 0, 0, 0), append(be32(tokenEndNode), be32(tokenEnd)...)...), nil))
	f.Add([]byte{})
	f.Add(be32(Magic))
	f.Fuzz(func(t *testing.T, blob []byte) {
		tree, err := Parse(blob)
		if err != nil {
			return
		}
		b := NewBuilder()
		writeTree(b, tree.Root)
		again, err := b.Finish()
		if err != nil {
			t.Fatalf("Parse accepted a tree the Builder rejects: %v", err)
		}
		tree2, err := Parse(again)
		if err != nil {
			t.Fatalf("rebuilt blob does not parse: %v", err)
		}
		if !equalNodes(tree.Root, tree2.Root) {
			t.Fatalf("rebuild changed the tree")
		}
	})
}

// opReader hands out bytes of the fuzz input, then zeros.
type opReader struct {
	data []byte
}

func (r *opReader) byte() byte {
	if len(r.data) == 0 {
		return 0
	}
	c := r.data[0]
	r.data = r.data[1:]
	return c
}

func (r *opReader) bytes(n int) []byte {
	if n > len(r.data) {
		n = len(r.data)
	}
	v := r.data[:n]
	r.data = r.data[n:]
	return v
}

// name returns mostly valid node or property names, sometimes raw bytes,
// so that both the accepting and the rejecting paths are exercised.
func (r *opReader) name(prop bool) string {
	k := r.byte()
	switch k % 4 {
	case 0, 1:
		if prop {
			return fmt.Sprintf("p%d", k%7)
		}
		return fmt.Sprintf("n%d", k%5)
	case 2:
		if prop {
			return fmt.Sprintf("#vendor,p-%d?", k%3)
		}
		return fmt.Sprintf("n@%x", r.byte())
	default:
		return string(r.bytes(int(r.byte() % 40)))
	}
}

// FuzzBuild drives the Builder with random operations while keeping a
// model of the tree. Any blob Finish returns must parse back to exactly
// the model.
func FuzzBuild(f *testing.F) {
	// root{p0=[1 2 3]; p1=<u64>; n@5{p4="ab",""}}
	f.Add([]byte{0, 0, 2, 0, 3, 1, 2, 3, 4, 1, 1, 1, 2, 3, 4, 5, 6, 7, 8, 0, 2, 5, 3, 4, 2, 2, 'a', 'b', 0, 1, 1})
	// root{n0{} n1{p0=[9]}}, the last nodes closed implicitly
	f.Add([]byte{0, 0, 0, 0, 1, 0, 1, 2, 0, 1, 9})
	// a property before any node: rejected
	f.Add([]byte{3, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &opReader{data: data}
		b := NewBuilder()
		var root *Node
		var stack []*Node
		for len(r.data) > 0 && b.Err() == nil {
			switch r.byte() % 5 {
			case 0:
				name := ""
				if len(stack) > 0 || r.byte()%8 == 7 {
					name = r.name(false)
				}
				n := &Node{Name: name}
				if len(stack) == 0 {
					root = n
				} else {
					p := stack[len(stack)-1]
					p.Children = append(p.Children, n)
				}
				stack = append(stack, n)
				b.BeginNode(name)
			case 1:
				if len(stack) > 0 {
					stack = stack[:len(stack)-1]
				}
				b.EndNode()
			case 2:
				name := r.name(true)
				val := append([]byte(nil), r.bytes(int(r.byte()%16))...)
				if len(stack) > 0 {
					top := stack[len(stack)-1]
					top.Props = append(top.Props, Property{name, val})
				}
				b.PropBytes(name, val)
			case 3:
				name := r.name(true)
				var ss []string
				var val []byte
				for i := r.byte() % 4; i > 0; i-- {
					s := string(r.bytes(int(r.byte() % 6)))
					ss = append(ss, s)
					val = append(val, s...)
					val = append(val, 0)
				}
				if len(stack) > 0 {
					top := stack[len(stack)-1]
					top.Props = append(top.Props, Property{name, val})
				}
				b.PropStrings(name, ss...)
			case 4:
				name := r.name(true)
				var vals []uint64
				var val []byte
				for i := r.byte() % 4; i > 0; i-- {
					v := binary.LittleEndian.Uint64(append(r.bytes(8), make([]byte, 8)...))
					vals = append(vals, v)
					val = binary.BigEndian.AppendUint64(val, v)
				}
				if len(stack) > 0 {
					top := stack[len(stack)-1]
					top.Props = append(top.Props, Property{name, val})
				}
				b.PropU64s(name, vals...)
			}
		}
		for range stack {
			b.EndNode()
		}
		blob, err := b.Finish()
		if err != nil {
			return
		}
		tree, err := Parse(blob)
		if err != nil {
			t.Fatalf("Parse rejects the Builder's blob: %v", err)
		}
		if root == nil || !equalNodes(tree.Root, root) {
			t.Fatalf("parsed tree differs from what was built")
		}
	})
}
