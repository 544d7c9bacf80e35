package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	klabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"

	"github.com/boltinformer/boltinformer/factory"
	"github.com/boltinformer/boltinformer/internal/testing/apiservertest"
	"github.com/boltinformer/boltinformer/internal/testing/poll"
	"github.com/boltinformer/boltinformer/persist"
)

const metadataTest = "factory-metadata"

// metadataFilter is one configuration of a metadata factory; the tests run
// each on boltinformer's factory and on client-go's metadatainformer.
type metadataFilter struct {
	name      string
	namespace string // "" for all namespaces
	selector  string
}

// metadataFilters: every namespace, label-selected; and one namespace,
// selected by a further label (objects move in and out of it when their
// tier changes).
var metadataFilters = []metadataFilter{
	{name: "all namespaces", selector: e2eLabel + "=" + metadataTest},
	{name: "md-a frontend", namespace: "md-a", selector: e2eLabel + "=" + metadataTest + ",tier=frontend"},
}

func (m metadataFilter) tweak(o *metav1.ListOptions) { o.LabelSelector = m.selector }

// ours is boltinformer's factory for m: the filtered form, as client-go's
// (whose only option is the transform).
func (m metadataFilter) ours(client metadata.Interface, db *persist.DB, opts ...factory.MetadataOption) *factory.MetadataFactory {
	return factory.NewFilteredMetadataSharedInformerFactory(client, 0, db, m.namespace, m.tweak, opts...)
}

// clientGo is client-go's factory for m.
func (m metadataFilter) clientGo(client metadata.Interface) metadatainformer.SharedInformerFactory {
	return metadatainformer.NewFilteredSharedInformerFactory(client, 0, m.namespace, m.tweak)
}

// metadataClient returns a metadata client (protobuf, as client-go makes
// it) whose requests counter counts.
func metadataClient(t testing.TB, cfg *rest.Config, counter *apiCounter) metadata.Interface {
	t.Helper()
	mc, err := metadata.NewForConfig(countedConfig(cfg, false, counter))
	if err != nil {
		t.Fatal(err)
	}
	return mc
}

// metadataRun is one factory per filter on a client, each with a recorder
// on its ConfigMaps informer registered before the start.
type metadataRun struct {
	what      string
	factories []metadatainformer.SharedInformerFactory
	informers []informers.GenericInformer
	recs      []*contentRecorder
	counter   *apiCounter
	stop      func()
}

// startMetadataRun builds one factory per filter with build, registers the
// recorders, starts the factories and waits for them to sync.
func startMetadataRun(ctx context.Context, t *testing.T, what string, counter *apiCounter, build func(metadataFilter) metadatainformer.SharedInformerFactory) *metadataRun {
	t.Helper()
	r := &metadataRun{what: what, counter: counter}
	for _, m := range metadataFilters {
		f := build(m)
		g := f.ForResource(configMapsGVR)
		rec := &contentRecorder{}
		if _, err := g.Informer().AddEventHandler(rec); err != nil {
			t.Fatalf("%s, %s: %v", what, m.name, err)
		}
		r.factories, r.informers, r.recs = append(r.factories, f), append(r.informers, g), append(r.recs, rec)
	}
	var stops []func()
	for _, f := range r.factories {
		stops = append(stops, startResourceFactory(ctx, t, f))
	}
	r.stop = func() {
		for _, stop := range stops {
			stop()
		}
	}
	return r
}

