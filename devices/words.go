package devices

// readWords fills data, an access of any width at off, from a device whose
// registers are 32-bit words (the AMBA PrimeCells: PL011, PL031): each word
// the access touches is read once with reg (reads may have side effects,
// such as the PL011's DR popping its receive FIFO) and its bytes are taken
// little-endian.
func readWords(off uint64, data []byte, reg func(aligned uint64) uint32) {
	var word uint32
	wordAt := ^uint64(0)
	for i := range data {
		o := off + uint64(i)
		if a := o &^ 3; a != wordAt {
			wordAt, word = a, reg(a)
		}
		data[i] = byte(word >> (8 * (o & 3)))
	}
}
