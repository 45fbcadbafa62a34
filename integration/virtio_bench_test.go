//go:build linux && arm64

package integration

import (
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mvm-dev/mvm/exits"
	"github.com/mvm-dev/mvm/internal/labclock"
)

// TestMain lets this test binary double as the disk and network load tool
// of BenchmarkVirtio inside the guest (MVM_GUEST_TOOL=seq|rand|fetch), so
// the guest and the lab host run the same code.
func TestMain(m *testing.M) {
	if tool := os.Getenv("MVM_GUEST_TOOL"); tool != "" {
		out, err := loadTool(tool, os.Args[1:])
		if err != nil {
			fmt.Fprintln(os.Stderr, "load tool:", err)
			os.Exit(1)
		}
		fmt.Println(out)
		os.Exit(0)
	}
	flag.Parse()
	labclock.AnnounceIfBenchmarking(os.Stdout)
	os.Exit(m.Run())
}

// loadTool runs one load and returns its result line:
//
//	seq PATH direct       read PATH in 1 MiB requests: "seq MBPS BYTES"
//	rand PATH direct N    N random 4 KiB reads: "rand IOPS N"
//	fetch URL             HTTP GET, body discarded: "fetch MBPS BYTES"
//
// direct (1 or 0) opens with O_DIRECT, which the guest uses on /dev/vda
// so its page cache does not answer instead of the device.
func loadTool(tool string, args []string) (string, error) {
	switch tool {
	case "seq", "rand":
		if len(args) < 2 {
			return "", fmt.Errorf("%s: want PATH DIRECT", tool)
		}
		flags := os.O_RDONLY
		if args[1] == "1" {
			flags |= unix.O_DIRECT
		}
		f, err := os.OpenFile(args[0], flags, 0)
		if err != nil {
			return "", err
		}
		defer f.Close()
		size, err := f.Seek(0, io.SeekEnd)
		if err != nil {
			return "", err
		}
		// O_DIRECT wants aligned buffers: an anonymous mapping is.
		buf, err := unix.Mmap(-1, 0, 1<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			return "", err
		}
		// Each read is a raw pread64 (no entersyscall): to the Go runtime
		// the goroutine keeps running, so sysmon, which retakes the P of
		// a goroutine blocked in a system call for more than 20 µs and
		// keeps waking every 20 µs while it does, backs off to 10 ms.
		// Through os.File a guest's read cost it a timer interrupt every
		// 20 µs or so, and in the instruction-time lab the same guest's
		// 4 KiB reads then took anywhere between 60 and 190 µs
		// (BenchmarkBlkQEMU, docs/devices.md). Nothing in the loop
		// allocates, so no stop-the-world waits on a blocked read.
		fd := f.Fd()
		pread := func(b []byte, off int64) (int, error) {
			n, _, e := unix.RawSyscall6(unix.SYS_PREAD64, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(off), 0, 0)
			if e != 0 {
				return int(n), fmt.Errorf("pread at %d: %w", off, e)
			}
			return int(n), nil
		}
		if tool == "seq" {
			start := time.Now()
			var n int64
			for off := int64(0); off < size; off += int64(len(buf)) {
				k, err := pread(buf, off)
				n += int64(k)
				if err != nil {
					return "", err
				}
				if k == 0 {
					break
				}
			}
			return fmt.Sprintf("seq %.3f %d", float64(n)/1e6/time.Since(start).Seconds(), n), nil
		}
		count, err := strconv.Atoi(args[2])
		if err != nil {
			return "", err
		}
		r := rand.New(rand.NewPCG(1, 2))
		blocks := size / 4096
		start := time.Now()
		for range count {
			if k, err := pread(buf[:4096], r.Int64N(blocks)*4096); err != nil || k != 4096 {
				return "", fmt.Errorf("random read: %d bytes, %v", k, err)
			}
		}
		return fmt.Sprintf("rand %.1f %d", float64(count)/time.Since(start).Seconds(), count), nil
	case "fetch":
		if len(args) < 1 {
			return "", fmt.Errorf("fetch: want URL")
		}
		start := time.Now()
		resp, err := (&http.Client{Timeout: 5 * time.Minute}).Get(args[0])
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		n, err := io.Copy(io.Discard, resp.Body)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("fetch %.3f %d", float64(n)/1e6/time.Since(start).Seconds(), n), nil
	}
	return "", fmt.Errorf("unknown tool %q", tool)
}

// runTool runs loadTool in a child process on the lab host (the baseline)
// and returns the first number of its line.
func runTool(b *testing.B, tool string, args ...string) float64 {
	b.Helper()
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), "MVM_GUEST_TOOL="+tool)
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("%s %v: %v\n%s", tool, args, err, out)
	}
	return toolValue(b, string(out), tool)
}

