package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/boltinformer/boltinformer/internal/bench/benchkit"
)

// The steady subcommand's summary: one row per figure and churn, a column
// group per size, each boltinformer child's ratio to client-go marked
// against the project's steady-state targets.

// Marks of a ratio against its metric's target.
const (
	markMet    = "met"
	markMissed = "missed"
)

// steadyResult is the summary of a steady run, saved as steady.json; each
// churn's churnResult is saved in its own directory.
type steadyResult struct {
	Date            string           `json:"date"`
	Machine         benchkit.Machine `json:"machine"`
	DurationSeconds float64          `json:"durationSeconds"` // of each churn
	Rate            float64          `json:"rate"`            // changes per second
	BoundedShare    string           `json:"boundedShare"`    // --bounded-share
	// Skews are the churns run at each size (--skews), in order.
	Skews []string     `json:"skews"`
	Sizes []steadySize `json:"sizes"`
	Rows  []steadyRow  `json:"rows"`
	// Met and Missed count the marked figures.
	Met    int `json:"met"`
	Missed int `json:"missed"`
}

// steadySize is one size's churns.
type steadySize struct {
	Pods           int `json:"pods"` // --sizes
	BoundedObjects int `json:"boundedObjects"`
	// ByIndexObjects: what one ByIndex call returned in client-go, the
	// Pods on one node (0 without reads), in the size's first churn.
	ByIndexObjects float64 `json:"byIndexObjects,omitempty"`
	// RecordBytes: the mean record in boltinformer's file after the size's
	// first churn, "the record" of the bytes written per event (0 if not
	// measured).
	RecordBytes float64       `json:"recordBytes,omitempty"`
	Churns      []steadyChurn `json:"churns"`
}

// steadyChurn is one churn at one size.
type steadyChurn struct {
	Skew        string `json:"skew"`
	PodsAtStart int    `json:"podsAtStart"` // as the children started
	// DistinctUpdated and UpdatesPerPodPerWindow say how skewed the
	// updates were (churnDriveStats).
	DistinctUpdated        int     `json:"distinctUpdated"`
	UpdatesPerPodPerWindow float64 `json:"updatesPerPodPerWindow"`
	// Warnings: a child that missed a change or synced with fewer Pods
	// than existed; its figures are suspect.
	Warnings []string `json:"warnings,omitempty"`
}

