package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// runPlot is the plot subcommand: redraw the plot from saved results.
func runPlot(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("plot", flag.ContinueOnError)
	dir := fs.String("out", "bench/results", "Directory holding informerbench-*.json.")
	path := fs.String("plot", "docs/sync-time.svg", "SVG file to write.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	return plotResults(*dir, *path, out)
}

// plotSeries are the plotted lines: time to HasSynced against N.
var plotSeries = []struct {
	title, variant, color, dash string
}{
	{"client-go JSON, watch-list", vClientGoJSON, "#d62728", ""},
	{"client-go JSON, LIST", vClientGoJSONList, "#d62728", "6 4"},
	{"client-go protobuf, watch-list", vClientGoProto, "#ff7f0e", ""},
	{"client-go protobuf, LIST", vClientGoProtoList, "#ff7f0e", "6 4"},
	{"boltinformer cold", vBoltCold, "#1f77b4", ""},
	{"boltinformer warm restart", vBoltWarm, "#2ca02c", ""},
}

// plotResults renders every saved size in dir as an SVG line chart at path.
func plotResults(dir, path string, log io.Writer) error {
	all, err := loadResults(dir)
	if err != nil {
		return err
	}
	var results []*sizeResult // one pod size on one curve
	for _, r := range all {
		if r.realistic() {
			results = append(results, r)
		}
	}
	if len(results) == 0 {
		return fmt.Errorf("plot: no informerbench-*.json in %s", dir)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(path, []byte(syncTimeSVG(results)), 0o644); err != nil {
		return err
	}
	sizes := make([]string, len(results))
	for i, r := range results {
		sizes[i] = sizeLabel(r.Pods)
	}
	fmt.Fprintf(log, "plot: %s (sizes %s from %s)\n", path, strings.Join(sizes, ", "), dir)
	return nil
}

// Chart geometry, in SVG user units.
const (
	svgW, svgH                    = 800, 440
	padL, padR, padTop, padBottom = 70, 290, 60, 60
)

// syncTimeSVG draws sync time (median seconds) against the number of Pods,
// one line per series, with linear axes from zero.
func syncTimeSVG(results []*sizeResult) string {
	maxN, maxY := 0.0, 0.0
	for _, r := range results {
		maxN = math.Max(maxN, float64(r.Pods))
		for _, s := range plotSeries {
			maxY = math.Max(maxY, r.Medians[s.variant][mSync])
		}
	}
	maxN, maxY = niceCeil(maxN), niceCeil(maxY)
	plotW, plotH := float64(svgW-padL-padR), float64(svgH-padTop-padBottom)
	x := func(n float64) float64 { return padL + n/maxN*plotW }
	y := func(s float64) float64 { return padTop + plotH - s/maxY*plotH }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", svgW, svgH, svgW, svgH)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="16" font-weight="bold">Time to HasSynced, every initial add delivered</text>`+"\n", padL)
	last := results[len(results)-1]
	fmt.Fprintf(&b, `<text x="%d" y="42" fill="#555">medians of %d runs · %s × %d · %s · %s</text>`+"\n",
		padL, last.Reps, xmlEscape(last.Machine.CPU), last.Machine.Cores, xmlEscape(last.Machine.Server), last.Date[:10])
	for i := 0; i <= 5; i++ {
		n, s := maxN*float64(i)/5, maxY*float64(i)/5
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e5e5e5"/>`+"\n", x(0), y(s), x(maxN), y(s))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", x(0)-6, y(s), trimFloat(s))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x(n), y(0)+18, sizeLabel(int(n)))
	}
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`+"\n", x(0), y(0), x(maxN), y(0))
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`+"\n", x(0), y(0), x(0), y(maxY))
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">Pods</text>`+"\n", x(maxN/2), svgH-16)
	fmt.Fprintf(&b, `<text transform="translate(18 %.1f) rotate(-90)" text-anchor="middle">seconds</text>`+"\n", y(maxY/2))

	for i, s := range plotSeries {
		var pts []string
		for _, r := range results {
			if v, ok := r.Medians[s.variant][mSync]; ok {
				px, py := x(float64(r.Pods)), y(v)
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", px, py))
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s, %d Pods: %.2f s</title></circle>`+"\n", px, py, s.color, s.title, r.Pods, v)
			}
		}
		if len(pts) > 1 {
			fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2" stroke-dasharray="%s"/>`+"\n", strings.Join(pts, " "), s.color, s.dash)
		}
		ly := float64(padTop + 10 + 22*i)
		lx := float64(svgW - padR + 20)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2" stroke-dasharray="%s"/>`+"\n", lx, ly, lx+22, ly, s.color, s.dash)
		label := s.title
		if v, ok := last.Medians[s.variant][mSync]; ok {
			label += fmt.Sprintf(" (%.2f s)", v)
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" dominant-baseline="middle">%s</text>`+"\n", lx+28, ly, xmlEscape(label))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#555">(seconds at %s Pods)</text>`+"\n", svgW-padR+48, padTop+10+22*len(plotSeries), sizeLabel(last.Pods))
	b.WriteString("</svg>\n")
	return b.String()
}

// niceCeil rounds x up to 1, 2 or 5 times a power of ten.
func niceCeil(x float64) float64 {
	if x <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x {
			return m * p
		}
	}
	return 10 * p
}

func trimFloat(x float64) string { return fmt.Sprintf("%.4g", x) }

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}
