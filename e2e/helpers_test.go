package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/factory"
	"github.com/boltinformer/boltinformer/internal/testing/poll"
	"github.com/boltinformer/boltinformer/persist"
	"github.com/boltinformer/boltinformer/recovery"
	"github.com/boltinformer/boltinformer/reflector"
)

// e2eLabel marks every object a test watches; informers select on it.
const e2eLabel = "boltinformer-e2e"

// protobuf makes a client speak protobuf, as controllers usually do.
func protobuf(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	return cfg
}

// newClientset returns a protobuf clientset for cfg whose requests for
// counter's resource are counted, when counter is not nil.
func newClientset(t testing.TB, cfg *rest.Config, counter *requestCounter) kubernetes.Interface {
	t.Helper()
	cfg = protobuf(cfg)
	if counter != nil {
		cfg.Wrap(counter.wrap)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// requestCounter counts LIST and WATCH requests for one resource's
// collection path (…/<resource>), in any namespace. A consistent read of one
// object (limit=1 at resourceVersion "", what a caught-up sync takes) is
// counted in probes, not in lists.
type requestCounter struct {
	resource               string
	lists, watches, probes atomic.Int64
	// metaLists are consistent metadata lists: a small warm collection's
	// proof of catching up (cache/versionproof.go). Not in lists.
	metaLists atomic.Int64
	// refuseProbes fails every limit=1 consistent read with an error.
	refuseProbes bool

	mu sync.Mutex
	// watchTimeouts are the timeoutSeconds parameters of the watches.
	watchTimeouts []string
}

func (c *requestCounter) timeouts() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.watchTimeouts...)
}

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/"+c.resource) {
			if w := req.URL.Query().Get("watch"); w == "true" || w == "1" {
				c.watches.Add(1)
				c.mu.Lock()
				c.watchTimeouts = append(c.watchTimeouts, req.URL.Query().Get("timeoutSeconds"))
				c.mu.Unlock()
			} else if q := req.URL.Query(); q.Get("limit") == "1" && q.Get("resourceVersion") == "" {
				c.probes.Add(1)
				if c.refuseProbes {
					return nil, errors.New("limit=1 read refused by the test")
				}
			} else if q.Get("resourceVersion") == "" && q.Get("limit") == proofPageSize && strings.Contains(req.Header.Get("Accept"), "as=PartialObjectMetadataList") {
				c.metaLists.Add(1)
			} else {
				c.lists.Add(1)
			}
		}
		return rt.RoundTrip(req)
	})
}

// proofPageSize is the limit of a small warm collection's consistent
// metadata list (recovery.ListVersions through the factories' listers).
// A metadata informer's cold list, also a consistent read of metadata, is
// in pages of 500.
const proofPageSize = "10000"

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// openDB opens the cache file at path and closes it in t's cleanup (Close is
// idempotent, so tests may close it earlier).
func openDB(t testing.TB, path string) *persist.DB {
	t.Helper()
	db, err := persist.Open(path, persist.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close %s: %v", path, err)
		}
	})
	return db
}

func cachePath(t testing.TB) string { return filepath.Join(t.TempDir(), "cache.db") }

// informerSpec says what an informer watches and where it persists.
type informerSpec struct {
	cs         kubernetes.Interface
	db         *persist.DB
	collection string
	resource   string // "configmaps" or "pods"
	namespace  string // "" for all
	selector   string // label selector; "" for everything
	resync     time.Duration
	// observer sees the reflector; an *observer also records watch errors.
	observer reflector.Observer
	// minWatchTimeout is InformerOptions.MinWatchTimeout; zero is 5m.
	minWatchTimeout time.Duration
	// cluster, if set, is the declared cluster identity
	// (Persistence.Cluster = StaticCluster(cluster)); unset records none.
	cluster string
	// syncedAtOpen is InformerOptions.SyncedAtOpen.
	syncedAtOpen bool
	// recovery gives the informer a metadata lister
	// (factory.NewMetadataLister over cs): it recovers by what changed
	// instead of relisting.
	recovery bool
	// fetchOneByOne makes the recovery fetch every changed object on its
	// own, never a namespace or the collection (slow under a rate limit).
	fetchOneByOne bool
	// lister, with recovery, is the recovery's lister instead of
	// factory.NewMetadataLister's.
	lister *recovery.Lister
	// pageSize is InformerOptions.PageSize; zero chooses as client-go.
	pageSize int64
	// warmListBelow is InformerOptions.WarmListBelow.
	warmListBelow int
	// cacheObjects is Persistence.CacheObjects; zero is unbounded.
	cacheObjects int
}