// steadyRow is one metric of one churn at every size, cells in
// steadyResult.Sizes' order.
type steadyRow struct {
	Metric string `json:"metric"`
	// Churn is the skew of the churn the cells are from.
	Churn string `json:"churn"`
	// Reference is the client-go child the ratios are over; "" for a
	// figure that is itself a ratio, marked as it is.
	Reference string `json:"reference"`
	// Target bounds the marked figures (0: none); BoundedOnly: only the
	// bounded child's is marked.
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
// reference's (0 if that is not positive, or the row has no reference)
// and its mark, if the row has a target for it.
type steadyFigure struct {
	Value float64 `json:"value"`
	Ratio float64 `json:"ratio,omitempty"`
	Mark  string  `json:"mark,omitempty"`
}

// marked is what the figure's mark judges: its ratio, or the figure
// itself in a row without a reference.
func (f *steadyFigure) marked() float64 {
	if f.Ratio != 0 {
		return f.Ratio
	}
	return f.Value
}

// steadyMetric says how to read one row's figure out of a churnResult.
type steadyMetric struct {
	name string
	// reference is informerClientGo or informerClientGoList; "" marks the
	// figure itself against target (a ratio of boltinformer's own, such as
	// its file over its records).
	reference   string
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

// fileOf wraps a figure of boltinformer's file: not measured without it.
func fileOf(f func(end, peak float64) float64) func(in churnInformer) (float64, bool) {
	return func(in churnInformer) (float64, bool) {
		end, peak, ok := in.fileOverRecords()
		if !ok {
			return 0, false
		}
		return f(end, peak), true
	}
}

// steadyMetrics are the summary's rows. The targets: private memory within
// 5% of client-go's after sync and at the restart, within 10% at the cold
// start's and the churn's peaks; CPU per event within 10%; Go allocations
// within 30%; bytes written to disk per event at most twice the record;
// the cold start no slower than client-go's; the bounded cache's reads of
// a few objects within twice client-go's.
var steadyMetrics = []steadyMetric{
	{name: "RssAnon MiB after sync", reference: informerClientGo, target: 1.05, format: f0,
		value: func(in churnInformer) (float64, bool) { return positive(mib(in.Summary.RssAnonStart)) }},
	{name: "RssAnon MiB peak, cold start", reference: informerClientGo, target: 1.1, format: f0,
		value: func(in churnInformer) (float64, bool) { return positive(mib(in.Cold.RssAnonPeak)) }},
	{name: "RssAnon MiB peak, cold start, over client-go LIST", reference: informerClientGoList, format: f0,
		value: func(in churnInformer) (float64, bool) { return positive(mib(in.Cold.RssAnonPeak)) }},
	{name: "RssAnon MiB peak, churn", reference: informerClientGo, target: 1.1, format: f0,
		value: func(in churnInformer) (float64, bool) { return positive(mib(in.Summary.RssAnonMax)) }},
	{name: "RssAnon MiB peak, restart (bolt warm)", reference: informerClientGo, target: 1.05, format: f0,
		value: restartOf(func(st *churnStart) float64 { return mib(st.RssAnonPeak) })},
	{name: "RssAnon MiB after the restart settled", reference: informerClientGo, target: 1.05, format: f0,
		value: restartOf(func(st *churnStart) float64 { return mib(st.RssAnonEnd) })},
	{name: "CPU µs per event", reference: informerClientGo, target: 1.1, format: f0,
		value: func(in churnInformer) (float64, bool) { return positive(in.Summary.CPUMicrosPerEvent) }},
	{name: "Go KiB allocated per event", reference: informerClientGo, target: 1.3, format: f1,
		value: func(in churnInformer) (float64, bool) { return positive(in.Child.allocPerEvent() / 1024) }},
	{name: "Go KiB allocated per object, cold start", reference: informerClientGo, target: 1.3, format: f1,
		value: func(in churnInformer) (float64, bool) { return positive(in.Cold.allocPerObject() / 1024) }},
	{name: "Go KiB allocated per object, cold start, over client-go LIST", reference: informerClientGoList, format: f1,
		value: func(in churnInformer) (float64, bool) { return positive(in.Cold.allocPerObject() / 1024) }},
	{name: "write_bytes KiB per event", reference: informerClientGo, format: f1,
		value: func(in churnInformer) (float64, bool) {
			return in.Summary.WriteBytesPerEvent / 1024, in.Summary.Events > 0
		}},
	{name: "write_bytes per event over the record", target: 2, format: f2,
		value: func(in churnInformer) (float64, bool) { return in.writePerEventOverRecord() }},
	{name: "cache file over records, end of churn", format: f2,
		value: fileOf(func(end, _ float64) float64 { return end })},
	{name: "cache file over records, churn's peak", format: f2,
		value: fileOf(func(_, peak float64) float64 { return peak })},
	{name: "cold start synced s", reference: informerClientGo, target: 1.0, format: f2,
		value: func(in churnInformer) (float64, bool) { return positive(in.Cold.SyncSeconds) }},
	{name: "cold start synced s, over client-go LIST", reference: informerClientGoList, format: f2,
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

// targetText says what a row with target (> 0) is judged on.
func targetText(target float64, reference string, boundedOnly bool) string {
	s := fmt.Sprintf("≤%g×", target)
	switch reference {
	case informerClientGo:
		s += " client-go's"
	case informerClientGoList:
		s += " client-go's LIST start"
	}
	if boundedOnly {
		s += ", bounded only"
	}
	return s
}

// steadyTargets lists the targets the table marks, one a line.
func steadyTargets() []string {
	var out []string
	for _, m := range steadyMetrics {
		if m.target > 0 {
			out = append(out, m.name+" "+targetText(m.target, m.reference, m.boundedOnly))
		}
	}
	return out
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

// skewOf is r's skew; a result from before skews was uniform.
func skewOf(r *churnResult) string { return cmp.Or(r.Skew, "uniform") }

// steadySummary builds the summary of the churns' results: the sizes in
// the order first given (increasing), and at each the churns in the order
// of their skews. A churn that did not run has empty cells.
func steadySummary(results []*churnResult, boundedShare string) *steadyResult {
	s := &steadyResult{Date: time.Now().UTC().Format(time.RFC3339), BoundedShare: boundedShare}
	if len(results) > 0 {
		s.Machine, s.DurationSeconds, s.Rate = results[0].Machine, results[0].DurationSeconds, results[0].Drive.TargetPerSec
	}
	sizeOf := map[int]int{} // Pods -> index in s.Sizes
	for _, r := range results {
		if !slices.Contains(s.Skews, skewOf(r)) {
			s.Skews = append(s.Skews, skewOf(r))
		}
		i, ok := sizeOf[r.Pods]
		if !ok {
			i = len(s.Sizes)
			sizeOf[r.Pods] = i
			sz := steadySize{Pods: r.Pods, BoundedObjects: r.CacheObjects}
			if cg, ok := informerIn(r, informerClientGo); ok && cg.Child.Reads != nil {
				sz.ByIndexObjects = cg.Child.Reads.ByIndexObjects
			}
			if bolt, ok := informerIn(r, informerBolt); ok {
				sz.RecordBytes = bolt.Child.recordBytes()
			}
			s.Sizes = append(s.Sizes, sz)
		}
		c := steadyChurn{Skew: skewOf(r), PodsAtStart: r.PodsAtStart,
			DistinctUpdated: r.Drive.DistinctUpdated, UpdatesPerPodPerWindow: r.Drive.UpdatesPerPodPerWindow}
		for _, in := range r.Informers {
			if !in.Child.Drained {
				c.Warnings = append(c.Warnings, fmt.Sprintf("%s had not seen every change", in.Informer))
			}
			if in.Child.InitialAdds != int64(r.PodsAtStart) {
				c.Warnings = append(c.Warnings, fmt.Sprintf("%s synced with %d Pods, %d existed", in.Informer, in.Child.InitialAdds, r.PodsAtStart))
			}
		}
		s.Sizes[i].Churns = append(s.Sizes[i].Churns, c)
	}
	resultAt := func(pods int, skew string) *churnResult {
		for _, r := range results {
			if r.Pods == pods && skewOf(r) == skew {
				return r
			}
		}
		return nil
	}
	for _, m := range steadyMetrics {
		for _, skew := range s.Skews {
			row := steadyRow{Metric: m.name, Churn: skew, Reference: m.reference, Target: m.target, BoundedOnly: m.boundedOnly}
			for _, sz := range s.Sizes {
				var cell steadyCell
				if r := resultAt(sz.Pods, skew); r != nil {
					cell = s.cell(m, r)
				}
				row.Cells = append(row.Cells, cell)
			}
			s.Rows = append(s.Rows, row)
		}
	}
	return s
}

// cell is m's cell in r: the reference's figure and each boltinformer
// child's, marked and counted in s's tally where m has a target for it.
func (s *steadyResult) cell(m steadyMetric, r *churnResult) steadyCell {
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
		}
		judged := f.Ratio > 0 || m.reference == ""
		if judged && m.target > 0 && (!m.boundedOnly || informer == informerBoltBounded) {
			f.Mark = steadyMark(f.marked(), m.target)
			if f.Mark == markMet {
				s.Met++
			} else {
				s.Missed++
			}
		}
		return f
	}
	cell.Bolt, cell.Bounded = figure(informerBolt), figure(informerBoltBounded)
	return cell
}

// steadyTable is the summary's table: a header, then a row per metric and
// churn with its target and, for each size, client-go's figure and each
// boltinformer child's ratio, its own figure in parentheses and its mark.
func steadyTable(s *steadyResult) [][]string {
	head := []string{"", "churn", "target"}
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
		cells := []string{row.Metric, row.Churn, target}
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

// steadyFigureCell is "ratio (value) [mark]", or "(value) [mark]" without
// a ratio, or "-" without a figure.
func steadyFigureCell(fig *steadyFigure, format func(float64) string) string {
	if fig == nil {
		return "-"
	}
	cell := "(" + format(fig.Value) + ")"
	if fig.Ratio != 0 {
		cell = fmt.Sprintf("%.2f %s", fig.Ratio, cell)
	}
	if fig.Mark != "" {
		cell += " [" + fig.Mark + "]"
	}
	return cell
}

// steadyReport is the summary as text: what ran, the targets, the table,
// the tally of the marks and any warnings.
func steadyReport(s *steadyResult) *benchkit.Report {
	w := &benchkit.Report{}
	labels, bounded, perNode, records := make([]string, len(s.Sizes)), make([]string, len(s.Sizes)), make([]string, len(s.Sizes)), make([]string, len(s.Sizes))
	updated := map[string][]string{} // skew -> each size's "distinct at label (per Pod)"
	for i, sz := range s.Sizes {
		label := benchkit.CountLabel(sz.Pods)
		atStart := make([]string, len(sz.Churns))
		for j, c := range sz.Churns {
			atStart[j] = fmt.Sprint(c.PodsAtStart)
			updated[c.Skew] = append(updated[c.Skew], fmt.Sprintf("%d at %s (%.2f)", c.DistinctUpdated, label, c.UpdatesPerPodPerWindow))
		}
		labels[i] = fmt.Sprintf("%s (%s at start)", label, strings.Join(atStart, ", "))
		bounded[i] = fmt.Sprint(sz.BoundedObjects)
		perNode[i] = f0(sz.ByIndexObjects)
		records[i] = f1(sz.RecordBytes / 1000)
	}
	w.Printf("Steady state at %s Pods on one apiserver, each churned at %.0f changes/s for %v, once for each law by which\n"+
		"updates pick their Pod (%s); %s.\n",
		strings.Join(labels, ", "), s.Rate, seconds(s.DurationSeconds), strings.Join(s.Skews, ", "), s.Machine)
	var skewed []string
	for _, skew := range s.Skews {
		skewed = append(skewed, skew+": "+strings.Join(updated[skew], ", "))
	}
	w.Printf("Distinct Pods updated (updates per Pod updated within %s changes): %s.\n", benchkit.CountLabel(skewWindow), strings.Join(skewed, "; "))
	w.Printf("bolt: boltinformer; bounded: boltinformer with a cache of %s of the Pods (%s objects). Each cell: ratio to client-go\n"+
		"(its factory default, watch-list streaming; LIST where the row says so), the figure itself in parentheses, and the\n"+
		"mark against the row's target; a row over the record or the records has no client-go figure and marks the figure\n"+
		"itself. The record: the mean record in boltinformer's file after the size's first churn (%s KB). After sync: the\n"+
		"churn's first sample, the start's garbage returned. Allocated: the child's Go heap allocations over the churn per\n"+
		"event, and over the cold start per initial add. Restart: client-go cold, boltinformer warm on its file; settled: the\n"+
		"restart's last sample. Reads: through the lister and indexer after the churn; a ByIndex returns the Pods of one node (%s).\n\n",
		s.BoundedShare, strings.Join(bounded, ", "), strings.Join(records, ", "), strings.Join(perNode, ", "))
	w.Printf("Targets, for each churn and size:\n")
	for _, t := range steadyTargets() {
		w.Printf("  %s\n", t)
	}
	w.Printf("\n")
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
					w.Printf("  missed at %s, %s: %s, %s %.2f× (target ≤%g×)\n", benchkit.CountLabel(s.Sizes[i].Pods), row.Churn, row.Metric, fig.name, fig.f.marked(), row.Target)
				}
			}
		}
	}
	for _, sz := range s.Sizes {
		for _, c := range sz.Churns {
			for _, warn := range c.Warnings {
				w.Printf("WARNING at %s, %s: %s.\n", benchkit.CountLabel(sz.Pods), c.Skew, warn)
			}
		}
	}
	return w
}
