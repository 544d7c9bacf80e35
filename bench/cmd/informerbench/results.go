package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

// sizeResult is everything one size's measurement produced; it is saved as
// informerbench-<N>.json (and, flattened, .csv) in the results directory.
type sizeResult struct {
	Pods            int                           `json:"pods"`
	Reps            int                           `json:"reps"`
	Date            string                        `json:"date"`
	Machine         machine                       `json:"machine"`
	BoltContentType string                        `json:"boltContentType"`
	Churn           int                           `json:"churn"`   // Pods changed while boltinformer was down
	Updates         int                           `json:"updates"` // patches per throughput run
	Runs            map[string][]*childResult     `json:"runs"`
	Medians         map[string]map[string]float64 `json:"medians"`
	Targets         []target                      `json:"targets"`
	Notes           []string                      `json:"notes,omitempty"`

	// Ratios are derived from Medians (ratios.go): per variant, each
	// start stage over client-go like for like, and delivery over the
	// decode floor.
	Ratios map[string]map[string]float64 `json:"ratios,omitempty"`

	// PodSize is the --pod-size (empty in older results: realistic);
	// PodProtoBytes the mean size of a Pod as the apiserver serves it.
	PodSize       string  `json:"podSize,omitempty"`
	PodProtoBytes float64 `json:"podProtoBytes,omitempty"`
	// LoadAvg is the machine's 1-minute load average after each child.
	LoadAvg []float64 `json:"loadAvg,omitempty"`
	// Idle*CPU: CPU seconds per second kube-apiserver and etcd used with no
	// informer running, measured before the run (-1: unknown).
	IdleAPIServerCPU float64 `json:"idleApiserverCpuPerS,omitempty"`
	IdleEtcdCPU      float64 `json:"idleEtcdCpuPerS,omitempty"`
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

// path is where the result is saved: informerbench-<N>[-small].<ext>.
func (r *sizeResult) path(dir, ext string) string {
	return filepath.Join(dir, fmt.Sprintf("informerbench-%s%s.%s", sizeLabel(r.Pods), podShape(r.PodSize).label(), ext))
}

// realistic reports whether the result is of realistic Pods (the plot's).
func (r *sizeResult) realistic() bool {
	return r.PodSize == "" || podShape(r.PodSize) == shapeRealistic
}

// save writes the JSON and the CSV (one row per variant and metric: the
// median, then each repetition's value; then one row per ratio: the ratio
// of the medians, then each repetition's ratio).
func (r *sizeResult) save(dir string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(r.path(dir, "json"), append(data, '\n'), 0o644); err != nil {
		return err
	}
	f, err := os.Create(r.path(dir, "csv"))
	if err != nil {
		return err
	}
	defer f.Close()
	w := csv.NewWriter(f)
	header := []string{"pods", "variant", "metric", "median"}
	for i := range r.Reps {
		header = append(header, "rep"+strconv.Itoa(i+1))
	}
	_ = w.Write(header)
	for _, v := range allVariants {
		metrics := make([]string, 0, len(r.Medians[v]))
		for k := range r.Medians[v] {
			metrics = append(metrics, k)
		}
		slices.Sort(metrics)
		for _, k := range metrics {
			row := []string{strconv.Itoa(r.Pods), v, k, formatFloat(r.Medians[v][k])}
			for _, run := range r.Runs[v] {
				if x, ok := run.metrics()[k]; ok {
					row = append(row, formatFloat(x))
				}
			}
			_ = w.Write(row)
		}
		for _, d := range r.ratioDefs(v) {
			x, ok := r.Ratios[v][d.name]
			if !ok {
				continue
			}
			row := []string{strconv.Itoa(r.Pods), v, d.name, formatFloat(x)}
			for _, y := range r.repRatios(v, d) {
				row = append(row, formatFloat(y))
			}
			_ = w.Write(row)
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return err
	}
	return f.Close()
}

func formatFloat(x float64) string { return strconv.FormatFloat(x, 'g', 6, 64) }

// loadResults reads every informerbench-*.json in dir, sorted by size.
func loadResults(dir string) ([]*sizeResult, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "informerbench-*.json"))
	if err != nil {
		return nil, err
	}
	var out []*sizeResult
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		r := &sizeResult{}
		if err := json.Unmarshal(data, r); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *sizeResult) int { return a.Pods - b.Pods })
	return out, nil
}
