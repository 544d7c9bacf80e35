package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/factory"
	"github.com/boltinformer/boltinformer/persist"
	"github.com/boltinformer/boltinformer/recovery"
	"github.com/boltinformer/boltinformer/reflector"
)

var podIndexers = cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}

// newClientGoInformer is the informer client-go's generated factory builds
// for Pods (watch-list semantics included, as with a real clientset).
func newClientGoInformer(cs kubernetes.Interface, selector string) cache.SharedIndexInformer {
	return coreinformers.NewFilteredPodInformer(cs, metav1.NamespaceAll, 0, podIndexers,
		func(o *metav1.ListOptions) { o.LabelSelector = selector })
}

// boltRun is a boltinformer with its file and what the child watches of it.
type boltRun struct {
	db       *persist.DB
	informer *bcache.Informer
	observer *observer
	changes  atomic.Int64 // sum of CommitStats.Changes
}

// newBoltInformer opens (or, with Fresh, recreates) the cache file and
// builds a Pod informer on it, as a controller switching over would.
func newBoltInformer(cs kubernetes.Interface, spec childSpec) (_ *boltRun, err error) {
	if spec.Fresh {
		if err := os.Remove(spec.File); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	db, err := persist.Open(spec.File, persist.Options{Scheme: scheme.Scheme})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			db.Close()
		}
	}()
	r := &boltRun{db: db, observer: newObserver()}
	db.AddCommitObserver(func(s persist.CommitStats) {
		if s.Err == nil {
			r.changes.Add(int64(s.Changes))
		}
	})
	lw := cache.NewFilteredListWatchFromClient(cs.CoreV1().RESTClient(), "pods", metav1.NamespaceAll,
		func(o *metav1.ListOptions) { o.LabelSelector = spec.Selector })
	var rec *recovery.Options
	if spec.Recovery {
		// What the typed factory gives its Pod informer (factory's
		// typedRecovery): the same Pods, namespace and selector, through
		// the same clientset's transport (so the child counts its requests
		// and bytes); the informer and its collection stay bolt-warm's.
		lister := factory.NewMetadataLister(cs.CoreV1().RESTClient(), "pods", metav1.NamespaceAll, metav1.ListOptions{LabelSelector: spec.Selector})
		if lister == nil {
			return nil, errors.New("no metadata lister for Pods: the clientset has no REST client")
		}
		rec = &recovery.Options{Lister: lister}
		if spec.RecoveryFullList {
			if lister.ListObjectsWire == nil {
				return nil, errors.New("the Pods' metadata lister cannot list in full undecoded")
			}
			rec.Lister = noMetadataLists(lister)
		}
		if spec.RecoveryWithout != "" {
			if !withoutLayer(rec, lister, spec.RecoveryWithout) {
				return nil, fmt.Errorf("the Pods' metadata lister cannot run without %s", spec.RecoveryWithout)
			}
		}
	}
	r.informer, err = bcache.NewSharedIndexInformerWithOptions(lw, &corev1.Pod{}, bcache.InformerOptions{
		Persistence: bcache.Persistence{
			DB:           db,
			Collection:   boltCollection(spec.Selector),
			Description:  map[string]string{"resource": "pods", "labelSelector": spec.Selector},
			CacheObjects: spec.CacheObjects,
		},
		Indexers:      podIndexers,
		Observer:      r.observer,
		SyncedAtOpen:  spec.SyncedAtOpen,
		Recovery:      rec,
		WarmListBelow: spec.WarmListBelow,
	})
	if err != nil {
		return nil, fmt.Errorf("informer on %s: %w", spec.File, err)
	}
	return r, nil
}

// boltCollection names the collection a bench informer with this label
// selector keeps in the file.
func boltCollection(selector string) string { return "pods " + selector }

// observer records how the reflector started, every list or resume after
// that, when each watch was accepted, the resourceVersion of a relist
// forced by an expired resourceVersion, and each recovery's end.
type observer struct {
	mu        sync.Mutex
	causes    []reflector.StartCause
	watches   []time.Time // when each watch was accepted
	relisted  chan string // the relist-expired RV, once
	recovered chan struct{}
	// recoveries counts the recoveries that ended; last is the latest.
	recoveries int
	last       recoveryEnd
	// watchFailed is when the first watch ended with an error (a 410).
	watchFailed time.Time
}

