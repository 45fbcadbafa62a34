//go:build linux

package virtio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"syscall"
	"unsafe"

	hvirtio "github.com/c35s/hype/virtio"
	"golang.org/x/sys/unix"
)

// virtio-blk (virtio 1.2 section 5.2).
const (
	blkFSegMax = 1 << 2 // VIRTIO_BLK_F_SEG_MAX: seg_max is valid
	blkFRO     = 1 << 5 // VIRTIO_BLK_F_RO
	blkFFlush  = 1 << 9 // VIRTIO_BLK_F_FLUSH

	blkTIn    = 0
	blkTOut   = 1
	blkTFlush = 4
	blkTGetID = 8

	blkSOK     = 0
	blkSIOErr  = 1
	blkSUnsupp = 2

	blkHeaderSize = 16 // struct virtio_blk_req: type, reserved, sector
	blkIDBytes    = 20 // VIRTIO_BLK_ID_BYTES
	sectorSize    = 512
	blkQueueSize  = 256
	// blkSegMax leaves room in a full direct chain for the header and
	// status descriptors.
	blkSegMax = blkQueueSize - 2
)

// Block is a virtio-blk device on a raw image file.
type Block struct {
	name   string
	path   string
	f      *os.File
	size   uint64
	ro     bool
	serial string
	w      workers
	// iov is the request path's iovec array, reused from request to
	// request (one worker per Block): a read of 254 scattered pages
	// otherwise allocated it, and the [][]byte copies around it, anew
	// each time (BenchmarkBlockRequest).
	iov []unix.Iovec
}

// OpenDisk opens a raw image for a virtio-blk device, read-only or not,
// and takes an advisory lock on it (flock: shared for read-only, exclusive
// otherwise), so a second mvm cannot write an image another one uses.
// Errors are one sentence naming path and what to do.
func OpenDisk(name, path string, readOnly bool) (*Block, error) {
	f, size, err := openImage(path, readOnly)
	if err != nil {
		return nil, err
	}
	lock := unix.LOCK_EX
	if readOnly {
		lock = unix.LOCK_SH
	}
	if err := unix.Flock(int(f.Fd()), lock|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("disk image %s is in use by another process (another mvm has it open writable, or read-only while this one wants to write): stop it or use a copy", path)
		}
		return nil, fmt.Errorf("lock disk image %s: %w", path, err)
	}
	return &Block{name: name, path: path, f: f, size: size, ro: readOnly, serial: name}, nil
}

// CheckDisk checks what OpenDisk checks of the file itself, without keeping
// it open or locking it: that it exists, is a regular file of a non-zero
// multiple of 512 bytes, and opens with the access asked for. Its errors
// are OpenDisk's.
func CheckDisk(path string, readOnly bool) error {
	f, _, err := openImage(path, readOnly)
	if err != nil {
		return err
	}
	return f.Close()
}

// openImage opens a raw image file read-write or read-only and returns its
// size.
func openImage(path string, readOnly bool) (*os.File, uint64, error) {
	flags := os.O_RDWR
	if readOnly {
		flags = os.O_RDONLY
	}
	st, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, 0, fmt.Errorf("disk image %s does not exist: create one (e.g. truncate -s 1G %s, or mkfs.ext4 it)", path, path)
		}
		return nil, 0, fmt.Errorf("disk image %s: %w", path, err)
	}
	if st.IsDir() {
		return nil, 0, fmt.Errorf("disk image %s is a directory: give a raw image file", path)
	}
	if !st.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("disk image %s is not a regular file: mvm takes raw image files", path)
	}
	size := uint64(st.Size())
	if size == 0 || size%sectorSize != 0 {
		return nil, 0, fmt.Errorf("disk image %s is %d bytes, not a non-zero multiple of 512: resize it (truncate -s)", path, size)
	}
	f, err := os.OpenFile(path, flags|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, os.ErrPermission) && !readOnly {
			return nil, 0, fmt.Errorf("disk image %s is not writable by this user: fix its permissions or attach it with ,ro", path)
		}
		if errors.Is(err, os.ErrPermission) {
			return nil, 0, fmt.Errorf("disk image %s is not readable by this user: fix its permissions", path)
		}
		return nil, 0, fmt.Errorf("open disk image %s: %w", path, err)
	}
	return f, size, nil
}

