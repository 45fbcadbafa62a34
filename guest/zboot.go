package guest

import "encoding/binary"

// Zboot wraps payload, a compressed kernel Image, in an EFI zboot image
// laid out as Linux builds one (drivers/firmware/efi/libstub/zboot-header.S,
// Makefile.zboot): "MZ", "zimg" at 4, the le32 payload offset at 8, the
// le32 payload size at 12 (the payload less its last trailer bytes: the
// le32 uncompressed size the kernel's *_with_size compressors append,
// Makefile.zboot's zboot-size-len), the NUL-padded compression name at 24
// ("gzip", "zstd22", ...), LINUX_PE_MAGIC at 0x38 and the PE header's
// offset at 0x3c. Then stand-in stub code, the payload at 0x1000, and
// padding to a 4 KiB section boundary. There is no EFI code in it: it is
// for VMMs that unpack the payload themselves, as mvm does.
func Zboot(payload []byte, comp string, trailer int) []byte {
	const off = 0x1000
	b := make([]byte, off, off+len(payload)+0x1000)
	copy(b, "MZ")
	copy(b[4:], "zimg")
	le := binary.LittleEndian
	le.PutUint32(b[8:], off)
	le.PutUint32(b[12:], uint32(len(payload)-trailer))
	copy(b[24:0x38], comp)
	le.PutUint32(b[0x38:], 0x818223cd) // LINUX_PE_MAGIC, include/linux/pe.h
	le.PutUint32(b[0x3c:], 0x40)
	copy(b[0x40:], "PE\x00\x00")
	for i := 0x200; i < off; i++ {
		b[i] = byte(i * 7)
	}
	b = append(b, payload...)
	return append(b, make([]byte, 0x1000-len(payload)%0x1000)...)
}
