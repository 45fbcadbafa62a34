package tracepoint

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Field is one field of a tracepoint's raw record, as the format file
// describes it ("field:unsigned int esr_ec; offset:12; size:4; signed:0;").
type Field struct {
	Name string
	// Decl is the C declaration ("unsigned int esr_ec").
	Decl   string
	Offset int
	Size   int
	Signed bool
}

// Uint reads the field from a raw record as an integer (sign-extended when
// the field is signed). ok is false when the record is too short or the
// field is not a 1, 2, 4 or 8 byte integer.
func (f Field) Uint(raw []byte) (v uint64, ok bool) {
	if f.Offset < 0 || f.Offset+f.Size > len(raw) {
		return 0, false
	}
	b := raw[f.Offset : f.Offset+f.Size]
	ne := binary.NativeEndian
	switch f.Size {
	case 1:
		v = uint64(b[0])
		if f.Signed {
			v = uint64(int64(int8(b[0])))
		}
	case 2:
		v = uint64(ne.Uint16(b))
		if f.Signed {
			v = uint64(int64(int16(v)))
		}
	case 4:
		v = uint64(ne.Uint32(b))
		if f.Signed {
			v = uint64(int64(int32(v)))
		}
	case 8:
		v = ne.Uint64(b)
	default:
		return 0, false
	}
	return v, true
}

// Format is a tracepoint's id and record layout.
type Format struct {
	// System and Name: "kvm", "kvm_exit".
	System, Name string
	// ID is the perf_event_attr.config of the tracepoint and the value of
	// the common_type field of its records.
	ID     uint64
	Fields []Field
}

// Field looks a field up by name.
func (f *Format) Field(name string) (Field, bool) {
	for _, fd := range f.Fields {
		if fd.Name == name {
			return fd, true
		}
	}
	return Field{}, false
}

// String is "system:name".
func (f *Format) String() string { return f.System + ":" + f.Name }

// ErrFormat wraps errors about a malformed format file.
var ErrFormat = errors.New("malformed tracepoint format")

// ParseFormat parses a tracefs format file.
func ParseFormat(system string, data []byte) (*Format, error) {
	f := &Format{System: system}
	var haveID bool
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20) // print fmt lines are long
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "name:"):
			f.Name = strings.TrimSpace(strings.TrimPrefix(line, "name:"))
		case strings.HasPrefix(line, "ID:"):
			id, err := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(line, "ID:")), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%w: ID line %q: %v", ErrFormat, line, err)
			}
			f.ID, haveID = id, true
		case strings.HasPrefix(line, "field:"):
			fd, err := parseField(line)
			if err != nil {
				return nil, err
			}
			f.Fields = append(f.Fields, fd)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	if f.Name == "" || !haveID || len(f.Fields) == 0 {
		return nil, fmt.Errorf("%w: missing name, ID or fields", ErrFormat)
	}
	return f, nil
}

// parseField parses "field:<decl>;\toffset:N;\tsize:N;\tsigned:N;".
func parseField(line string) (Field, error) {
	var fd Field
	var haveOff, haveSize bool
	for _, part := range strings.Split(line, ";") {
		part = strings.TrimSpace(part)
		key, val, ok := strings.Cut(part, ":")
		if !ok {
			continue
		}
		var err error
		switch key {
		case "field":
			fd.Decl = strings.TrimSpace(val)
			fd.Name = declName(fd.Decl)
		case "offset":
			fd.Offset, err = strconv.Atoi(val)
			haveOff = true
		case "size":
			fd.Size, err = strconv.Atoi(val)
			haveSize = true
		case "signed":
			fd.Signed = val == "1"
		}
		if err != nil {
			return Field{}, fmt.Errorf("%w: %q: %v", ErrFormat, line, err)
		}
	}
	if fd.Name == "" || !haveOff || !haveSize || fd.Offset < 0 || fd.Size < 0 {
		return Field{}, fmt.Errorf("%w: field line %q", ErrFormat, line)
	}
	return fd, nil
}

// declName extracts the identifier of a C declaration: "unsigned long
// vcpu_pc" -> vcpu_pc, "char comm[16]" -> comm, "__data_loc char[] msg" ->
// msg.
func declName(decl string) string {
	fields := strings.Fields(decl)
	if len(fields) == 0 {
		return ""
	}
	name := fields[len(fields)-1]
	if i := strings.IndexByte(name, '['); i >= 0 {
		name = name[:i]
	}
	return strings.TrimLeft(name, "*")
}