func (s informerSpec) example() runtime.Object {
	switch s.resource {
	case "configmaps":
		return &corev1.ConfigMap{}
	case "pods":
		return &corev1.Pod{}
	}
	panic("unknown resource " + s.resource)
}

// newInformer builds a persistent informer with a namespace index. Backoff is
// shortened so a failed watch is retried quickly.
func newInformer(t testing.TB, s informerSpec) *bcache.Informer {
	t.Helper()
	lw := cache.NewFilteredListWatchFromClient(s.cs.CoreV1().RESTClient(), s.resource, s.namespace,
		func(o *metav1.ListOptions) { o.LabelSelector = s.selector })
	opts := bcache.InformerOptions{
		Persistence:     bcache.Persistence{DB: s.db, Collection: s.collection, CacheObjects: s.cacheObjects},
		ResyncPeriod:    s.resync,
		Indexers:        cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		MinWatchTimeout: s.minWatchTimeout,
		InitialBackoff:  100 * time.Millisecond,
		MaxBackoff:      2 * time.Second,
		SyncedAtOpen:    s.syncedAtOpen,
		WarmListBelow:   s.warmListBelow,
		PageSize:        s.pageSize,
	}
	if s.cluster != "" {
		opts.Persistence.Cluster = bcache.StaticCluster(s.cluster)
	}
	if s.observer != nil {
		opts.Observer = s.observer
	}
	if s.recovery {
		lister := s.lister
		if lister == nil {
			lister = factory.NewMetadataLister(s.cs.CoreV1().RESTClient(), s.resource, s.namespace, metav1.ListOptions{LabelSelector: s.selector})
		}
		opts.Recovery = &recovery.Options{Lister: lister}
		if s.fetchOneByOne {
			// Every changed object is fetched on its own.
			opts.Recovery.Tuning = recovery.Tuning{FullListFraction: 2, MaxFetchRequests: -1}
		}
	}
	inf, err := bcache.NewSharedIndexInformerWithOptions(lw, s.example(), opts)
	if err != nil {
		t.Fatalf("informer on %s: %v", s.collection, err)
	}
	if o, ok := s.observer.(*observer); ok {
		if err := inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
			o.watchError(err)
		}); err != nil {
			t.Fatal(err)
		}
	}
	return inf
}

// running is an informer started by run.
type running struct {
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// run starts inf.RunWithContext and stops it (waiting for it to return) in
// t's cleanup, if the test has not stopped it already. Register the cache
// file's cleanup before calling run, so the informer stops first.
func run(t testing.TB, inf *bcache.Informer) *running {
	ctx, cancel := context.WithCancel(t.Context())
	r := &running{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		inf.RunWithContext(ctx)
	}()
	t.Cleanup(r.stop)
	return r
}

// stop cancels the informer and waits for RunWithContext to return, which
// is after every goroutine it started has stopped and its changes are
// flushed.
func (r *running) stop() {
	r.once.Do(r.cancel)
	<-r.done
}

// waitClosed waits up to d for ch to be closed.
func waitClosed(t testing.TB, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ch:
	case <-timer.C:
		t.Fatalf("%s: not done after %v", what, d)
	}
}