// objects returns the lister's objects of filter i by key.
func (r *metadataRun) objects(t *testing.T, i int) map[string]*metav1.PartialObjectMetadata {
	t.Helper()
	objs, err := r.informers[i].Lister().List(klabels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*metav1.PartialObjectMetadata{}
	for _, o := range objs {
		m, ok := o.(*metav1.PartialObjectMetadata)
		if !ok {
			t.Fatalf("%s, %s: lister holds %T, want *metav1.PartialObjectMetadata", r.what, metadataFilters[i].name, o)
		}
		out[m.Namespace+"/"+m.Name] = m.DeepCopy()
	}
	return out
}

// waitConverged waits until every filter's lister holds exactly the
// server's share (keys and resourceVersions), and its handler has been
// told: handlers are called after the store is updated.
func (r *metadataRun) waitConverged(ctx context.Context, t *testing.T, admin metadata.Interface) {
	t.Helper()
	for i, m := range metadataFilters {
		poll.Until(t, factoryTestTimeout, r.what+", "+m.name+": lister and handler equal to the server", func() bool {
			server := serverMetadata(ctx, t, admin, m)
			return len(diffStates(server, metadataState(r.objects(t, i)), 1)) == 0 && handlerAt(r.recs[i].snapshot(), server)
		})
	}
}

// handlerAt reports whether events leave every key of want at want's
// resourceVersion and every other key deleted.
func handlerAt(events []contentEvent, want state) bool {
	last := map[string]contentEvent{}
	for _, e := range events {
		last[e.key] = e
	}
	for key, rv := range want {
		e, ok := last[key]
		if _, objRV := objectKeyRV(e.obj); !ok || e.kind == evDelete || objRV != rv {
			return false
		}
	}
	for key, e := range last {
		if _, ok := want[key]; !ok && e.kind != evDelete {
			return false
		}
	}
	return true
}

// serverMetadata lists m's share of ConfigMaps through a metadata client.
func serverMetadata(ctx context.Context, t *testing.T, admin metadata.Interface, m metadataFilter) state {
	t.Helper()
	list, err := admin.Resource(configMapsGVR).Namespace(m.namespace).List(ctx, metav1.ListOptions{LabelSelector: m.selector})
	if err != nil {
		t.Fatal(err)
	}
	return serverListState(t, list)
}

func metadataState(objs map[string]*metav1.PartialObjectMetadata) state {
	out := state{}
	for key, o := range objs {
		out[key] = o.ResourceVersion
	}
	return out
}

// requireSameMetadata fails unless got holds exactly want's objects, every
// field equal, TypeMeta included.
func requireSameMetadata(t *testing.T, what string, want, got map[string]*metav1.PartialObjectMetadata) {
	t.Helper()
	var diffs []string
	for key, w := range want {
		g, ok := got[key]
		switch {
		case !ok:
			diffs = append(diffs, "missing "+key)
		case g.TypeMeta != w.TypeMeta:
			diffs = append(diffs, fmt.Sprintf("%s: TypeMeta %+v, want %+v", key, g.TypeMeta, w.TypeMeta))
		case !apiequality.Semantic.DeepEqual(w, g):
			diffs = append(diffs, fmt.Sprintf("%s: differs:\n%#v\nwant\n%#v", key, g, w))
		}
	}
	for key := range got {
		if _, ok := want[key]; !ok {
			diffs = append(diffs, "unexpected "+key)
		}
	}
	if len(diffs) > 0 {
		sort.Strings(diffs)
		t.Errorf("%s:\n  %s", what, strings.Join(diffs, "\n  "))
	}
}

// requireSameHandlerCalls fails unless two recorders saw, key by key, the
// same calls in the same order with equal objects (the order across keys
// is not client-go's contract).
func requireSameHandlerCalls(t *testing.T, what string, want, got []contentEvent) {
	t.Helper()
	byKey := func(events []contentEvent) map[string][]contentEvent {
		out := map[string][]contentEvent{}
		for _, e := range events {
			out[e.key] = append(out[e.key], e)
		}
		return out
	}
	w, g := byKey(want), byKey(got)
	keys := map[string]bool{}
	for k := range w {
		keys[k] = true
	}
	for k := range g {
		keys[k] = true
	}
	var diffs []string
	for key := range keys {
		we, ge := w[key], g[key]
		if len(we) != len(ge) {
			diffs = append(diffs, fmt.Sprintf("%s: %d calls, client-go %d: %s vs %s", key, len(ge), len(we), describeCalls(ge), describeCalls(we)))
			continue
		}
		for i := range we {
			a, b := we[i], ge[i]
			if a.kind != b.kind || a.initial != b.initial || a.tombstone != b.tombstone ||
				!apiequality.Semantic.DeepEqual(a.obj, b.obj) || !apiequality.Semantic.DeepEqual(a.old, b.old) {
				diffs = append(diffs, fmt.Sprintf("%s call %d: %s, client-go %s", key, i, describeCalls(ge[i:i+1]), describeCalls(we[i:i+1])))
			}
		}
	}
	if len(diffs) > 0 {
		sort.Strings(diffs)
		t.Errorf("%s: handler calls differ from client-go's:\n  %s", what, strings.Join(diffs, "\n  "))
	}
}

func describeCalls(events []contentEvent) string {
	var parts []string
	for _, e := range events {
		_, rv := objectKeyRV(e.obj)
		s := fmt.Sprintf("%s(rv=%s initial=%t tombstone=%t", e.kind, rv, e.initial, e.tombstone)
		if e.old != nil {
			_, oldRV := objectKeyRV(e.old)
			s += " old rv=" + oldRV
		}
		if m, ok := e.obj.(*metav1.PartialObjectMetadata); ok {
			s += fmt.Sprintf(" %s/%s", m.APIVersion, m.Kind)
		}
		parts = append(parts, s+")")
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// requireWarmCalls checks a warm start's handler calls, events, against
// client-go's, cgEvents, whose informer ran throughout: one initial add per
// stored object, equal to atStop's (TypeMeta included: it was read back
// from the file), each before its key's other calls; then, key by key,
// exactly the calls client-go's handler got for changes after the stored
// resourceVersion stopRV, with the same objects.
func requireWarmCalls(t *testing.T, what string, events, cgEvents []contentEvent, atStop map[string]*metav1.PartialObjectMetadata, stopRV uint64) {
	t.Helper()
	initial, changes := splitWarmStart(t, events, func(e contentEvent) (eventKind, string, bool) { return e.kind, e.key, e.initial })
	adds := map[string]*metav1.PartialObjectMetadata{}
	for _, e := range initial {
		m, ok := e.obj.(*metav1.PartialObjectMetadata)
		if _, dup := adds[e.key]; dup || !ok {
			t.Errorf("%s: second initial add of %s, or not metadata (%T)", what, e.key, e.obj)
			continue
		}
		adds[e.key] = m
	}
	requireSameMetadata(t, what+": initial adds against the objects at stop", atStop, adds)
	var missed []contentEvent
	for _, e := range cgEvents {
		if _, rv := objectKeyRV(e.obj); !e.initial && rvNumber(t, rv) > stopRV {
			missed = append(missed, e)
		}
	}
	if len(missed) == 0 {
		t.Errorf("%s: client-go's handler saw no change after the stop: the test changes nothing", what)
	}
	requireSameHandlerCalls(t, what+": calls after the initial adds", missed, changes)
}

// metadataChanger makes ConfigMap changes the metadata informers see:
// creates, annotation updates, tier flips (which move an object in or out
// of the frontend filter) and deletes, on names it tracks.
type metadataChanger struct {
	admin kubernetes.Interface
	mu    sync.Mutex
	live  []types.NamespacedName // sorted by creation
	next  int
	tier  map[types.NamespacedName]string
}

func newMetadataChanger(admin kubernetes.Interface) *metadataChanger {
	return &metadataChanger{admin: admin, tier: map[types.NamespacedName]string{}}
}

func (c *metadataChanger) create(ctx context.Context, ns, tier string) error {
	c.mu.Lock()
	name := types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("md-%03d", c.next)}
	c.next++
	c.mu.Unlock()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name.Name,
			Labels:      map[string]string{e2eLabel: metadataTest, "tier": tier},
			Annotations: map[string]string{"note": "ünïcödé ✓"}},
		Data: map[string]string{"not": "in the metadata"},
	}
	if _, err := c.admin.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	c.mu.Lock()
	c.live = append(c.live, name)
	c.tier[name] = tier
	c.mu.Unlock()
	return nil
}

