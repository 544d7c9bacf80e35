package recovery

import (
	"fmt"
	"math"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/boltinformer/boltinformer/internal/testing/reflectortest"
)

// rateLimited is a fakeLister behind a client rate limiter of qps.
type rateLimited struct {
	*fakeLister
	qps float32
}

// lister is the fakeLister's Lister with QPS.
func (l rateLimited) lister() *Lister {
	lr := l.fakeLister.lister()
	lr.QPS = l.qps
	return lr
}

// New reads each field of Options.Tuning into the recovery's config, and
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
			r := New(&Options{Lister: lister.lister(), Tuning: tc.tuning}, nil, Hooks{})
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

// A rate-limited lister's QPS sets the fetch request budget a recovery
// plans with. At 5 QPS, 100 changed objects exceed the 64 requests allowed.
// They are fetched by one list of the collection. At 1,000 QPS each is
// fetched alone.
func TestRecoveryBudgetFromQPS(t *testing.T) {
	var stored, listed []*v1.Pod
	for i := range 100 {
		name := fmt.Sprintf("p%03d", i)
		stored = append(stored, upod("ns", name, "u"+name, "1"))
		listed = append(listed, upod("ns", name, "u"+name, "5"))
	}
	for _, tc := range []struct {
		qps      float32
		requests int
		fetches  []string
	}{
		{5, 1, []string{"*@10"}},
		{1000, 100, nil},
	} {
		t.Run(fmt.Sprint(tc.qps), func(t *testing.T) {
			store := newFakeStore(stored...)
			lister := &fakeLister{
				meta: func(int, metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
					return metaList("10", listed...), nil
				},
				objects: server("10", listed...),
			}
			h := startRecovery(t, store, lister, "1", func(o *testOptions, _ *reflectortest.ScriptedLW) {
				o.Recovery.Lister = rateLimited{fakeLister: lister, qps: tc.qps}
			})
			store.waitFor(t, "end@10")
			h.stop()
			stats := h.obs.Stats()
			if len(stats) != 1 || stats[0].Requests != tc.requests || stats[0].Fetched != 100 {
				t.Fatalf("recovery stats %+v, want one recovery of %d requests, 100 fetched", stats, tc.requests)
			}
			if tc.fetches != nil {
				reflectortest.Equal(t, "fetches", lister.Fetches(), tc.fetches)
			}
		})
	}
}

// Validate names the first required part an Options lacks, and accepts a
// nil Options (no recovery) and a Lister with only its required fields.
func TestValidateNamesWhatIsMissing(t *testing.T) {
	full := (&fakeLister{}).lister()
	for _, tc := range []struct {
		rec  *Options
		want string
	}{
		{nil, ""},
		{&Options{Lister: full}, ""},
		{&Options{}, "Recovery.Lister is nil"},
		{&Options{Lister: &Lister{ListObjects: full.ListObjects}}, "Recovery.Lister.ListMetadata is nil"},
		{&Options{Lister: &Lister{ListMetadata: full.ListMetadata}}, "Recovery.Lister.ListObjects is nil"},
	} {
		err := tc.rec.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v, want no error", tc.rec, err)
		case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want+": set it")):
			t.Errorf("%+v: %v, want %q and what to do", tc.rec, err, tc.want)
		}
	}
}
