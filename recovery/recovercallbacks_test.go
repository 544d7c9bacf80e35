package recovery

import (
	"context"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/boltinformer/boltinformer/internal/poll"

	"github.com/boltinformer/boltinformer/reflector"
)

// lockProbe tells whether a callback of the recovery runs while the
// recovery's filter, or the recovery itself, is locked: it tries to take
// both locks from another goroutine.
type lockProbe struct {
	r    chan *Recoverer // the recoverer once built, to every reader
	mu   sync.Mutex
	held []string
}

func (p *lockProbe) check(what string) {
	r := <-p.r
	p.r <- r
	got := make(chan struct{})
	go func() {
		rec := r.filter.lock()
		r.filter.unlock(rec)
		close(got)
	}()
	select {
	case <-got:
	case <-time.After(2 * time.Second):
		// The goroutine gets the locks once the caller lets them go.
		p.mu.Lock()
		p.held = append(p.held, what)
		p.mu.Unlock()
	}
}

func (p *lockProbe) Held() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.held...)
}

// probingObserver checks the locks from Recovered.
type probingObserver struct {
	recoveryObserver
	probe *lockProbe
}

func (o *probingObserver) Recovered(c reflector.StartCause, rv string, stats RecoveryStats) {
	o.probe.check("Observer.Recovered")
	o.recoveryObserver.Recovered(c, rv, stats)
}

// A recovery calls its callbacks — the end of Recovery.Started, the
// observer's Recovered and the error handler — with none of its locks
// held: a callback may wait for a watch event the store is being handed
// meanwhile.
func TestRecoveryCallbacksRunWithoutItsLocks(t *testing.T) {
	store := newRecoveryStore(upod("ns", "a", "ua", "1"), upod("ns", "b", "ub", "2"))
	store.failWrite = "ns/c"
	onServer := []*v1.Pod{upod("ns", "a", "ua", "1"), upod("ns", "b", "ub", "5"), upod("ns", "c", "uc", "6")}
	lister := &fakeLister{
		meta: func(n int, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
			return metaList("10", onServer...), nil
		},
		objects: server("10", onServer...),
	}
	probe := &lockProbe{r: make(chan *Recoverer, 1)}
	obs := &probingObserver{probe: probe}
	var errs errRecorder
	h := startRecovery(t, store, lister, "4", func(o *Options, lw *fakeLW) {
		o.Observer = obs
		o.WatchErrorHandler = func(ctx context.Context, err error) {
			probe.check("the error handler")
			errs.handle(ctx, err)
		}
		o.Recovery.Started = func() func() {
			return func() { probe.check("the end of Recovery.Started") }
		}
		o.built = func(r *Recoverer) { probe.r <- r }
	})
	poll.Until(t, 30*time.Second, "the recovery's callbacks", func() bool {
		return len(obs.Stats()) == 1 && len(errs.Errors()) > 0
	})
	h.stop()
	if len(obs.Stats()) != 1 || len(errs.Errors()) == 0 {
		t.Fatalf("recovered %d times with %d errors; the test wants one recovery and the failed write's error", len(obs.Stats()), len(errs.Errors()))
	}
	if held := probe.Held(); len(held) > 0 {
		t.Errorf("called with the recovery's locks held: %v", held)
	}
}
