// Package fdt writes and reads flattened devicetree blobs (DTBs), the binary
// form of a devicetree that a boot program hands to an operating system.
//
// The format is defined in chapter 5 ("Flattened Devicetree (DTB) Format") of
// the Devicetree Specification v0.4: a fixed header (5.2), a memory
// reservation block (5.3), a structure block of 32-bit big-endian tokens
// (5.4) and a strings block holding property names (5.5). mvm builds the
// platform description for an arm64 guest with [Builder]; [Parse] reads a
// blob back so that tests and fuzzers can check what was written.
//
// Only version 17 blobs that are backwards compatible with version 16 are
// produced and accepted, which is what the specification asks boot programs
// to provide (5.1) and what Linux and dtc read and write.
package fdt

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// Header constants from Devicetree Specification v0.4 section 5.2.
const (
	// Magic is the value of the header's magic field.
	Magic uint32 = 0xd00dfeed
	// Version is the blob version this package writes (5.1: boot programs
	// shall provide version 17 or later).
	Version uint32 = 17
	// LastCompVersion is written as last_comp_version: version 17 is
	// backwards compatible with version 16 and no earlier version (5.2).
	LastCompVersion uint32 = 16
	// HeaderSize is the size in bytes of the version 17 header: ten
	// big-endian 32-bit fields.
	HeaderSize = 40
)

// Structure block tokens, Devicetree Specification v0.4 section 5.4.1.
const (
	tokenBeginNode uint32 = 0x1
	tokenEndNode   uint32 = 0x2
	tokenProp      uint32 = 0x3
	tokenNop       uint32 = 0x4
	tokenEnd       uint32 = 0x9
)

// reserveEntrySize is the size of one struct fdt_reserve_entry (two u64),
// section 5.3.2.
const reserveEntrySize = 16

// maxNameLen is the longest node-name (without unit address) and the longest
// property name the specification allows: "1 to 31 characters"
// (sections 2.2.1 and 2.2.4).
const maxNameLen = 31

// Header is the decoded fdt_header of a blob (section 5.2). All offsets are
// from the start of the blob.
type Header struct {
	Magic           uint32
	TotalSize       uint32
	OffDTStruct     uint32
	OffDTStrings    uint32
	OffMemRsvmap    uint32
	Version         uint32
	LastCompVersion uint32
	BootCPUIDPhys   uint32
	SizeDTStrings   uint32
	SizeDTStruct    uint32
}

func (h *Header) put(b []byte) {
	be := binary.BigEndian
	be.PutUint32(b[0:], h.Magic)
	be.PutUint32(b[4:], h.TotalSize)
	be.PutUint32(b[8:], h.OffDTStruct)
	be.PutUint32(b[12:], h.OffDTStrings)
	be.PutUint32(b[16:], h.OffMemRsvmap)
	be.PutUint32(b[20:], h.Version)
	be.PutUint32(b[24:], h.LastCompVersion)
	be.PutUint32(b[28:], h.BootCPUIDPhys)
	be.PutUint32(b[32:], h.SizeDTStrings)
	be.PutUint32(b[36:], h.SizeDTStruct)
}

func decodeHeader(b []byte) Header {
	be := binary.BigEndian
	return Header{
		Magic:           be.Uint32(b[0:]),
		TotalSize:       be.Uint32(b[4:]),
		OffDTStruct:     be.Uint32(b[8:]),
		OffDTStrings:    be.Uint32(b[12:]),
		OffMemRsvmap:    be.Uint32(b[16:]),
		Version:         be.Uint32(b[20:]),
		LastCompVersion: be.Uint32(b[24:]),
		BootCPUIDPhys:   be.Uint32(b[28:]),
		SizeDTStrings:   be.Uint32(b[32:]),
		SizeDTStruct:    be.Uint32(b[36:]),
	}
}

// align4 rounds n up to the 4-byte boundary every structure block token
// must start on (section 5.4.1).
func align4(n int) int { return (n + 3) &^ 3 }

// isNameChar reports whether c may appear in a node name: the characters of
// section 2.2.1 (digits, letters, and , . _ + -).
func isNameChar(c byte) bool {
	switch {
	case c >= '0' && c <= '9', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		return true
	case c == ',', c == '.', c == '_', c == '+', c == '-':
		return true
	}
	return false
}

// isPropNameChar reports whether c may appear in a property name: the
// characters of section 2.2.4, which adds ? and # to the node
// name set.
func isPropNameChar(c byte) bool {
	return isNameChar(c) || c == '?' || c == '#'
}

// checkNodeName validates a non-root node name "node-name[@unit-address]"
// against section 2.2.1: node-name is 1 to 31 characters from the node-name set and
// starts with a letter; the unit address, when present, is one or more
// characters from the same table. The root node's empty name is handled by
// the callers, which know the depth.
func checkNodeName(name string) error {
	base, unit, hasUnit := strings.Cut(name, "@")
	if base == "" {
		return fmt.Errorf("node name %q has an empty node-name part (Devicetree spec 2.2.1)", name)
	}
	if len(base) > maxNameLen {
		return fmt.Errorf("node name %q: node-name part is %d characters, the limit is %d (Devicetree spec 2.2.1)", name, len(base), maxNameLen)
	}
	if c := base[0]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
		return fmt.Errorf("node name %q must start with a letter (Devicetree spec 2.2.1)", name)
	}
	for i := 0; i < len(base); i++ {
		if !isNameChar(base[i]) {
			return fmt.Errorf("node name %q contains %q, not allowed in a node-name (Devicetree spec 2.2.1)", name, base[i])
		}
	}
	if hasUnit {
		if unit == "" {
			return fmt.Errorf("node name %q has an empty unit address after '@' (Devicetree spec 2.2.1)", name)
		}
		for i := 0; i < len(unit); i++ {
			if !isNameChar(unit[i]) {
				return fmt.Errorf("node name %q contains %q, not allowed in a unit address (Devicetree spec 2.2.1)", name, unit[i])
			}
		}
	}
	return nil
}

// checkPropName validates a property name against section 2.2.4: 1 to 31
// characters from the property-name set.
func checkPropName(name string) error {
	if name == "" {
		return fmt.Errorf("property name is empty (Devicetree spec 2.2.4)")
	}
	if len(name) > maxNameLen {
		return fmt.Errorf("property name %q is %d characters, the limit is %d (Devicetree spec 2.2.4)", name, len(name), maxNameLen)
	}
	for i := 0; i < len(name); i++ {
		if !isPropNameChar(name[i]) {
			return fmt.Errorf("property name %q contains %q, not allowed in a property name (Devicetree spec 2.2.4)", name, name[i])
		}
	}
	return nil
}