// pick returns the i-th live object (modulo), or false if none.
func (c *metadataChanger) pick(i int) (types.NamespacedName, string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.live) == 0 {
		return types.NamespacedName{}, "", false
	}
	n := c.live[i%len(c.live)]
	return n, c.tier[n], true
}

func (c *metadataChanger) patch(ctx context.Context, name types.NamespacedName, patch string) error {
	_, err := c.admin.CoreV1().ConfigMaps(name.Namespace).Patch(ctx, name.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("patch %s: %w", name, err)
	}
	return nil
}

func (c *metadataChanger) annotate(ctx context.Context, i int, value string) error {
	name, _, ok := c.pick(i)
	if !ok {
		return nil
	}
	return c.patch(ctx, name, fmt.Sprintf(`{"metadata":{"annotations":{"note":%q}}}`, value))
}

func (c *metadataChanger) flipTier(ctx context.Context, i int) error {
	name, tier, ok := c.pick(i)
	if !ok {
		return nil
	}
	flipped := map[string]string{"frontend": "backend", "backend": "frontend"}[tier]
	if err := c.patch(ctx, name, fmt.Sprintf(`{"metadata":{"labels":{"tier":%q}}}`, flipped)); err != nil {
		return err
	}
	c.mu.Lock()
	c.tier[name] = flipped
	c.mu.Unlock()
	return nil
}

