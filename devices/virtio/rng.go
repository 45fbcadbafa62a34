//go:build linux

package virtio

import (
	"golang.org/x/sys/unix"
)

// virtio-rng (virtio 1.2 section 5.4): one queue of device-writable buffers
// that the device fills with entropy. It has no features and no
// configuration.
const (
	rngDeviceID  = 4
	rngQueueSize = 64
	// rngMaxRequest bounds the bytes given per request, so a driver asking
	// for a huge buffer cannot keep the worker in getrandom for long.
	rngMaxRequest = 64 << 10
)

// RNG is a virtio-rng device fed from getrandom(2).
type RNG struct {
	w workers
}

// NewRNG returns the entropy device.
func NewRNG() *RNG { return &RNG{} }

// Name implements Device.
func (r *RNG) Name() string { return "virtio-rng" }

// ID implements Device.
func (r *RNG) ID() uint32 { return rngDeviceID }

// Features implements Device.
func (r *RNG) Features() uint64 { return 0 }

// QueueMax implements Device.
func (r *RNG) QueueMax() []uint16 { return []uint16{rngQueueSize} }

// ReadConfig implements Device: there is no configuration space.
func (r *RNG) ReadConfig(off uint64, data []byte) {}

// Start implements Device.
func (r *RNG) Start(env *Env) error {
	r.w.serve(env, 0, func(q *Queue) (bool, error) {
		return drainChains(q, func(err error) { env.Problem("rng request", err) }, func(c *Chain) uint32 {
			return fillRandom(c.Writable, env)
		})
	})
	return nil
}

// fillRandom fills bufs (up to rngMaxRequest bytes) and returns the count.
func fillRandom(bufs [][]byte, env *Env) uint32 {
	n := 0
	for _, b := range bufs {
		if n+len(b) > rngMaxRequest {
			b = b[:rngMaxRequest-n]
		}
		for len(b) > 0 {
			k, err := unix.Getrandom(b, 0)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				env.Problem("getrandom", err)
				return uint32(n)
			}
			b = b[k:]
			n += k
		}
		if n == rngMaxRequest {
			break
		}
	}
	return uint32(n)
}

// Stop implements Device.
func (r *RNG) Stop() { r.w.wait() }

// Close implements Device.
func (r *RNG) Close() error { return nil }
