package recovery

import (
	"fmt"
	"math"
	"testing"
)

// rateLimited is a fakeLister behind a client rate limiter of qps.
type rateLimited struct {
	*fakeLister
	qps float32
}

func (l rateLimited) QPS() float32 { return l.qps }

// New reads each field of Recovery.Tuning into the recovery's config, and
// keeps the measured default for each zero field (and for a fraction that
// is not above zero). A negative MaxFetchRequests lifts the request budget
// that a rate-limited lister would set.
func TestNewHonoursTuning(t *testing.T) {
	lister := rateLimited{fakeLister: &fakeLister{}, qps: 5}
	budget := int(5 * fetchBudgetTime.Seconds()) // what 5 QPS allows
	for _, tc := range []struct {
		tuning              Tuning
		fullList, firstPage float64
		maxRequests         int
		noPageAhead         bool
	}{
		{Tuning{}, fullListFraction, firstPageFraction, max(minFetchBudget, budget), false},
		{Tuning{FullListFraction: 2}, 2, firstPageFraction, max(minFetchBudget, budget), false},
		{Tuning{FirstPageFraction: 0.5}, fullListFraction, 0.5, max(minFetchBudget, budget), false},
		{Tuning{MaxFetchRequests: 7}, fullListFraction, firstPageFraction, 7, false},
		{Tuning{MaxFetchRequests: -1}, fullListFraction, firstPageFraction, 0, false},
		{Tuning{NoPageAhead: true}, fullListFraction, firstPageFraction, max(minFetchBudget, budget), true},
		{Tuning{FullListFraction: -1, FirstPageFraction: math.NaN()}, fullListFraction, firstPageFraction, max(minFetchBudget, budget), false},
	} {
		t.Run(fmt.Sprintf("%+v", tc.tuning), func(t *testing.T) {
			r := New(&Recovery{Lister: lister, Tuning: tc.tuning}, nil, Hooks{})
			if r.cfg.fullListFraction != tc.fullList {
				t.Errorf("full list fraction %v, want %v", r.cfg.fullListFraction, tc.fullList)
			}
			if r.cfg.firstPageFraction != tc.firstPage {
				t.Errorf("first page fraction %v, want %v", r.cfg.firstPageFraction, tc.firstPage)
			}
			if got := r.maxFetchRequests(); got != tc.maxRequests {
				t.Errorf("fetch request budget %d, want %d", got, tc.maxRequests)
			}
			if r.cfg.noPageAhead != tc.noPageAhead {
				t.Errorf("no page ahead %v, want %v", r.cfg.noPageAhead, tc.noPageAhead)
			}
		})
	}
}
