package cmdmode

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestBuild unpacks the initramfs with the host's cpio (GNU cpio reads
// newc, as the kernel's unpacker does): /init is the given binary,
// executable; the config says what the host gave it; each module is there
// with its bytes, listed in the load order given.
func TestBuild(t *testing.T) {
	cpio, err := exec.LookPath("cpio")
	if err != nil {
		t.Skip("no cpio on this host (lab/host-deps.sh installs it)")
	}
	src := t.TempDir()
	var mods []Module
	for _, n := range []string{"virtio_ring.ko.zst", "virtio_mmio.ko"} {
		p := filepath.Join(src, n)
		writeFile(t, p, "module "+n)
		name, _ := moduleName(n)
		mods = append(mods, Module{Name: name, Path: p})
	}
	initBin := []byte("\x7fELF pretend init \x00\xff")
	cfg := GuestConfig{Args: []string{"uname", "-r"}, Env: []string{"PATH=/bin"}, Dir: "/home/u", UID: 1000, GID: 100,
		Groups: []int{100, 27}, RootTag: RootTag, Tmpfs: DefaultTmpfs, Shares: []GuestMount{{Tag: "share0", At: "/srv", ReadOnly: true}}}
	data, err := build(initBin, cfg, mods)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cmd := exec.Command(cpio, "-idm", "--quiet", "--no-absolute-filenames")
	cmd.Dir = out
	cmd.Stdin = bytes.NewReader(data)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cpio: %v\n%s", err, b)
	}
	st, err := os.Stat(filepath.Join(out, "init"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o755 {
		t.Errorf("/init mode %v, want 0755", st.Mode().Perm())
	}
	if got, _ := os.ReadFile(filepath.Join(out, "init")); !bytes.Equal(got, initBin) {
		t.Errorf("/init holds %q, want the binary given", got)
	}
	js, err := os.ReadFile(filepath.Join(out, ConfigPath))
	if err != nil {
		t.Fatal(err)
	}
	var got GuestConfig
	if err := json.Unmarshal(js, &got); err != nil {
		t.Fatal(err)
	}
	if got.Dir != cfg.Dir || got.UID != 1000 || got.GID != 100 || len(got.Groups) != 2 || got.Args[1] != "-r" || got.Shares[0].At != "/srv" || !got.Shares[0].ReadOnly {
		t.Errorf("config %+v does not say what was given (%+v)", got, cfg)
	}
	if len(got.Modules) != len(mods) {
		t.Fatalf("config lists modules %v, want %d", got.Modules, len(mods))
	}
	for i, p := range got.Modules {
		b, err := os.ReadFile(filepath.Join(out, p))
		if err != nil {
			t.Errorf("module %d: %v", i, err)
			continue
		}
		if want, _ := os.ReadFile(mods[i].Path); !bytes.Equal(b, want) {
			t.Errorf("module %d (%s) holds %q, want %q", i, p, b, want)
		}
		if Compressed(p) != Compressed(mods[i].Path) {
			t.Errorf("module %d's name %s lost its compression suffix", i, p)
		}
	}
	for _, d := range []string{"proc", "sys", "dev", "newroot"} {
		if st, err := os.Stat(filepath.Join(out, d)); err != nil || !st.IsDir() {
			t.Errorf("no /%s directory: %v", d, err)
		}
	}
}

// TestBuildMissingModule: a module file that went missing is an error
// naming it.
func TestBuildMissingModule(t *testing.T) {
	_, err := build([]byte("x"), GuestConfig{}, []Module{{Name: "fuse", Path: filepath.Join(t.TempDir(), "fuse.ko")}})
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("fuse")) {
		t.Errorf("Build with a missing module: %v", err)
	}
}

// build is Archive written out, for the tests to read back.
func build(init []byte, cfg GuestConfig, modules []Module) ([]byte, error) {
	a, err := Archive(InitFile{Size: int64(len(init)), Open: func() (io.Reader, error) { return bytes.NewReader(init), nil }}, cfg, modules)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.Grow(int(a.Size()))
	if _, err := a.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
