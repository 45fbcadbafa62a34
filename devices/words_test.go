package devices

import (
	"bytes"
	"testing"
)

// Each touched word is read once, and the bytes come out little-endian
// across a word boundary.
func TestReadWords(t *testing.T) {
	reads := map[uint64]int{}
	reg := func(a uint64) uint32 { reads[a]++; return uint32(0x44332211 + a) }
	data := make([]byte, 6)
	readWords(2, data, reg)
	want := []byte{0x33, 0x44, 0x15, 0x22, 0x33, 0x44}
	if !bytes.Equal(data, want) {
		t.Errorf("readWords(2, 6 bytes) = % x, want % x", data, want)
	}
	if reads[0] != 1 || reads[4] != 1 || len(reads) != 2 {
		t.Errorf("register reads %v, want words 0 and 4 once each", reads)
	}
}
