// Package metrictest reads metrics back in tests of the packages that
// export them (factory, the controller-runtime adapter).
package metrictest

import (
	"maps"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// CounterValue is the value of the counter name with exactly labels, as g
// gathers it; -1 if there is none.
func CounterValue(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if maps.Equal(got, labels) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return -1
}
