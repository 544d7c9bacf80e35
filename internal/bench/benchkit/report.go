package benchkit

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
)

// Result is what a harness emits for one run: its raw measurements and the
// Report built from them, saved together as <Name>.json.
type Result struct {
	Name   string          `json:"name"`
	Raw    json.RawMessage `json:"raw"`
	Report Report          `json:"report"`
}

// Report is a run's summary: text and tables in order, and plots.
type Report struct {
	Blocks []Block `json:"blocks"`
	Plots  []Plot  `json:"plots,omitempty"`
}

// Block is either text or a table whose first row is its header.
type Block struct {
	Text string     `json:"text,omitempty"`
	Rows [][]string `json:"rows,omitempty"`
}

// Printf appends text to the report.
func (r *Report) Printf(format string, args ...any) {
	text := fmt.Sprintf(format, args...)
	if n := len(r.Blocks); n > 0 && r.Blocks[n-1].Rows == nil {
		r.Blocks[n-1].Text += text
		return
	}
	r.Blocks = append(r.Blocks, Block{Text: text})
}

// Table is a table being added to a Report.
type Table struct {
	r *Report
	i int
}

// Table starts a table with header.
func (r *Report) Table(header ...string) Table {
	r.Blocks = append(r.Blocks, Block{Rows: [][]string{header}})
	return Table{r, len(r.Blocks) - 1}
}

// Row adds a row.
func (t Table) Row(cells ...string) {
	b := &t.r.Blocks[t.i]
	b.Rows = append(b.Rows, cells)
}

// WriteText writes the report's text and tables, columns aligned.
func (r *Report) WriteText(w io.Writer) error {
	for _, b := range r.Blocks {
		if b.Rows == nil {
			if _, err := io.WriteString(w, b.Text); err != nil {
				return err
			}
			continue
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, row := range b.Rows {
			fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// Save writes <dir>/<name>.json (raw and the report), the report as
// <name>.txt and each plot as <plot name>.svg, and returns the paths.
func Save(dir, name string, raw any, rep *Report) ([]string, error) {
	data, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, name+".json")
	res, err := json.MarshalIndent(Result{Name: name, Raw: data, Report: *rep}, "", " ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, append(res, '\n'), 0o644); err != nil {
		return nil, err
	}
	rendered, err := Render(dir, &Result{Name: name, Report: *rep})
	return append([]string{path}, rendered...), err
}

// Load reads a Result that Save wrote.
func Load(path string) (*Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	res := &Result{}
	if err := json.Unmarshal(data, res); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return res, nil
}

// Render writes res's report into dir as <name>.txt (unless it has no
// text) and its plots as <plot name>.svg, and returns the paths.
func Render(dir string, res *Result) ([]string, error) {
	var files [][2]string
	if len(res.Report.Blocks) > 0 {
		var text strings.Builder
		if err := res.Report.WriteText(&text); err != nil {
			return nil, err
		}
		files = append(files, [2]string{filepath.Join(dir, res.Name+".txt"), text.String()})
	}
	for _, p := range res.Report.Plots {
		files = append(files, [2]string{filepath.Join(dir, p.Name+".svg"), p.SVG()})
	}
	var paths []string
	for _, f := range files {
		if err := os.WriteFile(f[0], []byte(f[1]), 0o644); err != nil {
			return paths, err
		}
		paths = append(paths, f[0])
	}
	return paths, nil
}

// OutDir is the default directory for a harness's results:
// _output/bench/<sub> at the repository's root, which git ignores, found
// from the working directory up (nested modules run from their own).
func OutDir(sub string) string {
	dir, err := os.Getwd()
	for err == nil {
		if _, serr := os.Stat(filepath.Join(dir, ".git")); serr == nil {
			return filepath.Join(dir, "_output", "bench", sub)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return filepath.Join("_output", "bench", sub)
}
