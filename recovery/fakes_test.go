package recovery

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/boltinformer/boltinformer/internal/testing/reflectortest"
	"github.com/boltinformer/boltinformer/reflector"
)

// RecordingStore cannot assert this itself: reflectortest must not import reflector.
var _ reflector.Store = (*reflectortest.RecordingStore)(nil)

// harness is a reflector that lists into a RecordingStore, which is not a
// Store of this package, so it never recovers.
type harness struct {
	t     *testing.T
	store *reflectortest.RecordingStore
	r     *reflector.Reflector
}

// newHarness builds a Reflector for *v1.Pod with millisecond backoffs and
// a recording Store; mutate adjusts the Options.
func newHarness(t *testing.T, lw cache.ListerWatcher, mutate func(*testOptions)) *harness {
	h := &harness{t: t, store: reflectortest.NewRecordingStore()}
	opts := testOptions{Options: reflector.Options{ExpectedType: &v1.Pod{}, InitialBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond}}
	if mutate != nil {
		mutate(&opts)
	}
	h.r = newReflector(lw, h.store, opts)
	return h
}

// run starts Run on a goroutine. The returned stop (also registered as a
// cleanup) cancels it, requires it to return within a second, and checks
// that no reflector goroutine is left.
func (h *harness) run() (stop func()) {
	return reflectortest.Run(h.t, h.r.Run, func() { assertNoReflectorGoroutines(h.t) })
}

// testOptions are a reflector's options with the recovery the tests set up.
type testOptions struct {
	reflector.Options
	Recovery *testRecovery
}

// testRecovery is an Options with its tuning and hooks, as tests set them.
type testRecovery struct {
	Lister                              testLister
	Workers                             int
	FullListFraction, FirstPageFraction float64
	MaxFetchRequests                    int
	Listed                              func(ctx context.Context) *Listing
	ListInFull, OpaqueVersions          bool
	Started                             func() (ended func())
}

// testLister is a scripted lister: lister returns its Lister, whose
// fields are the methods it has and no others.
type testLister interface{ lister() *Lister }

// config completes c as New does.
func (c testRecovery) config() config {
	var lister *Lister
	if c.Lister != nil {
		lister = c.Lister.lister()
	}
	return newConfig(&Options{Lister: lister, Workers: c.Workers, ListInFull: c.ListInFull, OpaqueVersions: c.OpaqueVersions,
		Tuning: Tuning{FullListFraction: c.FullListFraction, FirstPageFraction: c.FirstPageFraction, MaxFetchRequests: c.MaxFetchRequests}})
}

// newReflector builds a reflector that recovers through o.Recovery, if
// set and store is a Store.
func newReflector(lw cache.ListerWatcher, store reflector.Store, o testOptions) *reflector.Reflector {
	opts := o.Options
	rs, ok := store.(Store)
	if c := o.Recovery; c != nil && c.Lister != nil && ok {
		r := New(&Options{Lister: c.Lister.lister()}, rs, Hooks{Listed: c.Listed, Started: c.Started})
		r.cfg = c.config()
		opts.Relister = r
	}
	return reflector.New(lw, store, opts)
}
