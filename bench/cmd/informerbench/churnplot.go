package main

import (
	"fmt"
	"github.com/boltinformer/boltinformer/internal/bench/benchkit"
	"math"
)

// churnCharts are the charts of the churn itself. A cumulative counter is
// drawn as its increase since the churn began.
var churnCharts = []struct {
	file, title, unit string
	cumulative        bool
	value             func(s churnSample) float64
}{
	{"churn-rss", "Private memory (RssAnon) during the churn", "MiB", false, func(s churnSample) float64 { return mib(s.RssAnon) }},
	{"churn-cpu", "CPU time used since the churn began", "CPU-seconds", true, func(s churnSample) float64 { return s.CPUSeconds }},
	{"churn-written", "Bytes sent to the block layer (write_bytes) since the churn began", "MiB", true, func(s churnSample) float64 { return mib(s.WriteBytes) }},
}

// churnColors: client-go in plot.go's protobuf colour, boltinformer in its.
var churnColors = map[string]string{informerClientGo: "#ff7f0e", informerBolt: "#1f77b4", informerBoltBounded: "#2ca02c"}

// churnPlots are the churn's charts: each child's samples over the churn,
// and its RssAnon during the starts, cold (solid) and restarted (dashed).
func churnPlots(r *churnResult) []benchkit.Plot {
	subtitle := fmt.Sprintf("%s Pods · %.0f changes/s (update,create,delete %s) · %s × %d · %s",
		benchkit.CountLabel(r.PodsAtStart), r.Drive.TargetPerSec, r.Mix, r.Machine.CPU, r.Machine.Cores, r.Date[:min(10, len(r.Date))])
	var plots []benchkit.Plot
	for _, p := range churnCharts {
		plot := benchkit.Plot{Name: p.file, Title: p.title, Subtitle: subtitle, XLabel: "seconds since the churn began", YLabel: p.unit}
		for _, in := range r.Informers {
			s := benchkit.Series{Name: in.Informer, Color: churnColors[in.Informer]}
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
				s.Points = append(s.Points, [2]float64{x.T, v})
			}
			if n := len(s.Points); n > 0 {
				s.Name += fmt.Sprintf(" (%.4g %s at the end)", s.Points[n-1][1], p.unit)
			}
			plot.Series = append(plot.Series, s)
		}
		plots = append(plots, plot)
	}
	starts := benchkit.Plot{Name: "churn-starts-rss", Title: "Private memory (RssAnon) during each cold start and restart",
		Subtitle: subtitle, XLabel: "seconds since the child started", YLabel: "MiB"}
	for _, phase := range []string{phaseCold, phaseRestart} {
		for _, in := range r.Informers {
			s := benchkit.Series{Name: in.Informer + " " + phase, Color: churnColors[in.Informer]}
			if phase == phaseRestart {
				s.Dash = "6 4"
			}
			for _, x := range r.Samples {
				if x.Informer == in.Informer && x.Phase == phase {
					s.Points = append(s.Points, [2]float64{x.T, mib(x.RssAnon)})
				}
			}
			if len(s.Points) > 0 {
				starts.Series = append(starts.Series, s)
			}
		}
	}
	if len(starts.Series) > 0 {
		plots = append(plots, starts)
	}
	return plots
}
