// Command benchreport renders the JSON a bench harness saved
// (benchkit.Result: informerbench, checkpointbench, crbench, restartbench)
// as its text tables and SVG plots, again:
//
//	go -C bench run ./cmd/benchreport [--out DIR] ../_output/bench/recover-changed-100k.json
//
// Each FILE.json becomes FILE.txt and its plots' .svg in --out (default:
// beside the JSON), and the text goes to stdout.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/boltinformer/boltinformer/internal/bench/benchkit"
)

func main() {
	out := flag.String("out", "", "Directory to write the .txt and .svg files to; default: each JSON file's own.")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: benchreport [--out DIR] FILE.json...")
		os.Exit(2)
	}
	for _, path := range flag.Args() {
		if err := render(path, *out); err != nil {
			fmt.Fprintln(os.Stderr, "benchreport:", err)
			os.Exit(1)
		}
	}
}

func render(path, dir string) error {
	res, err := benchkit.Load(path)
	if err != nil {
		return err
	}
	if dir == "" {
		dir = filepath.Dir(path)
	}
	if err := res.Report.WriteText(os.Stdout); err != nil {
		return err
	}
	paths, err := benchkit.Render(dir, res)
	for _, p := range paths {
		fmt.Fprintln(os.Stderr, "wrote", p)
	}
	return err
}