// waitSynced waits for the informer and then every registration to sync.
func waitSynced(t testing.TB, inf *bcache.Informer, regs ...cache.ResourceEventHandlerRegistration) {
	t.Helper()
	waitClosed(t, inf.HasSyncedChecker().Done(), 3*time.Minute, "informer sync")
	for i, reg := range regs {
		waitClosed(t, reg.HasSyncedChecker().Done(), time.Minute, fmt.Sprintf("handler %d sync", i))
	}
}

// eventKind is what a handler was called with.
type eventKind string

const (
	evAdd    eventKind = "add"
	evUpdate eventKind = "update"
	evDelete eventKind = "delete"
)

// event is one handler call.
type event struct {
	kind eventKind
	key  string
	// rv is the object's resourceVersion (the new object's for updates, the
	// tombstone's object's for DeletedFinalStateUnknown).
	rv string
	// oldRV is the old object's resourceVersion, for updates.
	oldRV string
	// initial is OnAdd's isInInitialList.
	initial bool
	// tombstone: OnDelete got a DeletedFinalStateUnknown; tombstoneObj: it
	// carried an object.
	tombstone, tombstoneObj bool
	// typ is the Go type of the object (of the tombstone's object).
	typ string
}

func (e event) String() string {
	switch e.kind {
	case evAdd:
		return fmt.Sprintf("add(%s rv=%s initial=%t)", e.key, e.rv, e.initial)
	case evUpdate:
		return fmt.Sprintf("update(%s rv %s→%s)", e.key, e.oldRV, e.rv)
	default:
		return fmt.Sprintf("delete(%s rv=%s tombstone=%t)", e.key, e.rv, e.tombstone)
	}
}

// recorder is a cache.ResourceEventHandler that records every call.
type recorder struct {
	mu     sync.Mutex
	events []event
}

var _ cache.ResourceEventHandler = (*recorder)(nil)

func objectKeyRV(obj interface{}) (string, string) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return fmt.Sprintf("<%T>", obj), ""
	}
	return m.GetNamespace() + "/" + m.GetName(), m.GetResourceVersion()
}

func (r *recorder) add(e event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *recorder) OnAdd(obj interface{}, isInInitialList bool) {
	key, rv := objectKeyRV(obj)
	r.add(event{kind: evAdd, key: key, rv: rv, initial: isInInitialList, typ: fmt.Sprintf("%T", obj)})
}

func (r *recorder) OnUpdate(oldObj, newObj interface{}) {
	key, rv := objectKeyRV(newObj)
	_, oldRV := objectKeyRV(oldObj)
	r.add(event{kind: evUpdate, key: key, rv: rv, oldRV: oldRV, typ: fmt.Sprintf("%T", newObj)})
}

func (r *recorder) OnDelete(obj interface{}) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		e := event{kind: evDelete, key: d.Key, tombstone: true, tombstoneObj: d.Obj != nil, typ: fmt.Sprintf("%T", d.Obj)}
		if d.Obj != nil {
			_, e.rv = objectKeyRV(d.Obj)
		}
		r.add(e)
		return
	}
	key, rv := objectKeyRV(obj)
	r.add(event{kind: evDelete, key: key, rv: rv, typ: fmt.Sprintf("%T", obj)})
}

func (r *recorder) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

func (r *recorder) snapshot() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event(nil), r.events...)
}

// seen reports whether the recorder got an add for key.
func (r *recorder) seen(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if e.kind == evAdd && e.key == key {
			return true
		}
	}
	return false
}

// observer is a reflector.Observer that records what it is told.
type observer struct {
	mu       sync.Mutex
	causes   []reflector.StartCause // CauseResumed, then the cause of every list
	resumeRV string
	listRVs  []string
	pages    []int    // pages of every list
	watchRVs []string // start RV of every accepted watch
	// firstWatch is when the first watch was accepted.
	firstWatch time.Time
	errs       []error // from the watch error handler
}

