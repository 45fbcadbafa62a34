package report

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The browser test renders the reports of real lab runs with Debian's
// chromium, headless: `make test` runs it on the JSON files its lab run
// brought back (MVM_REPORT_FIXTURES, a list: out/lab-out and out/lab-out-insn,
// see the Makefile); with
// MVM_REPORT_SHOTS=DIR it also keeps the screenshots (docs/).

// fixtures are the lab results the test renders, the screenshot each
// becomes in docs/, and a window height that shows the whole page.
func fixtures() []struct {
	json, shot string
	height     int
} {
	return []struct {
		json, shot string
		height     int
	}{
		{"smp128.json", "report-run.png", 3600},
		{"bench-delay.json", "report-bench.png", 2000},
	}
}

// chromiumArgs are the flags for a headless render that stays off the
// network and logs the page's console to stderr.
func chromiumArgs(profile, shot, url string, height int) []string {
	return []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--enable-logging=stderr", "--v=0",
		"--user-data-dir=" + profile, "--screenshot=" + shot,
		fmt.Sprintf("--window-size=1280,%d", height), url,
	}
}

// shoot renders page to a PNG and returns it with the console messages
// chromium logged for the page (lines with ":CONSOLE").
func shoot(t *testing.T, browser, page string, height int) (string, []string) {
	t.Helper()
	dir := t.TempDir()
	shot := filepath.Join(dir, "shot.png")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, chromiumArgs(filepath.Join(dir, "profile"), shot, "file://"+page, height)...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium on %s: %v\n%s", page, err, stderr.String())
	}
	var console []string
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(l, ":CONSOLE") {
			console = append(console, l)
		}
	}
	return shot, console
}

// inked is the share of pixels that are not (near) white, and the number
// of distinct colours: a blank or failed render has neither.
func inked(t *testing.T, path string) (float64, int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	b := img.Bounds()
	ink := 0
	colors := map[color.RGBA]bool{}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r < 0xf000 || g < 0xf000 || bl < 0xf000 {
				ink++
			}
			if len(colors) < 1000 {
				colors[color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(bl >> 8), 0}] = true
			}
		}
	}
	return float64(ink) / float64(b.Dx()*b.Dy()), len(colors)
}

func TestBrowser(t *testing.T) {
	dirs := os.Getenv("MVM_REPORT_FIXTURES")
	if dirs == "" {
		t.Skip("renders the lab's results in chromium: make test runs it with MVM_REPORT_FIXTURES=out/lab-out (make report-test)")
	}
	browser, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is not installed: lab/host-deps.sh (make lab-deps) installs Debian's package")
	}

	// The console check must be able to fail: a page with a script error
	// and a console.error has to show up in what shoot collects.
	bad := filepath.Join(t.TempDir(), "bad.html")
	os.WriteFile(bad, []byte(`<!DOCTYPE html><p>x</p><script>console.error("mvm-control"); throw new Error("mvm-control-throw")</script>`), 0o644)
	if _, console := shoot(t, browser, bad, 400); len(console) < 2 || !strings.Contains(strings.Join(console, "\n"), "mvm-control-throw") {
		t.Fatalf("chromium's console log does not show a page's errors (got %q): the check below would prove nothing", console)
	}

	shots := os.Getenv("MVM_REPORT_SHOTS")
	for _, fx := range fixtures() {
		t.Run(fx.json, func(t *testing.T) {
			// The first directory of the list that has it (make test's
			// two labs each bring back their own results).
			var src string
			for _, dir := range filepath.SplitList(dirs) {
				if src = filepath.Join(dir, fx.json); fileExists(src) {
					break
				}
			}
			in, err := LoadFile(src)
			if err != nil {
				t.Fatalf("%v (the lab run that writes it: integration/report_test.go)", err)
			}
			page := filepath.Join(t.TempDir(), strings.TrimSuffix(fx.json, ".json")+".html")
			var html bytes.Buffer
			if err := Write(&html, in, fx.json); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(page, html.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			doc := parse(t, html.Bytes())
			checkAxes(t, doc)
			checkSelfContained(t, doc)
			switch {
			case in.Run != nil:
				if n := len(byClass(doc, "g", "vcpu")); n != in.Run.CPUs || n < 2 {
					t.Errorf("%d vCPU rows for %d vCPUs", n, in.Run.CPUs)
				}
			case in.Bench != nil:
				if len(in.Bench.Config.Variants) < 2 || len(byClass(doc, "circle", "run")) < len(in.Bench.Runs) {
					t.Errorf("bench report: %d variants, %d run marks for %d runs", len(in.Bench.Config.Variants), len(byClass(doc, "circle", "run")), len(in.Bench.Runs))
				}
			}
			t.Logf("%s: %d bytes of HTML", fx.json, html.Len())

			shot, console := shoot(t, browser, page, fx.height)
			if len(console) > 0 {
				t.Errorf("the page logged to the console:\n%s", strings.Join(console, "\n"))
			}
			ink, colors := inked(t, shot)
			t.Logf("%s: %.1f%% of the pixels inked, %d colours", filepath.Base(shot), 100*ink, colors)
			if ink < 0.02 || colors < 16 {
				t.Errorf("the screenshot looks blank: %.2f%% inked, %d colours", 100*ink, colors)
			}
			if shots != "" {
				keepShot(t, shot, filepath.Join(shots, fx.shot))
			}
		})
	}
}

// TestInkedBlank proves inked can fail: an all-white image has no ink.
func TestInkedBlank(t *testing.T) {
	img := image.NewRGBA(image.Rect(0, 0, 64, 64))
	for i := range img.Pix {
		img.Pix[i] = 0xff
	}
	p := filepath.Join(t.TempDir(), "white.png")
	f, _ := os.Create(p)
	png.Encode(f, img)
	f.Close()
	if ink, colors := inked(t, p); ink != 0 || colors != 1 {
		t.Errorf("a white image: %.2f inked, %d colours", ink, colors)
	}
}

// keepShot stores a screenshot for docs/ with at most 256 colours (its
// most frequent ones; the pages are flat colours and anti-aliased text),
// which makes the PNG a fraction of chromium's.
func keepShot(t *testing.T, src, dst string) {
	t.Helper()
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	b := img.Bounds()
	freq := map[color.RGBA]int{}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			freq[color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)]++
		}
	}
	cs := make([]color.RGBA, 0, len(freq))
	for c := range freq {
		cs = append(cs, c)
	}
	slices.SortFunc(cs, func(a, b color.RGBA) int { return freq[b] - freq[a] })
	var pal color.Palette
	for _, c := range cs[:min(256, len(cs))] {
		pal = append(pal, c)
	}
	out := image.NewPaletted(b, pal)
	idx := map[color.RGBA]uint8{}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
			i, ok := idx[c]
			if !ok {
				i = uint8(pal.Index(c))
				idx[c] = i
			}
			out.SetColorIndex(x, y, i)
		}
	}
	w, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	enc := png.Encoder{CompressionLevel: png.BestCompression}
	if err := enc.Encode(w, out); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(dst)
	t.Logf("kept %s (%d bytes)", dst, st.Size())
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