// Name implements Device.
func (b *Block) Name() string { return b.name }

// ID implements Device.
func (b *Block) ID() uint32 { return uint32(hvirtio.BlockDeviceID) }

// Size is the image size in bytes.
func (b *Block) Size() uint64 { return b.size }

// ReadOnly reports whether the device refuses writes.
func (b *Block) ReadOnly() bool { return b.ro }

// Features implements Device. VIRTIO_F_EVENT_IDX lets the driver skip the
// notification (an ioeventfd exit) of a request it adds while the worker
// is still draining the queue, and lets the device skip interrupts the
// driver did not ask for (docs/devices.md, "Request path").
func (b *Block) Features() uint64 {
	f := uint64(blkFSegMax|blkFFlush) | hvirtio.FIndirectDesc | hvirtio.FEventIdx
	if b.ro {
		f |= blkFRO
	}
	return f
}

// QueueMax implements Device: one request queue.
func (b *Block) QueueMax() []uint16 { return []uint16{blkQueueSize} }

// ReadConfig implements Device: struct virtio_blk_config's capacity (in
// 512-byte sectors, at 0) and seg_max (at 12).
func (b *Block) ReadConfig(off uint64, data []byte) {
	var cfg [16]byte
	binary.LittleEndian.PutUint64(cfg[0:], b.size/sectorSize)
	binary.LittleEndian.PutUint32(cfg[12:], blkSegMax)
	if off < uint64(len(cfg)) {
		copy(data, cfg[off:])
	}
}

// Start implements Device.
func (b *Block) Start(env *Env) error {
	b.w.serve(env, 0, func(q *Queue) (bool, error) {
		return drainChains(q, func(err error) { env.Problem("block request", err) }, func(c *Chain) uint32 {
			return b.request(env, c)
		})
	})
	return nil
}

// Stop implements Device.
func (b *Block) Stop() { b.w.wait() }

// Close implements Device: what the guest wrote reaches the disk before
// the image is unlocked and closed.
func (b *Block) Close() error {
	var err error
	if !b.ro {
		if err = unix.Fdatasync(int(b.f.Fd())); err != nil {
			err = fmt.Errorf("sync disk image %s: %w", b.path, err)
		}
	}
	if cerr := b.f.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("close disk image %s: %w", b.path, cerr)
	}
	return err
}

// request serves one chain: the 16-byte header in the readable part, the
// data after it (writes) or before the status byte (reads), the status in
// the last writable byte. It returns the bytes written to the chain.
func (b *Block) request(env *Env, c *Chain) uint32 {
	status, data, ok := splitLast(c.Writable)
	if !ok {
		env.Problem("block request", errors.New("request without a status byte"))
		return 0
	}
	var hdr [blkHeaderSize]byte
	out, ok := splitFirst(c.Readable, hdr[:])
	if !ok {
		env.Problem("block request", errors.New("request header shorter than 16 bytes"))
		*status = blkSIOErr
		return 1
	}
	typ := binary.LittleEndian.Uint32(hdr[0:])
	sector := binary.LittleEndian.Uint64(hdr[8:])
	written := uint32(1)
	st := uint8(blkSOK)
	switch typ {
	case blkTIn:
		n := totalLen(data)
		if !b.inRange(sector, n) {
			st = blkSIOErr
			break
		}
		if err := vectored(b.f, unix.SYS_PREADV, &b.iov, data, int64(sector*sectorSize), "read"); err != nil {
			env.Problem("block read", err)
			st = blkSIOErr
			break
		}
		written += uint32(n)
	case blkTOut:
		if b.ro || !b.inRange(sector, totalLen(out)) {
			st = blkSIOErr
			break
		}
		if err := vectored(b.f, unix.SYS_PWRITEV, &b.iov, out, int64(sector*sectorSize), "write"); err != nil {
			env.Problem("block write", err)
			st = blkSIOErr
		}
	case blkTFlush:
		if !b.ro {
			if err := unix.Fdatasync(int(b.f.Fd())); err != nil {
				env.Problem("block flush", err)
				st = blkSIOErr
			}
		}
	case blkTGetID:
		var id [blkIDBytes]byte
		copy(id[:], b.serial)
		n := scatter(data, id[:])
		written += uint32(n)
	default:
		st = blkSUnsupp
	}
	*status = st
	return written
}

