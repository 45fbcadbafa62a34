package report

import (
	"bufio"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/mvm-dev/mvm/bench"
	"github.com/mvm-dev/mvm/runsummary"
)

//go:embed templates/page.html
var pageTemplate string

//go:embed templates/style.css
var styleSheet string

// templates parses the page templates; they are constant, so a parse error
// is a bug that every test catches.
func templates() (*template.Template, error) {
	funcs := template.FuncMap{
		"f1":    f1,
		"add":   func(a, b float64) float64 { return a + b },
		"sub":   func(a, b float64) float64 { return math.Max(a-b, 0) },
		"half":  func(h, k float64) float64 { return h / 2 * k },
		"count": count,
		"css":   func() template.CSS { return template.CSS(styleSheet) },
		"diamond": func(x, y, h float64) string {
			r := math.Max(h*0.42, 2.2)
			return fmt.Sprintf("M%s %sL%s %sL%s %sL%s %sZ", f1(x), f1(y-r), f1(x+r), f1(y), f1(x), f1(y+r), f1(x-r), f1(y))
		},
	}
	t, err := template.New("report").Funcs(funcs).Parse(pageTemplate)
	if err != nil {
		return nil, fmt.Errorf("report templates: %w", err)
	}
	return t, nil
}

// WriteRun renders a run report of s; source names where s came from
// (a file name, or "mvm run" itself).
func WriteRun(w io.Writer, s *runsummary.Summary, source string) error {
	if err := checkRun(s); err != nil {
		return fmt.Errorf("run report: %w", err)
	}
	return execute(w, "run", newRunView(s, source))
}

// WriteBench renders a bench report of r.
func WriteBench(w io.Writer, r *bench.Report, source string) error {
	return execute(w, "bench", newBenchView(r, source))
}

// Write renders whichever report in holds.
func Write(w io.Writer, in *Input, source string) error {
	if in.Bench != nil {
		return WriteBench(w, in.Bench, source)
	}
	if in.Run != nil {
		return WriteRun(w, in.Run, source)
	}
	return fmt.Errorf("nothing to render")
}

func execute(w io.Writer, name string, view any) error {
	t, err := templates()
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	if err := t.ExecuteTemplate(bw, name, view); err != nil {
		return fmt.Errorf("render the %s report: %w", name, err)
	}
	return bw.Flush()
}

// WriteFile renders into path atomically: a temporary file in the same
// directory renamed over path, so that a failed render leaves nothing
// behind and never a half-written page.
func WriteFile(path string, render func(io.Writer) error) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".mvm-report-*.html")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if err := render(f); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