var _ reflector.Observer = (*observer)(nil)

func (o *observer) Resumed(rv string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.causes = append(o.causes, reflector.CauseResumed)
	o.resumeRV = rv
}

func (o *observer) Listed(cause reflector.StartCause, rv string, _, pages int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.causes = append(o.causes, cause)
	o.listRVs = append(o.listRVs, rv)
	o.pages = append(o.pages, pages)
}

// listPages returns how many pages each list came in.
func (o *observer) listPages() []int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]int(nil), o.pages...)
}

func (o *observer) WatchStarted(rv string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.watchRVs) == 0 {
		o.firstWatch = time.Now()
	}
	o.watchRVs = append(o.watchRVs, rv)
}

// firstWatchAt returns when the first watch was accepted (zero if none).
func (o *observer) firstWatchAt() time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.firstWatch
}

func (o *observer) WatchEnded(error) {}

func (o *observer) watchError(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.errs = append(o.errs, err)
}

func (o *observer) startCauses() []reflector.StartCause {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]reflector.StartCause(nil), o.causes...)
}

func (o *observer) watches() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.watchRVs...)
}

// String summarizes what the reflector did: its start causes, the last
// watches it started and the last watch errors.
func (o *observer) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	const last = 5
	return fmt.Sprintf("start causes %v (resumed at %q, lists at %v); %d watches, last from %v; %d watch errors, last %v",
		o.causes, o.resumeRV, o.listRVs, len(o.watchRVs), o.watchRVs[max(0, len(o.watchRVs)-last):],
		len(o.errs), o.errs[max(0, len(o.errs)-last):])
}

func (o *observer) watchErrors() []error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]error(nil), o.errs...)
}

// state is a key → resourceVersion map.
type state map[string]string

// storeState returns the store's key → resourceVersion map.
func storeState(t testing.TB, s cache.Store) state {
	t.Helper()
	return listState(s.List())
}

// serverListState returns the key → resourceVersion map of a server's list.
func serverListState(t testing.TB, list runtime.Object) state {
	t.Helper()
	items, err := meta.ExtractList(list)
	if err != nil {
		t.Fatalf("reading the items of a %T: %v", list, err)
	}
	return listState(items)
}

// serverConfigMaps lists the labelled ConfigMaps of namespace ("" for all).
func serverConfigMaps(t testing.TB, cs kubernetes.Interface, namespace, selector string) state {
	t.Helper()
	list, err := cs.CoreV1().ConfigMaps(namespace).List(t.Context(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatalf("listing configmaps on the server: %v", err)
	}
	return serverListState(t, list)
}

// serverPods lists the labelled Pods of namespace ("" for all).
func serverPods(t testing.TB, cs kubernetes.Interface, namespace, selector string) state {
	t.Helper()
	list, err := cs.CoreV1().Pods(namespace).List(t.Context(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatalf("listing pods on the server: %v", err)
	}
	return serverListState(t, list)
}

// diffStates describes how got differs from want, at most max lines.
func diffStates(want, got state, max int) []string {
	var diffs []string
	for k, rv := range want {
		if grv, ok := got[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("missing %s (rv %s)", k, rv))
		} else if grv != rv {
			diffs = append(diffs, fmt.Sprintf("%s: rv %s, want %s", k, grv, rv))
		}
	}
	for k, rv := range got {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("unexpected %s (rv %s)", k, rv))
		}
	}
	sort.Strings(diffs)
	if len(diffs) > max {
		diffs = append(diffs[:max], fmt.Sprintf("... and %d more", len(diffs)-max))
	}
	return diffs
}

