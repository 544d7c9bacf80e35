package benchkit

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Plot is a line chart with linear axes from zero and a legend on the
// right.
type Plot struct {
	// Name is the SVG file's name without extension.
	Name                            string
	Title, Subtitle, XLabel, YLabel string
	// Categories, if set, label x = 0, 1, … spaced evenly; otherwise x is
	// linear up to the largest value, with ticks at a round step.
	Categories []string `json:",omitempty"`
	// CountTicks labels linear ticks as counts: 10k, not 10000.
	CountTicks bool `json:",omitempty"`
	Series     []Series
	Marks      []Mark   `json:",omitempty"`
	Notes      []string `json:",omitempty"`
}

// Series is one line; Dots marks each point with its value on hover.
type Series struct {
	Name, Color, Dash string
	Dots              bool `json:",omitempty"`
	Points            [][2]float64
}

// Mark is a vertical dashed line at X with text beside it.
type Mark struct {
	X     float64
	Lines []string
}

// Chart geometry, in SVG user units.
const (
	svgW, svgH                    = 800, 440
	padL, padR, padTop, padBottom = 70, 290, 60, 60
)

// SVG draws the plot.
func (p *Plot) SVG() string {
	maxX, maxY := 0.0, 0.0
	for _, s := range p.Series {
		for _, pt := range s.Points {
			maxX, maxY = math.Max(maxX, pt[0]), math.Max(maxY, pt[1])
		}
	}
	maxY = NiceCeil(maxY)
	plotW, plotH := float64(svgW-padL-padR), float64(svgH-padTop-padBottom)
	x := func(v float64) float64 { return padL + v/math.Max(maxX, 1e-9)*plotW }
	if n := len(p.Categories); n > 0 {
		x = func(v float64) float64 { return padL + (v+0.5)/float64(n)*plotW }
	}
	y := func(v float64) float64 { return padTop + plotH - v/maxY*plotH }
	left, right := x(0), x(maxX)
	if n := len(p.Categories); n > 0 {
		left, right = x(-0.5), x(float64(n)-0.5)
	}
	var b strings.Builder
	line := func(x1, y1, x2, y2 float64, attrs string) {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" %s/>`+"\n", x1, y1, x2, y2, attrs)
	}
	text := func(x, y float64, attrs, s string) {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" %s>%s</text>`+"\n", x, y, attrs, xmlEscape(s))
	}
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", svgW, svgH, svgW, svgH)
	b.WriteString(`<rect width="100%" height="100%" fill="white"/>` + "\n")
	text(padL, 24, `font-size="16" font-weight="bold"`, p.Title)
	text(padL, 42, `fill="#555"`, p.Subtitle)
	for i := 0; i <= 5; i++ {
		v := maxY * float64(i) / 5
		line(left, y(v), right, y(v), `stroke="#e5e5e5"`)
		text(left-6, y(v), `text-anchor="end" dominant-baseline="middle"`, trimFloat(v))
	}
	for i, c := range p.Categories {
		text(x(float64(i)), y(0)+18, `text-anchor="middle"`, c)
	}
	if len(p.Categories) == 0 && maxX > 0 {
		step := NiceCeil(maxX / 5)
		for v := 0.0; v <= maxX*1.0001; v += step {
			label := trimFloat(v)
			if p.CountTicks {
				label = CountLabel(int(v))
			}
			text(x(v), y(0)+18, `text-anchor="middle"`, label)
		}
	}
	line(left, y(0), right, y(0), `stroke="#333"`)
	line(left, y(0), left, y(maxY), `stroke="#333"`)
	text((left+right)/2, svgH-16, `text-anchor="middle"`, p.XLabel)
	fmt.Fprintf(&b, `<text transform="translate(18 %.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", y(maxY/2), xmlEscape(p.YLabel))
	for _, m := range p.Marks {
		line(x(m.X), y(0), x(m.X), y(maxY), `stroke="#999" stroke-dasharray="3 3"`)
		for i, l := range m.Lines {
			text(x(m.X)+4, y(maxY)+14+16*float64(i), `fill="#555"`, l)
		}
	}
	lx := float64(svgW - padR + 20)
	for i, s := range p.Series {
		style := fmt.Sprintf(`stroke="%s" stroke-width="2" stroke-dasharray="%s"`, s.Color, s.Dash)
		pts := make([]string, len(s.Points))
		for j, pt := range s.Points {
			pts[j] = fmt.Sprintf("%.1f,%.1f", x(pt[0]), y(pt[1]))
			if s.Dots {
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s: %s</title></circle>`+"\n",
					x(pt[0]), y(pt[1]), s.Color, xmlEscape(s.Name), trimFloat(pt[1]))
			}
		}
		if len(pts) > 1 {
			fmt.Fprintf(&b, `<polyline points="%s" fill="none" %s/>`+"\n", strings.Join(pts, " "), style)
		}
		ly := float64(padTop + 10 + 22*i)
		line(lx, ly, lx+22, ly, style)
		text(lx+28, ly, `dominant-baseline="middle"`, s.Name)
	}
	for i, n := range p.Notes {
		text(lx, float64(padTop+10+22*len(p.Series)+16*(i+1)), `fill="#555"`, n)
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// NiceCeil rounds x up to 1, 2 or 5 times a power of ten.
func NiceCeil(x float64) float64 {
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

// CountLabel prints a count as the flags take it: 10k for 10000.
func CountLabel(n int) string {
	if n >= 1000 && n%1000 == 0 {
		return strconv.Itoa(n/1000) + "k"
	}
	return strconv.Itoa(n)
}

func trimFloat(x float64) string { return fmt.Sprintf("%.4g", x) }

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}
