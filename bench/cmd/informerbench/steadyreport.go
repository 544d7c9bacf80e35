package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/boltinformer/boltinformer/internal/benchkit"
)

// The steady subcommand's summary: one row per figure, a column group per
// size, each boltinformer child's ratio to client-go marked against the
// project's steady-state targets.

// Marks of a ratio against its metric's target.
const (
	markMet    = "met"
	markMissed = "missed"
)

// steadyResult is the summary of a steady run, saved as steady.json; each
// size's churnResult is saved in its own directory.
type steadyResult struct {
	Date            string           `json:"date"`
	Machine         benchkit.Machine `json:"machine"`
	DurationSeconds float64          `json:"durationSeconds"` // of each size's churn
	Rate            float64          `json:"rate"`            // changes per second
	BoundedShare    string           `json:"boundedShare"`    // --bounded-share
	Sizes           []steadySize     `json:"sizes"`
	Rows            []steadyRow      `json:"rows"`
	// Met and Missed count the marked ratios.
	Met    int `json:"met"`
	Missed int `json:"missed"`
}

// steadySize is one size's run.
type steadySize struct {
	Pods           int `json:"pods"`        // --sizes
	PodsAtStart    int `json:"podsAtStart"` // as the children started
	BoundedObjects int `json:"boundedObjects"`
	// ByIndexObjects: what one ByIndex call returned in client-go, the
	// Pods on one node (0 without reads).
	ByIndexObjects float64 `json:"byIndexObjects,omitempty"`
	// Warnings: a child that missed a change or synced with fewer Pods
	// than existed; its figures are suspect.
	Warnings []string `json:"warnings,omitempty"`
}

// steadyRow is one metric at every size, cells in steadyResult.Sizes'
// order.
type steadyRow struct {
	Metric string `json:"metric"`
	// Reference is the client-go child the ratios are over.
	Reference string `json:"reference"`
	// Target bounds the marked ratios (0: none); BoundedOnly: only the
	// bounded child's ratio is marked.
	Target      float64      `json:"target,omitempty"`
	BoundedOnly bool         `json:"boundedOnly,omitempty"`
	Cells       []steadyCell `json:"cells"`
}

// steadyCell is one metric at one size: the reference's figure and each
// boltinformer child's, nil where it was not measured.
type steadyCell struct {
	ClientGo *float64      `json:"clientGo,omitempty"`
	Bolt     *steadyFigure `json:"boltinformer,omitempty"`
	Bounded  *steadyFigure `json:"bounded,omitempty"`
}

// steadyFigure is a boltinformer child's figure, its ratio to the
// reference's (0 if that is not positive) and its mark, if the row has a
// target for it.
type steadyFigure struct {
	Value float64 `json:"value"`
	Ratio float64 `json:"ratio,omitempty"`
	Mark  string  `json:"mark,omitempty"`
}

// steadyMetric says how to read one row's figure out of a churnResult.
type steadyMetric struct {
	name        string
	reference   string // informerClientGo or informerClientGoList
	target      float64
	boundedOnly bool
	format      func(float64) string
	// value is an informer's figure, false if it was not measured.
	value func(in churnInformer) (float64, bool)
}

// positive is v, measured if it is above 0: a figure of 0 is one the run
// did not take (no restart, no reads, no event).
func positive(v float64) (float64, bool) { return v, v > 0 }

// readsOf wraps a read price: not measured without reads.
func readsOf(f func(p *readPrices) float64) func(in churnInformer) (float64, bool) {
	return func(in churnInformer) (float64, bool) {
		if in.Child == nil || in.Child.Reads == nil {
			return 0, false
		}
		return positive(f(in.Child.Reads))
	}
}

// restartOf wraps a restart figure: not measured without a restart.
func restartOf(f func(st *churnStart) float64) func(in churnInformer) (float64, bool) {
	return func(in churnInformer) (float64, bool) {
		if in.Restart == nil {
			return 0, false
		}
		return positive(f(in.Restart))
	}
}