// waitServerState waits until inf's store holds exactly server, the
// server's state the test listed. On timeout it fails t with the last
// difference, the store's resourceVersion, what obs saw the reflector do,
// and whether the server has since changed (relist). A server that moved
// after the test listed it means a write was still landing: the test is at
// fault, not the informer.
func waitServerState(t testing.TB, timeout time.Duration, what string, server state, relist func() state, inf *bcache.Informer, obs fmt.Stringer) {
	t.Helper()
	store := inf.GetStore()
	if err := poll.Wait(timeout, func() bool { return len(diffStates(server, storeState(t, store), 1)) == 0 }); err != nil {
		got := storeState(t, store)
		moved := "the server still holds the state listed"
		if d := diffStates(server, relist(), 20); len(d) > 0 {
			moved = "the server's state changed after the test listed it (a write still landing):\n  " + strings.Join(d, "\n  ")
		}
		t.Fatalf("%s: %v: %d objects at rv %s, want %d (the server's):\n  %s\n%v\n%s",
			what, err, len(got), inf.LastSyncResourceVersion(), len(server),
			strings.Join(diffStates(server, got, 20), "\n  "), obs, moved)
	}
}

// requireSameState fails the test unless got equals want exactly.
func requireSameState(t testing.TB, what string, want, got state) {
	t.Helper()
	if d := diffStates(want, got, 20); len(d) > 0 {
		t.Fatalf("%s: %d objects, want %d (the server's):\n  %s", what, len(got), len(want), strings.Join(d, "\n  "))
	}
}

// createNamespaces creates the named namespaces.
func createNamespaces(t testing.TB, cs kubernetes.Interface, names ...string) {
	t.Helper()
	for _, name := range names {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if _, err := cs.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create namespace %s: %v", name, err)
		}
	}
}

// createWorkers is how many creates run at once when populating.
const createWorkers = 16

func labels(test string) map[string]string { return map[string]string{e2eLabel: test} }

func configMap(namespace, name, test string, i int) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels(test)},
		Data:       map[string]string{"index": strconv.Itoa(i), "payload": strings.Repeat("x", 256)},
	}
}

func pod(namespace, name, test string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels(test)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name:  "pause",
			Image: "registry.k8s.io/pause:3.10",
		}}},
	}
}

// populate creates n labelled objects spread over namespaces, the i-th by
// create in namespaces[i%len(namespaces)], and returns their keys →
// resourceVersions.
func populate(t testing.TB, what string, namespaces []string, n int, create func(ctx context.Context, ns string, i int) (metav1.Object, error)) state {
	t.Helper()
	start := time.Now()
	var mu sync.Mutex
	out := state{}
	g, ctx := errgroup.WithContext(t.Context())
	g.SetLimit(createWorkers)
	// The first failure cancels ctx, and no call starts after it.
	for i := 0; i < n && ctx.Err() == nil; i++ {
		g.Go(func() error {
			ns := namespaces[i%len(namespaces)]
			obj, err := create(ctx, ns, i)
			if err != nil {
				return err
			}
			mu.Lock()
			out[ns+"/"+obj.GetName()] = obj.GetResourceVersion()
			mu.Unlock()
			return nil
		})
	}
	err := g.Wait()
	if err != nil {
		t.Fatalf("creating %s: %v", what, err)
	}
	t.Logf("created %d %s in %v", n, what, time.Since(start).Round(time.Millisecond))
	return out
}

// populateConfigMaps creates n labelled ConfigMaps spread over namespaces,
// named cm-<i>, and returns their keys → resourceVersions.
func populateConfigMaps(t testing.TB, cs kubernetes.Interface, test string, namespaces []string, n int) state {
	t.Helper()
	return populate(t, "configmaps", namespaces, n, func(ctx context.Context, ns string, i int) (metav1.Object, error) {
		return cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, fmt.Sprintf("cm-%05d", i), test, i), metav1.CreateOptions{})
	})
}

