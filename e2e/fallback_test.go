package e2e

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/factory"
	"github.com/boltinformer/boltinformer/internal/bench/runstats"
	"github.com/boltinformer/boltinformer/internal/testing/apiservertest"
	"github.com/boltinformer/boltinformer/internal/testing/poll"
	"github.com/boltinformer/boltinformer/recovery"
	"github.com/boltinformer/boltinformer/reflector"
)

var flagFallbackObjects = flag.Int("e2e.fallback-objects", 1200,
	"realistic Pods TestRecoveryFromAFullList creates (more than 500: the full list comes in pages)")

const (
	fallbackTest = "fallback"
	// Changes made while the informer is down.
	fallbackUpdates, fallbackDeletes, fallbackRecreates, fallbackCreates = 24, 12, 8, 12
)

// noMetadataLister is the lister of a server that does not serve the
// metadata form, as an aggregated API's may not: its metadata lists ask for
// a form the server does not have (PartialObjectMetadataList of a version
// meta.k8s.io does not serve), which kube-apiserver answers 406 Not
// Acceptable. Its full lists are the typed client's lister's.
type noMetadataLister struct {
	typed    *recovery.Lister
	rc       rest.Interface
	resource string
	selector string
	// notAcceptable counts the metadata lists the server refused with 406.
	notAcceptable *atomic.Int64
}

// newNoMetadataLister is noMetadataLister for the Pods of cs selected by
// selector, in every namespace.
func newNoMetadataLister(t testing.TB, cs kubernetes.Interface, selector string) noMetadataLister {
	t.Helper()
	rc := cs.CoreV1().RESTClient()
	typed := factory.NewMetadataLister(rc, "pods", "", metav1.ListOptions{LabelSelector: selector})
	if typed == nil || typed.ListObjectsWire == nil {
		t.Fatal("the typed client's lister does not list in full undecoded")
	}
	return noMetadataLister{typed: typed, rc: rc, resource: "pods", selector: selector, notAcceptable: &atomic.Int64{}}
}

// lister is the typed client's Lister with l's ListMetadata, without a
// metadata list's wire form, and without a rate limit (QPS 0).
func (l noMetadataLister) lister() *recovery.Lister {
	lr := *l.typed
	lr.ListMetadata, lr.ListMetadataWire, lr.QPS = l.ListMetadata, nil, 0
	return &lr
}