func toolValue(b *testing.B, out, tool string) float64 {
	b.Helper()
	m := regexp.MustCompile(`(?m)^` + tool + ` ([0-9.]+) \d+`).FindStringSubmatch(out)
	if m == nil {
		b.Fatalf("no %q result in:\n%s", tool, out)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

const (
	benchDiskSize = 64 << 20
	benchRandOps  = 2000
)

// BenchmarkVirtio: one guest per iteration reads a 64 MiB virtio-blk disk
// sequentially in 1 MiB requests (O_DIRECT) and with 4 KiB random reads,
// then downloads the same 64 MiB over virtio-net from an HTTP server on
// the lab host. The lab host reads the same file the same ways (from its
// page cache, which is where mvm's reads come from too) and fetches it over
// loopback in the same iteration: the ratios are guest/host. exits/MiB is
// the virtio-blk MMIO exits that reach mvm (the whole boot, probe
// included) per MiB the guest read.
func BenchmarkVirtio(b *testing.B) {
	const tap = "mvmtap2"
	labTap(b, tap, "192.0.2.1/24")
	dir := b.TempDir()
	disk := randomFile(b, dir, "disk.img", benchDiskSize)
	httpd := exec.Command("httpd", "-f", "-p", "8080", "-h", dir)
	if err := httpd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { httpd.Process.Kill(); httpd.Wait() })
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := fmt.Sprintf(`
ip link set eth0 up
ip addr add 192.0.2.2/24 dev eth0
export MVM_GUEST_TOOL
MVM_GUEST_TOOL=seq /bin/tool /dev/vda 1
MVM_GUEST_TOOL=rand /bin/tool /dev/vda 1 %d
MVM_GUEST_TOOL=fetch /bin/tool http://192.0.2.1:8080/disk.img
`, benchRandOps)
	initrd := virtioInitrdWith(b, map[string]string{"bin/tool": self}, cmd)
	runTool(b, "seq", disk, "0") // warm the lab host's page cache

	var seqG, seqH, randG, randH, netG, netH, exitsPerMiB []float64
	for i := 0; i < b.N; i++ {
		seqH = append(seqH, runTool(b, "seq", disk, "0"))
		randH = append(randH, runTool(b, "rand", disk, "0", strconv.Itoa(benchRandOps)))
		netH = append(netH, runTool(b, "fetch", "http://127.0.0.1:8080/disk.img"))

		prof := filepath.Join(b.TempDir(), "profile.json")
		r := mvm(b, 10*time.Minute, "run", "--kernel", env(b, "MVM_LINUX"), "--initrd", initrd, "--memory", "512M",
			"--append", "quiet", "--disk", disk+",ro", "--net", "tap="+tap, "--rng=false",
			"--profile", "--profile-sources", "userspace", "--profile-format", "json", "--profile-out", prof)
		if r.code != 0 {
			b.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
		seqG = append(seqG, toolValue(b, r.stdout, "seq"))
		randG = append(randG, toolValue(b, r.stdout, "rand"))
		netG = append(netG, toolValue(b, r.stdout, "fetch"))
		read := float64(benchDiskSize+benchRandOps*4096) / (1 << 20)
		exitsPerMiB = append(exitsPerMiB, float64(blkExits(b, prof))/read)
	}
	ratio := func(g, h []float64) []float64 {
		out := make([]float64, len(g))
		for i := range g {
			out[i] = g[i] / h[i]
		}
		return out
	}
	report := func(v []float64, unit string) {
		b.ReportMetric(median(v), unit)
		fmt.Fprintf(os.Stderr, "virtio bench %s: median %.4g, min..max %s (n=%d)\n", unit, median(v), spread(v), len(v))
	}
	report(seqG, "guest-seq-MB/s")
	report(seqH, "host-seq-MB/s")
	report(ratio(seqG, seqH), "seq-guest/host")
	report(randG, "guest-rand4k-IOPS")
	report(randH, "host-rand4k-IOPS")
	report(ratio(randG, randH), "rand4k-guest/host")
	report(netG, "guest-net-MB/s")
	report(netH, "host-loopback-MB/s")
	report(ratio(netG, netH), "net-guest/host-loopback")
	report(exitsPerMiB, "blk-exits/MiB")
	b.ReportMetric(0, "ns/op")
}

func spread(v []float64) string {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return fmt.Sprintf("%.4g..%.4g", s[0], s[len(s)-1])
}

// blkExits is the userspace MMIO exits for virtio-blk0 in a profile.
func blkExits(b *testing.B, path string) uint64 {
	b.Helper()
	rep := readJSON[exits.Report](b, path)
	for _, row := range rep.Rows {
		if row.Source == exits.SourceUserspace && row.VCPU == "total" && row.Sub == "virtio-blk0" {
			return row.Count
		}
	}
	b.Fatalf("no userspace row for virtio-blk0 in %s", path)
	return 0
}
