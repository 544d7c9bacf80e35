package main

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Skew: which Pods the churn's updates hit. A real cluster's changes are
// not spread evenly over its objects: a few Pods (status updates of busy
// workloads, crash loops) change again and again, most hardly ever. What
// a change costs a cache may depend on that, e.g. how many changes of one
// key a write path can merge.

// churnSkew is the law by which an update picks its Pod (--skew). The zero
// value is uniform, the default and the worst case for merging.
type churnSkew struct {
	// zipfS is the exponent s of a Zipf law over the Pods' ranks (the Pod
	// of rank k, from 0, is picked with probability ∝ (k+1)^-s); 0 is
	// uniform. When set, it is > 1 and finite (rand.NewZipf's domain).
	zipfS float64
}

func (s *churnSkew) Set(v string) error {
	if v == "uniform" {
		*s = churnSkew{}
		return nil
	}
	exp, ok := strings.CutPrefix(v, "zipf:")
	if !ok {
		return fmt.Errorf("skew %q: want uniform or zipf:S with S > 1, e.g. zipf:1.1", v)
	}
	x, err := strconv.ParseFloat(exp, 64)
	if err != nil || math.IsInf(x, 0) || math.IsNaN(x) || x <= 1 {
		return fmt.Errorf("skew %q: the Zipf exponent S must be a number > 1, e.g. zipf:1.1", v)
	}
	*s = churnSkew{zipfS: x}
	return nil
}

func (s *churnSkew) String() string {
	if s.zipfS == 0 {
		return "uniform"
	}
	return "zipf:" + strconv.FormatFloat(s.zipfS, 'g', -1, 64)
}

// dirSuffix tells a skewed churn's directories from a uniform one's at the
// same size: "" for uniform, so that its paths stay those of before --skew.
func (s churnSkew) dirSuffix() string {
	if s.zipfS == 0 {
		return ""
	}
	return "-zipf" + strconv.FormatFloat(s.zipfS, 'g', -1, 64)
}

// parseSkews reads comma-separated skews (churnSkew.Set) and returns them
// distinct, in the order given.
func parseSkews(v string) ([]churnSkew, error) {
	var out []churnSkew
	for _, f := range strings.Split(v, ",") {
		var s churnSkew
		if err := s.Set(strings.TrimSpace(f)); err != nil {
			return nil, err
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out, nil
}

// skewWindow is the number of changes over which the churn counts how many
// times each Pod it updates is updated. At 100k Pods it is a quarter of
// them: about what a write path that gathers changes between rewrites of
// its records may merge.
const skewWindow = 25_000

// skewMeter measures how skewed the successful changes actually were, in
// the order they completed. Not safe for concurrent use (the driver holds
// its mu).
type skewMeter struct {
	window int // changes per window; skewWindow outside tests

	updated  map[podRef]bool // Pods updated at least once in the run
	inWindow map[podRef]bool // Pods updated in the current window
	changes  int             // changes in the current window
	updates  int             // updates in the current window

	// Of the full windows: how many, their updates and the distinct Pods
	// each updated, summed.
	windows, windowUpdates, windowPods int
}

func newSkewMeter(window int) *skewMeter {
	return &skewMeter{window: window, updated: map[podRef]bool{}, inWindow: map[podRef]bool{}}
}

// note counts a successful change of kind k; r is the Pod an update
// patched (ignored for other kinds).
func (m *skewMeter) note(k opKind, r podRef) {
	if k == opUpdate {
		m.updated[r] = true
		m.inWindow[r] = true
		m.updates++
	}
	m.changes++
	if m.changes == m.window {
		m.windows++
		m.windowUpdates += m.updates
		m.windowPods += len(m.inWindow)
		clear(m.inWindow)
		m.changes, m.updates = 0, 0
	}
}

// fill puts the figures into s.
func (m *skewMeter) fill(s *churnDriveStats) {
	s.DistinctUpdated = len(m.updated)
	s.SkewWindow = m.window
	s.SkewWindows = m.windows
	updates, pods := m.windowUpdates, m.windowPods
	if m.windows == 0 { // a short run: its one partial window
		updates, pods = m.updates, len(m.inWindow)
	}
	if pods > 0 {
		s.UpdatesPerPodPerWindow = float64(updates) / float64(pods)
	}
}