// inRange reports whether n bytes at sector lie inside the image.
func (b *Block) inRange(sector uint64, n int) bool {
	if sector > b.size/sectorSize {
		return false
	}
	return uint64(n) <= b.size-sector*sectorSize
}

// splitLast returns a pointer to the last byte of bufs and the buffers
// before it.
func splitLast(bufs [][]byte) (*byte, [][]byte, bool) {
	for i := len(bufs) - 1; i >= 0; i-- {
		if n := len(bufs[i]); n == 1 {
			// The status byte in a buffer of its own, as Linux sends it.
			return &bufs[i][0], bufs[:i], true
		} else if n > 0 {
			rest := append(bufs[:i:i], bufs[i][:n-1])
			return &bufs[i][n-1], rest, true
		}
	}
	return nil, nil, false
}

// splitFirst copies the first len(dst) bytes of bufs into dst and returns
// the buffers after them.
func splitFirst(bufs [][]byte, dst []byte) ([][]byte, bool) {
	need := len(dst)
	for i, b := range bufs {
		k := copy(dst[len(dst)-need:], b)
		need -= k
		if need == 0 {
			rest := bufs[i+1:]
			if k < len(b) {
				rest = append([][]byte{b[k:]}, rest...)
			}
			return rest, true
		}
	}
	return nil, false
}

// scatter copies src across bufs and returns the bytes copied.
func scatter(bufs [][]byte, src []byte) int {
	n := 0
	for _, b := range bufs {
		if n == len(src) {
			break
		}
		n += copy(b, src[n:])
	}
	return n
}

// maxIOV is the most iovecs one preadv/pwritev takes (UIO_MAXIOV).
const maxIOV = 1024

// vectored reads (SYS_PREADV) or writes (SYS_PWRITEV) the whole of bufs
// at off in f, its empty buffers left out, at most maxIOV at a time. The
// iovec array is built in *scratch, which it keeps for the next call.
func vectored(f *os.File, nr uintptr, scratch *[]unix.Iovec, bufs [][]byte, off int64, what string) error {
	iov := (*scratch)[:0]
	for _, b := range bufs {
		if len(b) > 0 {
			v := unix.Iovec{Base: &b[0]}
			v.SetLen(len(b))
			iov = append(iov, v)
		}
	}
	*scratch = iov
	fd := f.Fd()
	for len(iov) > 0 {
		chunk := iov[:min(len(iov), maxIOV)]
		// preadv(fd, iov, iovcnt, pos_l, pos_h): on a 64-bit kernel
		// pos_l is the whole offset (fs/read_write.c, pos_from_hilo).
		n, _, errno := unix.Syscall6(nr, fd, uintptr(unsafe.Pointer(&chunk[0])), uintptr(len(chunk)), uintptr(off), 0, 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return fmt.Errorf("%s at %d: %w", what, off, errno)
		}
		if n == 0 {
			return fmt.Errorf("%s at %d: unexpected end of file", what, off)
		}
		off += int64(n)
		iov = skipIOV(iov, uint64(n))
	}
	return nil
}

// skipIOV drops the first n bytes of iov.
func skipIOV(iov []unix.Iovec, n uint64) []unix.Iovec {
	for n > 0 && len(iov) > 0 {
		if n < iov[0].Len {
			iov[0].Base = (*byte)(unsafe.Add(unsafe.Pointer(iov[0].Base), n))
			iov[0].Len -= n
			return iov
		}
		n -= iov[0].Len
		iov = iov[1:]
	}
	return iov
}

func nonEmpty(bufs [][]byte) [][]byte {
	out := bufs[:0:0]
	for _, b := range bufs {
		if len(b) > 0 {
			out = append(out, b)
		}
	}
	return out
}