// populatePods creates n labelled Pods spread over namespaces.
func populatePods(t testing.TB, cs kubernetes.Interface, test string, namespaces []string, n int) state {
	t.Helper()
	return populate(t, "pods", namespaces, n, func(ctx context.Context, ns string, i int) (metav1.Object, error) {
		return cs.CoreV1().Pods(ns).Create(ctx, pod(ns, fmt.Sprintf("pod-%05d", i), test), metav1.CreateOptions{})
	})
}

func sortedKeys(s state) []string {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func splitKey(key string) (namespace, name string) {
	ns, name, _ := strings.Cut(key, "/")
	return ns, name
}

// rvNumber parses a resourceVersion. They are opaque to clients, but on this
// server they are etcd revisions, which the tests compare.
func rvNumber(t testing.TB, rv string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q is not a number: %v", rv, err)
	}
	return n
}

// mutations are the changes mutateConfigMaps made on the server.
type mutations struct {
	created state               // key → resourceVersion
	updated state               // key → new resourceVersion
	deleted map[string]struct{} // keys
}

func (m mutations) changedKeys() int { return len(m.created) + len(m.updated) + len(m.deleted) }

// checkEachSeenOnce fails t unless every created, updated and deleted key
// reached the handler exactly once; seen counts handler calls by key.
func (m mutations) checkEachSeenOnce(t testing.TB, seen map[string]int) {
	t.Helper()
	for _, keys := range []state{m.created, m.updated} {
		for key := range keys {
			if seen[key] != 1 {
				t.Errorf("%s: %d handler calls, want 1", key, seen[key])
			}
		}
	}
	for key := range m.deleted {
		if seen[key] != 1 {
			t.Errorf("%s: %d handler calls, want 1 delete", key, seen[key])
		}
	}
}

// mutateConfigMaps creates n new ConfigMaps (new-<i>, in baseline's
// namespaces), patches n existing ones and deletes n others, all distinct,
// chosen evenly across baseline.
func mutateConfigMaps(t testing.TB, cs kubernetes.Interface, test string, baseline state, n int) mutations {
	t.Helper()
	return mutateConfigMapsCounts(t, cs, test, baseline, "new", n, n, n)
}

// mutateConfigMapsCounts is mutateConfigMaps with a count of each change;
// created ConfigMaps are named <prefix>-<i>.
func mutateConfigMapsCounts(t testing.TB, cs kubernetes.Interface, test string, baseline state, prefix string, creates, updates, deletes int) mutations {
	t.Helper()
	ctx := t.Context()
	keys := sortedKeys(baseline)
	n := max(creates, updates, deletes)
	if len(keys) < 2*n {
		t.Fatalf("cannot update and delete %d of %d objects", n, len(keys))
	}
	step := len(keys) / (2 * n)
	m := mutations{created: state{}, updated: state{}, deleted: map[string]struct{}{}}
	var namespaces []string
	seenNS := map[string]bool{}
	for _, k := range keys {
		if ns, _ := splitKey(k); !seenNS[ns] {
			seenNS[ns] = true
			namespaces = append(namespaces, ns)
		}
	}
	for i := range n {
		if i < creates {
			ns := namespaces[i%len(namespaces)]
			cm, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, fmt.Sprintf("%s-%05d", prefix, i), test, i), metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			m.created[ns+"/"+cm.Name] = cm.ResourceVersion
		}
		if i < updates {
			key := keys[2*i*step]
			ns, name := splitKey(key)
			// Distinct per call, or a second round's patch changes nothing.
			patch := fmt.Sprintf(`{"data":{"updated":"%s-%d"}}`, prefix, i)
			cm, err := cs.CoreV1().ConfigMaps(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			if err != nil {
				t.Fatalf("patch %s: %v", key, err)
			}
			m.updated[key] = cm.ResourceVersion
		}
		if i < deletes {
			key := keys[(2*i+1)*step]
			ns, name := splitKey(key)
			if err := cs.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Fatalf("delete %s: %v", key, err)
			}
			m.deleted[key] = struct{}{}
		}
	}
	return m
}