func (l noMetadataLister) ListMetadata(ctx context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	opts.LabelSelector = l.selector
	err := l.rc.Get().Resource(l.resource).VersionedParams(&opts, scheme.ParameterCodec).
		SetHeader("Accept", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v0").Do(ctx).Error()
	if err == nil {
		return nil, errors.New("the server served a metadata form that does not exist")
	}
	if apierrors.IsNotAcceptable(err) {
		l.notAcceptable.Add(1)
	}
	return nil, err
}

// fallbackChanges are the changes made while the informer was down, key →
// the new resourceVersion (deleted: the stored one).
type fallbackChanges struct {
	updated, deleted, recreated, created state
}

// changeFallbackPods updates, deletes, deletes and recreates (same name,
// new UID) and creates selected Pods, distinct keys spread over base.
func changeFallbackPods(t *testing.T, cs kubernetes.Interface, base state) fallbackChanges {
	t.Helper()
	ctx := t.Context()
	keys := sortedKeys(base)
	ch := fallbackChanges{updated: state{}, deleted: state{}, recreated: state{}, created: state{}}
	pick := func(i int) string { return keys[(i*7919)%len(keys)] } // 7919 is prime: distinct for i < len(keys)
	i := 0
	for range fallbackUpdates {
		key := pick(i)
		i++
		ns, name := splitKey(key)
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"changed":"%d"}}}`, i)
		p, err := cs.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		if err != nil {
			t.Fatalf("patch %s: %v", key, err)
		}
		ch.updated[key] = p.ResourceVersion
	}
	for range fallbackDeletes + fallbackRecreates {
		key := pick(i)
		i++
		ns, name := splitKey(key)
		if err := cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Fatalf("delete %s: %v", key, err)
		}
		if len(ch.deleted) < fallbackDeletes {
			ch.deleted[key] = base[key]
			continue
		}
		p := realisticPod(ns, fallbackTest, i)
		p.Name = name
		p, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("recreate %s: %v", key, err)
		}
		ch.recreated[key] = p.ResourceVersion
	}
	for j := range fallbackCreates {
		ns := splitNamespace(keys[j%len(keys)])
		p := realisticPod(ns, fallbackTest, len(keys)+10+j)
		p.Name = fmt.Sprintf("created-%04d", j)
		p, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		ch.created[ns+"/"+p.Name] = p.ResourceVersion
	}
	return ch
}

// fetched is how many objects the recovery must decode: the new and the
// changed ones.
func (ch fallbackChanges) fetched() int { return len(ch.updated) + len(ch.recreated) + len(ch.created) }

// TestRecoveryFromAFullList proves the recovery from a full list against
// the real apiserver, for a server that does not serve the
// metadata form (as an aggregated API's may not), with realistic Pods in
// protobuf and a label selector:
//
//  1. An informer syncs cold and stops.
//  2. While it is down, selected Pods are updated, deleted, deleted and
//     recreated under the same name (a new UID) and created; Pods outside
//     the selector change too; kube-apiserver restarts, which expires every
//     stored resourceVersion.
//  3. An informer starts from the file. Its resumed watch gets 410; its
//     metadata list is refused (406) and it recovers from one full list,
//     in pages. It must:
//     - end with exactly the server's state;
//     - decode only the new and changed objects (the recovery's count),
//     fetch nothing and make no other list;
//     - give a handler without a resync period exactly the changes:
//     updates from the stored object, DeletedFinalStateUnknown with the
//     stored object for the deleted and recreated, adds for the created
//     and recreated; and a handler due for a resync also the unchanged
//     objects, as OnUpdate with the same resourceVersion, as client-go's
//     relist delivers them;
//     - never give a handler a key at an older resourceVersion.
func TestRecoveryFromAFullList(t *testing.T) {
	n := *flagFallbackObjects
	srv := apiservertest.Start(t, apiservertest.Options{})
	cfg := srv.Config()
	admin := newClientset(t, cfg, nil)
	namespaces := []string{"fallback-0", "fallback-1", "fallback-2"}
	createNamespaces(t, admin, append(namespaces, "fallback-outside")...)
	base := populateRealisticPods(t, admin, fallbackTest, namespaces, n)
	outside := populateRealisticPods(t, admin, fallbackTest+"-outside", []string{"fallback-outside"}, 10)
	selector := e2eLabel + "=" + fallbackTest
	path := cachePath(t)
	// Paged, so that the full list comes with continue tokens (unpaged by
	// default, as client-go's relist, so the watch cache serves it).
	spec := informerSpec{collection: "pods-fallback", resource: "pods", selector: selector, recovery: true, pageSize: 500,
		// No proof by versions (its metadata list would be refused too): the
		// test counts the recovery's requests.
		warmListBelow: -1}

	// 1. Cold.
	db := openDB(t, path)
	spec.db, spec.cs = db, newClientset(t, cfg, nil)
	spec.lister = newNoMetadataLister(t, spec.cs, selector).lister()
	inf := newInformer(t, spec)
	r := run(t, inf)
	waitSynced(t, inf)
	r.stop()
	atStop := storeState(t, inf.GetStore())
	requireSameState(t, "store at stop", base, atStop)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// 2. Down: changes in and out of the selection, then every stored
	// resourceVersion expires.
	changes := changeFallbackPods(t, admin, atStop)
	for _, key := range sortedKeys(outside)[:5] {
		ns, name := splitKey(key)
		if _, err := admin.CoreV1().Pods(ns).Patch(t.Context(), name, types.MergePatchType, []byte(`{"metadata":{"annotations":{"outside":"1"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	srv.RestartAPIServer(t)

	// 3. From the file.
	const resync = time.Hour // longer than the test: only the relist is a resync
	db = openDB(t, path)
	counter := newByteCounter("pods")
	counted := srv.Config()
	counted.Wrap(counter.wrap)
	obs := &recoveryObserver{}
	spec.db, spec.cs, spec.observer, spec.resync = db, newClientset(t, counted, nil), obs, resync
	lister := newNoMetadataLister(t, spec.cs, selector)
	spec.lister = lister.lister()
	inf = newInformer(t, spec)
	resyncing, plain, mono := &recorder{}, &recorder{}, &monotonic{last: map[string]uint64{}}
	regResync, err := inf.AddEventHandlerWithResyncPeriod(resyncing, resync)
	if err != nil {
		t.Fatal(err)
	}
	regPlain, err := inf.AddEventHandlerWithResyncPeriod(plain, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inf.AddEventHandlerWithResyncPeriod(mono, 0); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	r = run(t, inf)
	waitSynced(t, inf, regResync, regPlain)
	synced := time.Since(began)
	poll.Until(t, time.Minute, "the recovery's end", func() bool { return obs.recovered() != nil })
	recoveryBytes, recoveryRequests := counter.snapshot()
	counter.mu.Lock()
	listType := counter.types["list"]
	counter.mu.Unlock()
	server := serverPods(t, admin, "", selector)

	// A sentinel, created last, is the last event: once both handlers have
	// it, they have everything before it.
	sentinel, err := admin.CoreV1().Pods(namespaces[0]).Create(t.Context(), realisticPod(namespaces[0], fallbackTest, n+100), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sentinelKey := namespaces[0] + "/" + sentinel.Name
	poll.Until(t, time.Minute, "both handlers seeing the sentinel", func() bool {
		return resyncing.seen(sentinelKey) && plain.seen(sentinelKey)
	})
	final := state{sentinelKey: sentinel.ResourceVersion}
	for k, v := range server {
		final[k] = v
	}
	requireSameState(t, "store after the recovery", final, storeState(t, inf.GetStore()))
	r.stop()

	stats := obs.recovered()
	t.Logf("recovered from a full list %v after start: %+v; read %s in %d list requests (%s), %d metadata requests",
		synced.Round(time.Millisecond), *stats, mib(recoveryBytes["list"]), recoveryRequests["list"], listType, recoveryRequests["metadata"])
	if causes := obs.startCauses(); fmt.Sprint(causes) != fmt.Sprint([]reflector.StartCause{reflector.CauseResumed, reflector.CauseRelistExpired}) {
		t.Errorf("start causes %v, want resumed, then one recovery after the 410", causes)
	}
	wantPages := (len(server) + 499) / 500
	want := recovery.Stats{Listed: len(server), Pages: wantPages, FullList: true,
		Unchanged: len(server) - changes.fetched(), Deleted: len(changes.deleted) + len(changes.recreated),
		Fetch: changes.fetched(), Fetched: changes.fetched(), Decoded: changes.fetched()}
	got := *stats
	if got.ListDuration <= 0 || got.ListDuration > got.Duration {
		t.Errorf("the recovery's list took %v of its %v", got.ListDuration, got.Duration)
	}
	got.Duration, got.ListDuration = 0, 0
	if got != want {
		t.Errorf("recovery stats %+v, want %+v", got, want)
	}
	if stats.Decoded*10 > stats.Listed {
		t.Errorf("decoded %d objects of a list of %d: want only the changed ones", stats.Decoded, stats.Listed)
	}
	if n := lister.notAcceptable.Load(); n != 1 {
		t.Errorf("the server refused %d metadata lists with 406 Not Acceptable, want 1", n)
	}
	if recoveryRequests["metadata"] != 1 || recoveryRequests["fetch"] != 0 || recoveryRequests["list"] != int64(wantPages) {
		t.Errorf("requests %v, want 1 metadata list (refused), %d list pages and no fetch", recoveryRequests, wantPages)
	}
	if !strings.HasPrefix(listType, "application/vnd.kubernetes.protobuf") {
		t.Errorf("the full list came as %q, want protobuf", listType)
	}
	if v := mono.violations(); len(v) > 0 {
		t.Errorf("a handler saw resourceVersions go backwards:\n  %s", strings.Join(v, "\n  "))
	}
	for _, h := range []struct {
		name    string
		rec     *recorder
		resyncs bool
	}{{"resyncing handler", resyncing, true}, {"handler without resync", plain, false}} {
		t.Run(h.name, func(t *testing.T) {
			events := h.rec.snapshot()
			if len(events) < len(atStop) {
				t.Fatalf("%d handler calls, fewer than the %d stored objects", len(events), len(atStop))
			}
			checkInitialAdds(t, events[:len(atStop)], atStop)
			checkFullListDeliveries(t, events[len(atStop):], atStop, changes, sentinelKey, h.resyncs)
		})
	}
}

// checkFullListDeliveries requires events, a handler's calls after its
// initial adds, to be exactly what a relist delivers of changes, in order
// per key, then the sentinel's add: unchanged objects only to a resyncing
// handler, once, as OnUpdate with the stored resourceVersion on both sides.
func checkFullListDeliveries(t *testing.T, events []event, atStop state, ch fallbackChanges, sentinelKey string, resyncs bool) {
	t.Helper()
	if len(events) == 0 || events[len(events)-1].key != sentinelKey {
		t.Errorf("last handler call is not the sentinel's add")
	}
	byKey := map[string][]string{}
	for _, e := range events {
		if e.key != sentinelKey {
			byKey[e.key] = append(byKey[e.key], e.String()+" "+e.typ)
		}
	}
	want := map[string][]string{}
	for key, rv := range atStop {
		if resyncs {
			want[key] = []string{fmt.Sprintf("update(%s rv %s→%s) *v1.Pod", key, rv, rv)}
		}
	}
	tombstone := func(key string) string {
		return fmt.Sprintf("delete(%s rv=%s tombstone=true) *v1.Pod", key, atStop[key])
	}
	add := func(key, rv string) string { return fmt.Sprintf("add(%s rv=%s initial=false) *v1.Pod", key, rv) }
	for key, rv := range ch.updated {
		want[key] = []string{fmt.Sprintf("update(%s rv %s→%s) *v1.Pod", key, atStop[key], rv)}
	}
	for key := range ch.deleted {
		want[key] = []string{tombstone(key)}
	}
	for key, rv := range ch.recreated {
		want[key] = []string{tombstone(key), add(key, rv)}
	}
	for key, rv := range ch.created {
		want[key] = []string{add(key, rv)}
	}
	keys := map[string]bool{}
	for k := range want {
		keys[k] = true
	}
	for k := range byKey {
		keys[k] = true
	}
	var wrong []string
	for _, key := range slices.Sorted(maps.Keys(keys)) {
		if !slices.Equal(byKey[key], want[key]) {
			wrong = append(wrong, fmt.Sprintf("%s: got %v, want %v", key, byKey[key], want[key]))
		}
	}
	if len(wrong) > 10 {
		wrong = append(wrong[:10], fmt.Sprintf("... and %d more", len(wrong)-10))
	}
	if len(wrong) > 0 {
		t.Errorf("%d handler calls after the initial adds:\n  %s", len(events), strings.Join(wrong, "\n  "))
	}
}

var (
	flagMeasureFallback = flag.Int("e2e.measure-fallback", 0,
		"if set, TestFallbackCost creates this many realistic Pods and times a restart after a 410 that recovers from a full list beside client-go's cold start")
	flagMeasureFallbackReps = flag.Int("e2e.measure-fallback-reps", 3, "repetitions of TestFallbackCost; it reports medians")
)

// listOnly is client-go's ListWatch without watch-list semantics: client-go's
// informer then starts with a LIST, as with its WatchListClient gate off.
type listOnly struct{ *cache.ListWatch }

func (listOnly) IsWatchListSemanticsUnSupported() bool { return true }

// TestFallbackCost measures, against the real apiserver, what a restart
// after a 410 costs where the recovery cannot list metadata, beside
// client-go's cold start (protobuf, a LIST) of the same Pods: the informer
// with a lister whose metadata lists the server refuses (it recovers from a
// full list, decoding only what changed), and the informer without a
// recovery (a full relist through Store.Replace, as the benchmark's
// bolt-410). Before every start kube-apiserver restarts (which is what
// expires the boltinformer file's resourceVersion; client-go gets the same
// treatment), then the machine is left alone for a moment; 1% of the Pods
// change while boltinformer is down. The informers use the default backoff.
// It runs only with -e2e.measure-fallback=N.
func TestFallbackCost(t *testing.T) {
	n := *flagMeasureFallback
	if n == 0 {
		t.Skip("set -e2e.measure-fallback=N to measure")
	}
	const (
		test = "fallbackcost"
		// settle is the pause after each apiserver restart, so that its
		// start-up work does not land on the measured start.
		settle = 3 * time.Second
	)
	srv := apiservertest.Start(t, apiservertest.Options{})
	admin := newClientset(t, srv.Config(), nil)
	namespaces := []string{"cost-0", "cost-1", "cost-2", "cost-3"}
	createNamespaces(t, admin, namespaces...)
	base := populateRealisticPods(t, admin, test, namespaces, n)
	selector := e2eLabel + "=" + test
	indexers := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
	path := cachePath(t)
	restart := func() {
		srv.RestartAPIServer(t)
		time.Sleep(settle)
	}

	// bolt starts a boltinformer on the file, recovering from a full list
	// (fallback) or relisting (no recovery), and returns when it is synced
	// after the start (HasSynced: for a 410 start, recovered or relisted)
	// and when its handler is.
	// sample is one start: when the informer synced, when its handler did,
	// and the CPU time this process used until then.
	type sample struct{ synced, handler, cpu time.Duration }

	bolt := func(fallback bool) (s sample, stats *recovery.Stats) {
		db := openDB(t, path)
		defer db.Close()
		cs := newClientset(t, srv.Config(), nil)
		obs := &recoveryObserver{}
		opts := bcache.InformerOptions{
			Persistence: bcache.Persistence{DB: db, Collection: "pods-" + test},
			Indexers:    indexers,
			Observer:    obs,
		}
		if fallback {
			opts.Recovery = &recovery.Options{Lister: newNoMetadataLister(t, cs, selector).lister()}
		}
		lw := cache.NewFilteredListWatchFromClient(cs.CoreV1().RESTClient(), "pods", "", func(o *metav1.ListOptions) { o.LabelSelector = selector })
		start, cpu := time.Now(), runstats.SelfCPU()
		inf, err := bcache.NewSharedIndexInformerWithOptions(lw, &corev1.Pod{}, opts)
		if err != nil {
			t.Fatal(err)
		}
		reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{})
		if err != nil {
			t.Fatal(err)
		}
		r := run(t, inf)
		waitClosed(t, inf.HasSyncedChecker().Done(), 3*time.Minute, "informer sync")
		s.synced = time.Since(start)
		waitClosed(t, reg.HasSyncedChecker().Done(), time.Minute, "handler sync")
		s.handler, s.cpu = time.Since(start), runstats.SelfCPU()-cpu
		r.stop()
		return s, obs.recovered()
	}

	bolt(true) // a cold start fills the file

	results := map[string][]sample{}
	var decoded []int
	for rep := range *flagMeasureFallbackReps {
		restart()
		cs := newClientset(t, srv.Config(), nil)
		lw := cache.NewFilteredListWatchFromClient(cs.CoreV1().RESTClient(), "pods", "", func(o *metav1.ListOptions) { o.LabelSelector = selector })
		start, cpu := time.Now(), runstats.SelfCPU()
		cg := cache.NewSharedIndexInformer(listOnly{lw}, &corev1.Pod{}, 0, indexers)
		reg, err := cg.AddEventHandler(cache.ResourceEventHandlerFuncs{})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			cg.RunWithContext(ctx)
		}()
		waitClosed(t, cg.HasSyncedChecker().Done(), 3*time.Minute, "client-go sync")
		synced := time.Since(start)
		waitClosed(t, reg.HasSyncedChecker().Done(), time.Minute, "client-go handler sync")
		results["client-go"] = append(results["client-go"], sample{synced, time.Since(start), runstats.SelfCPU() - cpu})
		cancel()
		<-done

		for _, variant := range []string{"fallback", "relist"} {
			keys := sortedKeys(base)
			for i := range max(n/100, 10) {
				key := keys[(rep*7+i*97)%len(keys)]
				ns, name := splitKey(key)
				patch := fmt.Sprintf(`{"metadata":{"annotations":{"cost":"%s-%d-%d"}}}`, variant, rep, i)
				if _, err := admin.CoreV1().Pods(ns).Patch(t.Context(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			restart()
			s, stats := bolt(variant == "fallback")
			results[variant] = append(results[variant], s)
			if variant == "fallback" {
				if stats == nil || !stats.FullList {
					t.Fatalf("rep %d: no recovery from a full list (%+v)", rep, stats)
				}
				decoded = append(decoded, stats.Decoded)
			}
		}
		t.Logf("rep %d: synced (CPU): client-go %v (%v); fallback %v (%v; decoded %d of %d); relist %v (%v)", rep,
			results["client-go"][rep].synced.Round(time.Millisecond), results["client-go"][rep].cpu.Round(time.Millisecond),
			results["fallback"][rep].synced.Round(time.Millisecond), results["fallback"][rep].cpu.Round(time.Millisecond), decoded[rep], n,
			results["relist"][rep].synced.Round(time.Millisecond), results["relist"][rep].cpu.Round(time.Millisecond))
	}
	median := func(v string, f func(sample) time.Duration) time.Duration {
		ds := make([]time.Duration, 0, len(results[v]))
		for _, s := range results[v] {
			ds = append(ds, f(s))
		}
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	synced := func(s sample) time.Duration { return s.synced }
	handler := func(s sample) time.Duration { return s.handler }
	cpu := func(s sample) time.Duration { return s.cpu }
	for _, v := range []string{"client-go", "fallback", "relist"} {
		var parts []string
		for _, m := range []struct {
			name string
			f    func(sample) time.Duration
		}{{"synced", synced}, {"handler synced", handler}, {"CPU", cpu}} {
			d, ref := median(v, m.f), median("client-go", m.f)
			parts = append(parts, fmt.Sprintf("%s %v (%.2f×)", m.name, d.Round(time.Millisecond), float64(d)/float64(ref)))
		}
		t.Logf("%d Pods, %-9s %s; medians of %d, × client-go's", n, v, strings.Join(parts, ", "), len(results[v]))
	}
}
