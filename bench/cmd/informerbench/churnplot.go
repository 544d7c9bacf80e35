package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// The churn's charts: each child's samples over time, one line per
// informer, hand-written SVG in plot.go's style (its geometry, axes from
// zero, legend on the right).

// churnPlots are the charts written beside churn.json. A cumulative
// counter is drawn as its increase since the churn began.
var churnPlots = []struct {
	file, title, unit string
	cumulative        bool
	value             func(s churnSample) float64
}{
	{"churn-rss.svg", "Private memory (RssAnon) during the churn", "MiB", false, func(s churnSample) float64 { return mib(s.RssAnon) }},
	{"churn-cpu.svg", "CPU time used since the churn began", "CPU-seconds", true, func(s churnSample) float64 { return s.CPUSeconds }},
	{"churn-written.svg", "Bytes sent to the block layer (write_bytes) since the churn began", "MiB", true, func(s churnSample) float64 { return mib(s.WriteBytes) }},
}

// churnColors: client-go in plot.go's protobuf colour, boltinformer in its.
var churnColors = map[string]string{informerClientGo: "#ff7f0e", informerBolt: "#1f77b4", informerBoltBounded: "#2ca02c"}

// timeSeries is one plotted line; dashed draws it dashed.
type timeSeries struct {
	title, color string
	dashed       bool
	t, v         []float64
}

// writeChurnPlots writes every chart of churnPlots into dir and returns
// their paths.
func writeChurnPlots(dir string, r *churnResult) ([]string, error) {
	subtitle := fmt.Sprintf("%s Pods · %.0f changes/s (update,create,delete %s) · %s × %d · %s",
		sizeLabel(r.PodsAtStart), r.Drive.TargetPerSec, r.Mix, r.Machine.CPU, r.Machine.Cores, r.Date[:10])
	var paths []string
	for _, p := range churnPlots {
		var series []timeSeries
		for _, in := range r.Informers {
			s := timeSeries{title: in.Informer, color: churnColors[in.Informer]}
			base := math.NaN()
			for _, x := range r.Samples {
				if x.Informer != in.Informer || (x.Phase != phaseChurn && x.Phase != "") {
					continue
				}
				v := p.value(x)
				if math.IsNaN(base) {
					base = v
				}
				if p.cumulative {
					v -= base
				}
				s.t, s.v = append(s.t, x.T), append(s.v, v)
			}
			series = append(series, s)
		}
		path := filepath.Join(dir, p.file)
		if err := os.WriteFile(path, []byte(timeSeriesSVG(p.title, subtitle, p.unit, "seconds since the churn began", series)), 0o644); err != nil {
			return nil, err
		}
		paths = append(paths, path)
	}
	// The starts: each child's RssAnon from its spawn, cold (solid) and
	// restarted (dashed).
	var series []timeSeries
	for _, phase := range []string{phaseCold, phaseRestart} {
		for _, in := range r.Informers {
			s := timeSeries{title: in.Informer + " " + phase, color: churnColors[in.Informer], dashed: phase == phaseRestart}
			for _, x := range r.Samples {
				if x.Informer == in.Informer && x.Phase == phase {
					s.t, s.v = append(s.t, x.T), append(s.v, mib(x.RssAnon))
				}
			}
			if len(s.t) > 0 {
				series = append(series, s)
			}
		}
	}
	if len(series) > 0 {
		path := filepath.Join(dir, "churn-starts-rss.svg")
		title := "Private memory (RssAnon) during each cold start and restart"
		if err := os.WriteFile(path, []byte(timeSeriesSVG(title, subtitle, "MiB", "seconds since the child started", series)), 0o644); err != nil {
			return nil, err
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// timeSeriesSVG draws series against seconds (xLabel says since when),
// with linear axes from zero; the legend gives each line's last value. The
// time axis ends at the last sample (a round maximum would leave up to
// half the chart empty: the last sample is a little after --duration),
// with ticks at a round step.
func timeSeriesSVG(title, subtitle, unit, xLabel string, series []timeSeries) string {
	maxT, maxY := 0.0, 0.0
	for _, s := range series {
		for i := range s.t {
			maxT, maxY = math.Max(maxT, s.t[i]), math.Max(maxY, s.v[i])
		}
	}
	if maxT <= 0 {
		maxT = 1
	}
	stepT := niceCeil(maxT / 5)
	maxY = niceCeil(maxY)
	plotW, plotH := float64(svgW-padL-padR), float64(svgH-padTop-padBottom)
	x := func(t float64) float64 { return padL + t/maxT*plotW }
	y := func(v float64) float64 { return padTop + plotH - v/maxY*plotH }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", svgW, svgH, svgW, svgH)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="16" font-weight="bold">%s</text>`+"\n", padL, xmlEscape(title))
	fmt.Fprintf(&b, `<text x="%d" y="42" fill="#555">%s</text>`+"\n", padL, xmlEscape(subtitle))
	for i := 0; i <= 5; i++ {
		v := maxY * float64(i) / 5
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e5e5e5"/>`+"\n", x(0), y(v), x(maxT), y(v))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", x(0)-6, y(v), trimFloat(v))
	}
	for t := 0.0; t <= maxT; t += stepT {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x(t), y(0)+18, trimFloat(t))
	}
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`+"\n", x(0), y(0), x(maxT), y(0))
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`+"\n", x(0), y(0), x(0), y(maxY))
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x(maxT/2), svgH-16, xmlEscape(xLabel))
	fmt.Fprintf(&b, `<text transform="translate(18 %.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", y(maxY/2), xmlEscape(unit))

	for i, s := range series {
		pts := make([]string, len(s.t))
		for j := range s.t {
			pts[j] = fmt.Sprintf("%.1f,%.1f", x(s.t[j]), y(s.v[j]))
		}
		dash := ""
		if s.dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		if len(pts) > 0 {
			fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(pts, " "), s.color, dash)
		}
		ly := float64(padTop + 10 + 22*i)
		lx := float64(svgW - padR + 20)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/>`+"\n", lx, ly, lx+22, ly, s.color, dash)
		label := s.title
		if n := len(s.v); n > 0 {
			label += fmt.Sprintf(" (%s %s at the end)", trimFloat(s.v[n-1]), unit)
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" dominant-baseline="middle">%s</text>`+"\n", lx+28, ly, xmlEscape(label))
	}
	b.WriteString("</svg>\n")
	return b.String()
}