// recoveryEnd is a recovery as Recovered reported it.
type recoveryEnd struct {
	at    time.Time
	cause reflector.StartCause
	stats recovery.Stats
}

var _ recovery.Observer = (*observer)(nil)

func newObserver() *observer {
	return &observer{relisted: make(chan string, 1), recovered: make(chan struct{}, 1)}
}

// Recovered implements recovery.Observer; it may be called from a
// recovery's goroutine.
func (o *observer) Recovered(cause reflector.StartCause, _ string, stats recovery.Stats) {
	now := time.Now()
	o.mu.Lock()
	o.recoveries++
	o.last = recoveryEnd{at: now, cause: cause, stats: stats}
	o.mu.Unlock()
	select {
	case o.recovered <- struct{}{}:
	default:
	}
}

// recovery returns the last recovery that ended, timed from start, or nil.
func (o *observer) recovery(start time.Time) *recoveryResult {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.recoveries == 0 {
		return nil
	}
	s := o.last.stats
	return &recoveryResult{
		Cause: string(o.last.cause), Seconds: o.last.at.Sub(start).Seconds(), Count: o.recoveries,
		Listed: s.Listed, Pages: s.Pages, Unchanged: s.Unchanged, Deleted: s.Deleted, ToFetch: s.Fetch, Ahead: s.Ahead,
		Requests: s.Requests, Fetched: s.Fetched, Skipped: s.Skipped, DurationSeconds: s.Duration.Seconds(), ListSeconds: s.ListDuration.Seconds(),
	}
}

func (o *observer) Resumed(string) { o.addCause(reflector.CauseResumed) }

func (o *observer) Listed(cause reflector.StartCause, rv string, _, _ int) {
	o.addCause(cause)
	if cause == reflector.CauseRelistExpired {
		select {
		case o.relisted <- rv:
		default:
		}
	}
}

func (o *observer) WatchStarted(string) {
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.watches = append(o.watches, now)
}

func (o *observer) WatchEnded(err error) {
	if err == nil {
		return
	}
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.watchFailed.IsZero() {
		o.watchFailed = now
	}
}

// firstWatchError returns when the first watch ended with an error,
// counted from start; 0 if none did.
func (o *observer) firstWatchError(start time.Time) float64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.watchFailed.IsZero() {
		return 0
	}
	return o.watchFailed.Sub(start).Seconds()
}

func (o *observer) addCause(c reflector.StartCause) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.causes = append(o.causes, c)
}

// allCauses returns every list or resume's cause, in order.
func (o *observer) allCauses() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]string, len(o.causes))
	for i, c := range o.causes {
		out[i] = string(c)
	}
	return out
}

// watchesBy returns when the first watch was accepted (zero if none was)
// and how many had been accepted by t.
func (o *observer) watchesBy(t time.Time) (first time.Time, n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, w := range o.watches {
		if !w.After(t) {
			n++
		}
	}
	if len(o.watches) > 0 {
		first = o.watches[0]
	}
	return first, n
}

// runInformer runs inf until the returned stop is called; stop returns once
// RunWithContext has (for boltinformer: after its final flush).
func runInformer(ctx context.Context, inf cache.SharedIndexInformer) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		inf.RunWithContext(ctx)
	}()
	return func() { cancel(); <-done }
}

// noMetadataLists is a copy of l whose server cannot list metadata: it
// answers 406 Not Acceptable, as an aggregated API may. The copy has no
// metadata list's wire form and no rate limit (QPS 0), as the lister this
// variant measured always had.
func noMetadataLists(l *recovery.Lister) *recovery.Lister {
	c := *l
	c.ListMetadataWire, c.QPS = nil, 0
	c.ListMetadata = func(context.Context, metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
		return nil, apierrors.NewGenericServerResponse(http.StatusNotAcceptable, "GET", schema.GroupResource{Resource: "pods"}, "", "", 0, false)
	}
	return &c
}
