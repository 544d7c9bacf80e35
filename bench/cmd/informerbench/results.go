package main

import (
	"encoding/json"
	"fmt"
	"github.com/boltinformer/boltinformer/internal/bench/benchkit"
	"path/filepath"
	"slices"
)

// runHeader is what the results of the default command and of recover
// record about their run.
type runHeader struct {
	Pods    int              `json:"pods"`
	Reps    int              `json:"reps"`
	Date    string           `json:"date"`
	Machine benchkit.Machine `json:"machine"`
	// PodSize is the --pod-size (empty in older results: realistic);
	// PodProtoBytes the mean size of a Pod as the apiserver serves it.
	PodSize       string  `json:"podSize,omitempty"`
	PodProtoBytes float64 `json:"podProtoBytes,omitempty"`
	// LoadAvg is the machine's 1-minute load average after each child.
	LoadAvg []float64 `json:"loadAvg,omitempty"`
	// Idle*CPU: CPU seconds per second kube-apiserver and etcd used with no
	// informer running, measured before the run (-1: unknown).
	IdleAPIServerCPU float64  `json:"idleApiserverCpuPerS,omitempty"`
	IdleEtcdCPU      float64  `json:"idleEtcdCpuPerS,omitempty"`
	Targets          []target `json:"targets"`
}

// sizeResult is everything one size's measurement produced; it is saved as
// informerbench-<N>.json in the results directory.
type sizeResult struct {
	runHeader
	BoltContentType string                        `json:"boltContentType"`
	Churn           int                           `json:"churn"` // Pods changed while boltinformer was down
	Runs            map[string][]*childResult     `json:"runs"`
	Medians         map[string]map[string]float64 `json:"medians"`
	// Ratios are derived from Medians (ratios.go): per variant, each
	// start stage over client-go like for like.
	Ratios map[string]map[string]float64 `json:"ratios,omitempty"`
	// Heartbeat is the cluster heartbeat that ran during the measurement
	// (heartbeat.go); nil in results from before it.
	Heartbeat *heartbeatStats `json:"heartbeat,omitempty"`
}

// heartbeatStats describes the Lease renewals made while measuring.
type heartbeatStats struct {
	IntervalSeconds float64 `json:"intervalSeconds"`
	Lease           string  `json:"lease"`
	Renewed         int64   `json:"renewed"`
	Failed          int64   `json:"failed"`
}

// name is the result's file name without extension:
// informerbench-<N>[-small].
func (r *sizeResult) name() string {
	return fmt.Sprintf("informerbench-%s%s", benchkit.CountLabel(r.Pods), podShape(r.PodSize).label())
}

// realistic reports whether the result is of realistic Pods (the plot's).
func (r *sizeResult) realistic() bool {
	return r.PodSize == "" || podShape(r.PodSize) == shapeRealistic
}

// loadResults reads every informerbench-*.json in dir, sorted by size.
func loadResults(dir string) ([]*sizeResult, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "informerbench-*.json"))
	if err != nil {
		return nil, err
	}
	var out []*sizeResult
	for _, p := range paths {
		saved, err := benchkit.Load(p)
		if err != nil {
			return nil, err
		}
		r := &sizeResult{}
		if err := json.Unmarshal(saved.Raw, r); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *sizeResult) int { return a.Pods - b.Pods })
	return out, nil
}

// plotSeries are the sync-time plot's lines: time to HasSynced against N.
var plotSeries = []struct {
	title, variant, color, dash string
}{
	{"client-go protobuf, watch-list", vClientGoProto, "#ff7f0e", ""},
	{"client-go protobuf, LIST", vClientGoProtoList, "#ff7f0e", "6 4"},
	{"boltinformer cold", vBoltCold, "#1f77b4", ""},
	{"boltinformer warm restart", vBoltWarm, "#2ca02c", ""},
}

// syncTimePlot draws sync time (median seconds) against the number of
// realistic Pods over results; each legend gives the largest size's value.
func syncTimePlot(results []*sizeResult) benchkit.Plot {
	var rs []*sizeResult
	for _, r := range results {
		if r.realistic() {
			rs = append(rs, r)
		}
	}
	p := benchkit.Plot{Name: "sync-time", Title: "Time to HasSynced, every initial add delivered", XLabel: "Pods", YLabel: "seconds", CountTicks: true}
	if len(rs) == 0 {
		return p
	}
	last := rs[len(rs)-1]
	p.Subtitle = fmt.Sprintf("medians of %d runs · %s × %d · %s · %s", last.Reps, last.Machine.CPU, last.Machine.Cores, last.Machine.Server, last.Date[:10])
	for _, s := range plotSeries {
		line := benchkit.Series{Name: s.title, Color: s.color, Dash: s.dash, Dots: true}
		for _, r := range rs {
			if v, ok := r.Medians[s.variant][mSync]; ok {
				line.Points = append(line.Points, [2]float64{float64(r.Pods), v})
			}
		}
		if v, ok := last.Medians[s.variant][mSync]; ok {
			line.Name += fmt.Sprintf(" (%.2f s)", v)
		}
		p.Series = append(p.Series, line)
	}
	p.Notes = []string{fmt.Sprintf("(seconds at %s Pods)", benchkit.CountLabel(last.Pods))}
	return p
}