// steadyMetrics are the summary's rows. Private memory must stay within 5%
// of client-go's throughout, CPU per event within 10%, the cold start no
// slower than client-go's LIST, and the bounded cache's reads of a few
// objects within twice client-go's.
var steadyMetrics = []steadyMetric{
	{name: "RssAnon MiB after sync", reference: informerClientGo, target: 1.05, format: f0,
		value: func(in churnInformer) (float64, bool) { return positive(mib(in.Summary.RssAnonStart)) }},
	{name: "RssAnon MiB peak, cold start", reference: informerClientGo, target: 1.05, format: f0,
		value: func(in churnInformer) (float64, bool) { return positive(mib(in.Cold.RssAnonPeak)) }},
	{name: "RssAnon MiB peak, cold start, over client-go LIST", reference: informerClientGoList, format: f0,
		value: func(in churnInformer) (float64, bool) { return positive(mib(in.Cold.RssAnonPeak)) }},
	{name: "RssAnon MiB peak, churn", reference: informerClientGo, target: 1.05, format: f0,
		value: func(in churnInformer) (float64, bool) { return positive(mib(in.Summary.RssAnonMax)) }},
	{name: "RssAnon MiB peak, restart (bolt warm)", reference: informerClientGo, target: 1.05, format: f0,
		value: restartOf(func(st *churnStart) float64 { return mib(st.RssAnonPeak) })},
	{name: "RssAnon MiB after the restart settled", reference: informerClientGo, target: 1.05, format: f0,
		value: restartOf(func(st *churnStart) float64 { return mib(st.RssAnonEnd) })},
	{name: "CPU µs per event", reference: informerClientGo, target: 1.1, format: f0,
		value: func(in churnInformer) (float64, bool) { return positive(in.Summary.CPUMicrosPerEvent) }},
	{name: "write_bytes KiB per event", reference: informerClientGo, format: f1,
		value: func(in churnInformer) (float64, bool) {
			return in.Summary.WriteBytesPerEvent / 1024, in.Summary.Events > 0
		}},
	{name: "cold start synced s, over client-go LIST", reference: informerClientGoList, target: 1.0, format: f2,
		value: func(in churnInformer) (float64, bool) { return positive(in.Cold.SyncSeconds) }},
	{name: "cold start synced s", reference: informerClientGo, format: f2,
		value: func(in churnInformer) (float64, bool) { return positive(in.Cold.SyncSeconds) }},
	{name: "latency p99 ms", reference: informerClientGo, format: f1,
		value: func(in churnInformer) (float64, bool) { return positive(in.Child.LatencyP99Ms) }},
	{name: fmt.Sprintf("Get ns, %d hot keys", hotReads), reference: informerClientGo, target: 2, boundedOnly: true, format: f0,
		value: readsOf(func(p *readPrices) float64 { return p.HotGetNs })},
	{name: fmt.Sprintf("ByIndex ns, one object, %d hot names", hotReads), reference: informerClientGo, target: 2, boundedOnly: true, format: f0,
		value: readsOf(func(p *readPrices) float64 { return p.ByNameNs })},
	{name: fmt.Sprintf("ByIndex ns, %d hot nodes", hotReads), reference: informerClientGo, format: f0,
		value: readsOf(func(p *readPrices) float64 { return p.ByIndexNs })},
	{name: "Get ns, random keys", reference: informerClientGo, format: f0,
		value: readsOf(func(p *readPrices) float64 { return p.RandomGetNs })},
	{name: "List of every Pod ms", reference: informerClientGo, format: f2,
		value: readsOf(func(p *readPrices) float64 { return p.ListMs })},
}

// steadyMark is ratio's mark against target: met at or under it.
func steadyMark(ratio, target float64) string {
	if ratio <= target {
		return markMet
	}
	return markMissed
}

// informerIn returns r's child named informer; client-go with its LIST is
// its cold start alone (it did not churn).
func informerIn(r *churnResult, informer string) (churnInformer, bool) {
	if informer == informerClientGoList {
		if r.ClientGoList == nil {
			return churnInformer{}, false
		}
		return churnInformer{Informer: informer, Child: &churnChildResult{}, Cold: *r.ClientGoList}, true
	}
	for _, in := range r.Informers {
		if in.Informer == informer {
			return in, true
		}
	}
	return churnInformer{}, false
}

// steadySummary builds the summary of the sizes' results, in the order
// given (increasing).
func steadySummary(results []*churnResult, boundedShare string) *steadyResult {
	s := &steadyResult{Date: time.Now().UTC().Format(time.RFC3339), BoundedShare: boundedShare}
	if len(results) > 0 {
		s.Machine, s.DurationSeconds, s.Rate = results[0].Machine, results[0].DurationSeconds, results[0].Drive.TargetPerSec
	}
	for _, r := range results {
		sz := steadySize{Pods: r.Pods, PodsAtStart: r.PodsAtStart, BoundedObjects: r.CacheObjects}
		if cg, ok := informerIn(r, informerClientGo); ok && cg.Child.Reads != nil {
			sz.ByIndexObjects = cg.Child.Reads.ByIndexObjects
		}
		for _, in := range r.Informers {
			if !in.Child.Drained {
				sz.Warnings = append(sz.Warnings, fmt.Sprintf("%s had not seen every change", in.Informer))
			}
			if in.Child.InitialAdds != int64(r.PodsAtStart) {
				sz.Warnings = append(sz.Warnings, fmt.Sprintf("%s synced with %d Pods, %d existed", in.Informer, in.Child.InitialAdds, r.PodsAtStart))
			}
		}
		s.Sizes = append(s.Sizes, sz)
	}
	for _, m := range steadyMetrics {
		row := steadyRow{Metric: m.name, Reference: m.reference, Target: m.target, BoundedOnly: m.boundedOnly}
		for _, r := range results {
			var cell steadyCell
			ref, refOK := 0.0, false
			if in, ok := informerIn(r, m.reference); ok {
				if ref, refOK = m.value(in); refOK {
					cell.ClientGo = &ref
				}
			}
			figure := func(informer string) *steadyFigure {
				in, ok := informerIn(r, informer)
				if !ok {
					return nil
				}
				v, ok := m.value(in)
				if !ok {
					return nil
				}
				f := &steadyFigure{Value: v}
				if refOK && ref > 0 {
					f.Ratio = v / ref
					if m.target > 0 && (!m.boundedOnly || informer == informerBoltBounded) {
						f.Mark = steadyMark(f.Ratio, m.target)
						if f.Mark == markMet {
							s.Met++
						} else {
							s.Missed++
						}
					}
				}
				return f
			}
			cell.Bolt, cell.Bounded = figure(informerBolt), figure(informerBoltBounded)
			row.Cells = append(row.Cells, cell)
		}
		s.Rows = append(s.Rows, row)
	}
	return s
}

