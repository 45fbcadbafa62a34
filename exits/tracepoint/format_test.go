package tracepoint

import (
	"errors"
	"strings"
	"testing"
)

// arm64KVMExitFormat is kvm:kvm_exit as arch/arm64/kvm/trace_arm.h declares
// it (int ret; unsigned int esr_ec; unsigned long vcpu_pc), laid out after
// the 8-byte common header the way the kernel prints it.
const arm64KVMExitFormat = `name: kvm_exit
ID: 90
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:unsigned char common_flags;	offset:2;	size:1;	signed:0;
	field:unsigned char common_preempt_count;	offset:3;	size:1;	signed:0;
	field:int common_pid;	offset:4;	size:4;	signed:1;

	field:int ret;	offset:8;	size:4;	signed:1;
	field:unsigned int esr_ec;	offset:12;	size:4;	signed:0;
	field:unsigned long vcpu_pc;	offset:16;	size:8;	signed:0;

print fmt: "%s: HSR_EC: 0x%04x (%s), PC: 0x%016lx", __print_symbolic(REC->ret, {0, "IRQ"}), REC->esr_ec, "x", REC->vcpu_pc
`

const arm64KVMEntryFormat = `name: kvm_entry
ID: 91
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:unsigned char common_flags;	offset:2;	size:1;	signed:0;
	field:unsigned char common_preempt_count;	offset:3;	size:1;	signed:0;
	field:int common_pid;	offset:4;	size:4;	signed:1;

	field:unsigned long vcpu_pc;	offset:8;	size:8;	signed:0;

print fmt: "PC: 0x%016lx", REC->vcpu_pc
`

// x86KVMExitFormat is the field part of this x86_64 host's
// /sys/kernel/tracing/events/kvm/kvm_exit/format (Linux 6.18).
const x86KVMExitFormat = `name: kvm_exit
ID: 103
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:unsigned char common_flags;	offset:2;	size:1;	signed:0;
	field:unsigned char common_preempt_count;	offset:3;	size:1;	signed:0;
	field:int common_pid;	offset:4;	size:4;	signed:1;

	field:unsigned int exit_reason;	offset:8;	size:4;	signed:0;
	field:unsigned long guest_rip;	offset:16;	size:8;	signed:0;
	field:u32 isa;	offset:24;	size:4;	signed:0;
	field:u64 info1;	offset:32;	size:8;	signed:0;
	field:u64 info2;	offset:40;	size:8;	signed:0;
	field:u32 intr_info;	offset:48;	size:4;	signed:0;
	field:u32 error_code;	offset:52;	size:4;	signed:0;
	field:unsigned int vcpu_id;	offset:56;	size:4;	signed:0;
	field:u64 requests;	offset:64;	size:8;	signed:0;

print fmt: "vcpu %u reason %s%s%s rip 0x%lx", REC->vcpu_id, "x", "", "", REC->guest_rip
`

func TestParseFormat(t *testing.T) {
	f, err := ParseFormat("kvm", []byte(arm64KVMExitFormat))
	if err != nil {
		t.Fatal(err)
	}
	if f.Name != "kvm_exit" || f.ID != 90 || f.String() != "kvm:kvm_exit" || len(f.Fields) != 7 {
		t.Fatalf("format %+v", f)
	}
	ret, ok := f.Field("ret")
	if !ok || ret.Offset != 8 || ret.Size != 4 || !ret.Signed || ret.Decl != "int ret" {
		t.Errorf("ret %+v", ret)
	}
	if pc, ok := f.Field("vcpu_pc"); !ok || pc.Offset != 16 || pc.Size != 8 || pc.Signed {
		t.Errorf("vcpu_pc %+v", pc)
	}
	if _, ok := f.Field("nope"); ok {
		t.Error("unknown field found")
	}

	x, err := ParseFormat("kvm", []byte(x86KVMExitFormat))
	if err != nil {
		t.Fatal(err)
	}
	if isa, ok := x.Field("isa"); !ok || isa.Offset != 24 || isa.Size != 4 {
		t.Errorf("isa %+v", isa)
	}
	for decl, name := range map[string]string{
		"char comm[16]":           "comm",
		"__data_loc char[] msg":   "msg",
		"const char * name":       "name",
		"unsigned long *ptr":      "ptr",
		"struct foo bar":          "bar",
		"unsigned long long cnt ": "cnt",
	} {
		if got := declName(decl); got != name {
			t.Errorf("declName(%q) = %q, want %q", decl, got, name)
		}
	}
}

func TestParseFormatErrors(t *testing.T) {
	for name, text := range map[string]string{
		"empty":      "",
		"no id":      "name: x\nformat:\n\tfield:int a;\toffset:0;\tsize:4;\tsigned:1;\n",
		"bad id":     "name: x\nID: 1x\n",
		"no fields":  "name: x\nID: 1\nformat:\n",
		"bad offset": "name: x\nID: 1\n\tfield:int a;\toffset:zz;\tsize:4;\tsigned:1;\n",
		"no size":    "name: x\nID: 1\n\tfield:int a;\toffset:0;\n",
		"neg offset": "name: x\nID: 1\n\tfield:int a;\toffset:-4;\tsize:4;\tsigned:1;\n",
		"no name":    "name: x\nID: 1\n\tfield: ;\toffset:0;\tsize:4;\tsigned:1;\n",
		"huge line":  "name: x\nID: 1\n" + strings.Repeat("x", 2<<20),
	} {
		if _, err := ParseFormat("s", []byte(text)); !errors.Is(err, ErrFormat) {
			t.Errorf("%s: err %v", name, err)
		}
	}
}

func TestFieldUint(t *testing.T) {
	raw := []byte{0xfe, 0xff, 0xff, 0xff, 0x02, 0x00, 0x00, 0x80, 0xff, 1, 2, 3, 4, 5, 6, 7}
	for _, tc := range []struct {
		f    Field
		want uint64
		ok   bool
	}{
		{Field{Offset: 0, Size: 4, Signed: true}, 0xffff_ffff_ffff_fffe, true}, // int -2
		{Field{Offset: 0, Size: 4}, 0xffff_fffe, true},
		{Field{Offset: 4, Size: 4}, 0x8000_0002, true},
		{Field{Offset: 8, Size: 1, Signed: true}, ^uint64(0), true},
		{Field{Offset: 8, Size: 1}, 0xff, true},
		{Field{Offset: 0, Size: 2, Signed: true}, ^uint64(1), true},
		{Field{Offset: 0, Size: 2}, 0xfffe, true},
		{Field{Offset: 8, Size: 8}, 0x07060504030201ff, true},
		{Field{Offset: 9, Size: 8}, 0, false}, // past the end
		{Field{Offset: 0, Size: 3}, 0, false}, // not an integer size
		{Field{Offset: -1, Size: 1}, 0, false},
	} {
		v, ok := tc.f.Uint(raw)
		if v != tc.want || ok != tc.ok {
			t.Errorf("%+v: got %#x %v, want %#x %v", tc.f, v, ok, tc.want, tc.ok)
		}
	}
}

func FuzzParseFormat(f *testing.F) {
	f.Add([]byte(arm64KVMExitFormat))
	f.Add([]byte(x86KVMExitFormat))
	f.Fuzz(func(t *testing.T, b []byte) {
		ff, err := ParseFormat("kvm", b)
		if err != nil {
			return
		}
		raw := make([]byte, 16)
		for _, fd := range ff.Fields {
			fd.Uint(raw)
		}
	})
}