func (c *metadataChanger) delete(ctx context.Context, i int) error {
	name, _, ok := c.pick(i)
	if !ok {
		return nil
	}
	if err := c.admin.CoreV1().ConfigMaps(name.Namespace).Delete(ctx, name.Name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete %s: %w", name, err)
	}
	c.mu.Lock()
	for j, n := range c.live {
		if n == name {
			c.live = append(c.live[:j], c.live[j+1:]...)
			break
		}
	}
	delete(c.tier, name)
	c.mu.Unlock()
	return nil
}

// round makes one of each change in each namespace, seeded by round.
func (c *metadataChanger) round(ctx context.Context, t *testing.T, round int) {
	t.Helper()
	for _, ns := range []string{"md-a", "md-b"} {
		for _, step := range []func() error{
			func() error { return c.create(ctx, ns, "frontend") },
			func() error { return c.create(ctx, ns, "backend") },
			func() error { return c.annotate(ctx, 7*round+1, fmt.Sprintf("round %d", round)) },
			func() error { return c.flipTier(ctx, 5*round+2) },
			func() error { return c.flipTier(ctx, 3*round+4) },
			func() error { return c.delete(ctx, 11*round+3) },
		} {
			if err := step(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestFactoryMetadataDifferential runs boltinformer's metadata factory
// beside client-go's metadatainformer on one real apiserver, with two
// filters (all namespaces label-selected; one namespace selected by a
// further label), on one cache file opened with client-go's scheme.Scheme
// (which does not register PartialObjectMetadata):
//
//  1. cold: each informer makes one LIST, and its handler gets, key by key,
//     the same calls with the same objects as client-go's (initial adds and
//     then live creates, updates, deletes and objects leaving and entering
//     the tier filter); the listers hold the same objects, TypeMeta
//     included;
//  2. warm, after a clean stop and changes made while down, client-go's
//     informers running throughout: no LIST; one initial add per stored
//     object, equal to the object at stop (read back from the file), then
//     exactly the missed changes; the listers end equal to client-go's;
//  3. kill -9: a child process runs the same factories on the file and is
//     SIGKILLed while the ConfigMaps change, three times; then, after more
//     changes, a warm start makes no LIST, converges, and holds client-go's
//     objects, TypeMeta included.
func TestFactoryMetadataDifferential(t *testing.T) {
	srv := apiservertest.Start(t, apiservertest.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 2*factoryTestTimeout)
	defer cancel()
	admin := newClientset(t, srv.Config(), nil)
	mdAdmin := metadataClient(t, srv.Config(), nil)
	createNamespaces(t, admin, "md-a", "md-b")
	changes := newMetadataChanger(admin)
	for i := range 24 {
		if err := changes.create(ctx, []string{"md-a", "md-b"}[i%2], []string{"frontend", "frontend", "backend", "backend"}[i%4]); err != nil {
			t.Fatal(err)
		}
	}
	// Not the test's: in no filter.
	if _, err := admin.CoreV1().ConfigMaps("md-a").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "unlabelled", Labels: map[string]string{"tier": "frontend"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	path := cachePath(t)
	begin := time.Now()
	phase := func(what string) { t.Logf("%s done at %v", what, time.Since(begin).Round(time.Millisecond)) }

	// 1. Cold, beside client-go.
	cgCounter := newAPICounter()
	cg := startMetadataRun(ctx, t, "client-go", cgCounter, func(m metadataFilter) metadatainformer.SharedInformerFactory {
		return m.clientGo(metadataClient(t, srv.Config(), cgCounter))
	})
	defer cg.stop()
	// startOurs opens the file and runs boltinformer's factories on it.
	startOurs := func(what string) (*persist.DB, *apiCounter, *metadataRun) {
		db := openDB(t, path)
		counter := newAPICounter()
		return db, counter, startMetadataRun(ctx, t, what, counter, func(m metadataFilter) metadatainformer.SharedInformerFactory {
			f := m.ours(metadataClient(t, srv.Config(), counter), db)
			requirePersistent(t, what+", "+m.name, f.ForResource(configMapsGVR).Informer())
			return f
		})
	}
	db, counter, ours := startOurs("cold")
	phase("cold start")
	for round := range 2 {
		changes.round(ctx, t, round)
	}
	cg.waitConverged(ctx, t, mdAdmin)
	ours.waitConverged(ctx, t, mdAdmin)
	atStop := make([]map[string]*metav1.PartialObjectMetadata, len(metadataFilters))
	for i, m := range metadataFilters {
		atStop[i] = ours.objects(t, i)
		requireSameMetadata(t, "cold "+m.name+": lister against client-go's", cg.objects(t, i), atStop[i])
		requireSameHandlerCalls(t, "cold "+m.name, cg.recs[i].snapshot(), ours.recs[i].snapshot())
		if len(atStop[i]) == 0 {
			t.Fatalf("%s: nothing listed", m.name)
		}
		// client-go's metadata informer hands out objects with the TypeMeta
		// its client decoded them with; record which, for the log.
		for _, o := range atStop[i] {
			t.Logf("%s: %d objects with TypeMeta %+v", m.name, len(atStop[i]), o.TypeMeta)
			break
		}
	}
	collections := make([]string, len(metadataFilters))
	for i, m := range metadataFilters {
		collections[i] = requirePersistent(t, "cold "+m.name, ours.informers[i].Informer()).Collection().Name()
	}
	ours.stop()
	stopRVs := make([]uint64, len(metadataFilters))
	for i, name := range collections {
		info, ok := collectionInfo(t, db, name)
		if !ok || info.ResourceVersion == "" || info.Objects != len(atStop[i]) {
			t.Fatalf("collection %q: %+v (in the file: %t); want %d objects at a resourceVersion", name, info, ok, len(atStop[i]))
		}
		stopRVs[i] = rvNumber(t, info.ResourceVersion)
	}
	if n := counter.listsOf("configmaps"); n != len(metadataFilters) {
		t.Errorf("cold start made %d ConfigMap LISTs, want %d (one per informer)", n, len(metadataFilters))
	}
	if got := strings.Join(collectionNames(collectionInfos(t, db)), "|"); got != strings.Join(collections, "|") ||
		collections[0] != "metadata/v1/configmaps labels="+metadataFilters[0].selector ||
		collections[1] != "metadata/v1/configmaps ns=md-a labels="+metadataFilters[1].selector {
		t.Errorf("collections in the file %s, informers' %q", got, collections)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	phase("cold phase")

	// 2. Warm after a clean stop and changes made while down.
	changes.round(ctx, t, 2)
	db, counter, ours = startOurs("warm")
	cg.waitConverged(ctx, t, mdAdmin)
	ours.waitConverged(ctx, t, mdAdmin)
	for i, m := range metadataFilters {
		requireSameMetadata(t, "warm "+m.name+": lister against client-go's", cg.objects(t, i), ours.objects(t, i))
		requireWarmCalls(t, "warm "+m.name, ours.recs[i].snapshot(), cg.recs[i].snapshot(), atStop[i], stopRVs[i])
	}
	ours.stop()
	if n := counter.listsOf("configmaps"); n != 0 {
		t.Errorf("warm restart made %d ConfigMap LISTs, want none", n)
	}
	if counter.watchesOf("configmaps") == 0 {
		t.Error("warm restart made no ConfigMap WATCH")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	phase("warm phase")

	// 3. kill -9 while the objects change, then a warm start.
	childLog := newChildLog(t)
	env := childEnvironment(srv.Config(), path)
	var lines []string
	for kill := range 3 {
		c := startChild(t, "TestMetadataFactoryChild", env, childLog)
		select {
		case <-c.out.synced:
		case <-c.waited:
			t.Fatalf("child %d exited before syncing: %v\n%s", kill, c.err, tail(childLog.Name()))
		case <-ctx.Done():
			t.Fatalf("child %d did not sync\n%s", kill, tail(childLog.Name()))
		}
		// Changes stream while the child applies them; it dies mid-stream.
		churnCtx, stopChurn := context.WithCancel(ctx)
		churned := make(chan error, 1)
		go func() {
			var err error
			for i := 0; err == nil && churnCtx.Err() == nil; i++ {
				err = changes.annotate(churnCtx, i, fmt.Sprintf("churn %d.%d", kill, i))
			}
			if churnCtx.Err() != nil {
				err = nil
			}
			churned <- err
		}()
		select {
		case <-time.After(100*time.Millisecond + rand.N(400*time.Millisecond)):
		case <-c.waited:
			t.Fatalf("child %d exited on its own: %v\n%s", kill, c.err, tail(childLog.Name()))
		}
		c.kill()
		stopChurn()
		if err := <-churned; err != nil {
			t.Fatal(err)
		}
		lines = append(lines, c.out.lines()...)
	}
	t.Logf("children reported: %s", summarizeChildLines(lines))
	phase("kills")
	changes.round(ctx, t, 3)
	_, counter, ours = startOurs("after kill -9")
	ours.waitConverged(ctx, t, mdAdmin)
	phase("warm start after the kills")
	cg.waitConverged(ctx, t, mdAdmin)
	for i, m := range metadataFilters {
		requireSameMetadata(t, "after kill -9, "+m.name+": lister against client-go's", cg.objects(t, i), ours.objects(t, i))
	}
	ours.stop()
	if n := counter.listsOf("configmaps"); n != 0 {
		t.Errorf("warm start after kill -9 made %d ConfigMap LISTs, want none", n)
	}
	// The caught-up sync (the default) takes limit=1 consistent reads while
	// its first watches are short; they are not LISTs of the objects.
	t.Logf("warm start after kill -9: %d limit=1 reads, %d watches", counter.probesOf("configmaps"), counter.watchesOf("configmaps"))
}

// TestMetadataFactoryChild is the child half of
// TestFactoryMetadataDifferential: it runs the metadata factories of
// metadataFilters on the cache file and reports on stdout once they are
// synced, until it is killed.
func TestMetadataFactoryChild(t *testing.T) {
	cfg := childConfig(t, "TestFactoryMetadataDifferential")
	db := openDB(t, os.Getenv(childDBEnv))
	objects := 0
	for _, m := range metadataFilters {
		f := m.ours(metadataClient(t, cfg, nil), db)
		informer := f.ForResource(configMapsGVR).Informer()
		startResourceFactory(t.Context(), t, f)
		objects += len(informer.GetStore().ListKeys())
	}
	fmt.Printf("%ssynced objects=%d\n", childLinePrefix, objects)
	<-t.Context().Done() // Killed long before the test times out.
}