// steadyTable is the summary's table: a header, then a row per metric with
// its target and, for each size, client-go's figure and each boltinformer
// child's ratio, its own figure in parentheses and its mark.
func steadyTable(s *steadyResult) [][]string {
	head := []string{"", "target"}
	for _, sz := range s.Sizes {
		label := benchkit.CountLabel(sz.Pods)
		head = append(head, label+" client-go", label+" bolt/cg", label+" bounded/cg")
	}
	rows := [][]string{head}
	format := map[string]func(float64) string{}
	for _, m := range steadyMetrics {
		format[m.name] = m.format
	}
	for _, row := range s.Rows {
		f := format[row.Metric]
		if f == nil { // a saved result's metric no longer defined
			f = f1
		}
		target := ""
		if row.Target > 0 {
			target = fmt.Sprintf("≤%g×", row.Target)
			if row.BoundedOnly {
				target += " bounded"
			}
		}
		cells := []string{row.Metric, target}
		for _, c := range row.Cells {
			ref := "-"
			if c.ClientGo != nil {
				ref = f(*c.ClientGo)
			}
			cells = append(cells, ref, steadyFigureCell(c.Bolt, f), steadyFigureCell(c.Bounded, f))
		}
		rows = append(rows, cells)
	}
	return rows
}

// steadyFigureCell is "ratio (value) [mark]", or the value alone without
// a ratio, or "-" without a figure.
func steadyFigureCell(fig *steadyFigure, format func(float64) string) string {
	if fig == nil {
		return "-"
	}
	if fig.Ratio == 0 {
		return "(" + format(fig.Value) + ")"
	}
	cell := fmt.Sprintf("%.2f (%s)", fig.Ratio, format(fig.Value))
	if fig.Mark != "" {
		cell += " [" + fig.Mark + "]"
	}
	return cell
}

// steadyReport is the summary as text: what ran, the table, the tally of
// the marks and any warnings.
func steadyReport(s *steadyResult) *benchkit.Report {
	w := &benchkit.Report{}
	labels, bounded, perNode := make([]string, len(s.Sizes)), make([]string, len(s.Sizes)), make([]string, len(s.Sizes))
	for i, sz := range s.Sizes {
		labels[i] = fmt.Sprintf("%s (%d at start)", benchkit.CountLabel(sz.Pods), sz.PodsAtStart)
		bounded[i] = fmt.Sprint(sz.BoundedObjects)
		perNode[i] = f0(sz.ByIndexObjects)
	}
	w.Printf("Steady state at %s Pods on one apiserver, each churned at %.0f changes/s for %v; %s.\n",
		strings.Join(labels, ", "), s.Rate, seconds(s.DurationSeconds), s.Machine)
	w.Printf("bolt: boltinformer; bounded: boltinformer with a cache of %s of the Pods (%s objects). Each cell: ratio to client-go\n"+
		"(its factory default, watch-list streaming; LIST where the row says so), the figure itself in parentheses, and the\n"+
		"mark against the row's target. After sync: the churn's first sample, the start's garbage returned. Restart: client-go\n"+
		"cold, boltinformer warm on its file; settled: the restart's last sample. Reads: through the lister and indexer after\n"+
		"the churn; a ByIndex returns the Pods of one node (%s).\n\n",
		s.BoundedShare, strings.Join(bounded, ", "), strings.Join(perNode, ", "))
	rows := steadyTable(s)
	t := w.Table(rows[0]...)
	for _, cells := range rows[1:] {
		t.Row(cells...)
	}
	w.Printf("\nTargets: %d met, %d missed.\n", s.Met, s.Missed)
	for _, row := range s.Rows {
		for i, c := range row.Cells {
			for _, fig := range []struct {
				name string
				f    *steadyFigure
			}{{informerBolt, c.Bolt}, {informerBoltBounded, c.Bounded}} {
				if fig.f != nil && fig.f.Mark == markMissed {
					w.Printf("  missed at %s: %s, %s %.2f× (target ≤%g×)\n", benchkit.CountLabel(s.Sizes[i].Pods), row.Metric, fig.name, fig.f.Ratio, row.Target)
				}
			}
		}
	}
	for _, sz := range s.Sizes {
		for _, warn := range sz.Warnings {
			w.Printf("WARNING at %s: %s.\n", benchkit.CountLabel(sz.Pods), warn)
		}
	}
	return w
}
