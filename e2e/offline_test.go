package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/tools/cache"

	"github.com/boltinformer/boltinformer/factory"
	"github.com/boltinformer/boltinformer/internal/testing/apiservertest"
	"github.com/boltinformer/boltinformer/internal/testing/poll"
	"github.com/boltinformer/boltinformer/reflector"
)

// TestWarmStartWhileAPIServerDown starts a warm informer, with a declared
// cluster identity and SyncedAtOpen (without it, catching up needs the
// server), while kube-apiserver is stopped. It must report synced from its
// file with exactly the stored objects, and keep trying to watch
// (each failure reaching the watch error handler). Objects changed while the
// informer was down are on the server; when the apiserver comes back (etcd
// kept, so the stored resourceVersion has expired from every watch cache)
// the informer gets 410, relists once and converges to the server's state.
func TestWarmStartWhileAPIServerDown(t *testing.T) {
	const test = "offline"
	srv := apiservertest.Start(t, apiservertest.Options{})
	admin := newClientset(t, srv.Config(), nil)
	namespaces := []string{"offline-0", "offline-1"}
	createNamespaces(t, admin, namespaces...)
	populateConfigMaps(t, admin, test, namespaces, 200)

	path := cachePath(t)
	selector := e2eLabel + "=" + test
	spec := informerSpec{collection: "configmaps-" + selector, resource: "configmaps", selector: selector,
		cs: newClientset(t, srv.Config(), nil), cluster: "e2e-offline-cluster"}

	// First run: cold, then stop.
	db := openDB(t, path)
	spec.db = db
	inf := newInformer(t, spec)
	r := run(t, inf)
	waitSynced(t, inf)
	r.stop()
	atStop := storeState(t, inf.GetStore())
	requireSameState(t, "store at stop", serverConfigMaps(t, admin, "", selector), atStop)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// While the informer is down the objects change; then the apiserver
	// goes down too.
	mutateConfigMaps(t, admin, test, atStop, 20)
	server := serverConfigMaps(t, admin, "", selector)
	srv.StopAPIServer()

	db = openDB(t, path)
	obs := &observer{}
	counter := &requestCounter{resource: "configmaps"}
	spec.db, spec.observer, spec.syncedAtOpen = db, obs, true
	spec.cs = newClientset(t, srv.Config(), counter)
	inf = newInformer(t, spec)
	rec := &recorder{}
	reg, err := inf.AddEventHandler(rec)
	if err != nil {
		t.Fatal(err)
	}
	run(t, inf)
	waitSynced(t, inf, reg)
	requireSameState(t, "store synced from the file with the apiserver down", atStop, storeState(t, inf.GetStore()))
	if n := rec.len(); n != len(atStop) {
		t.Errorf("handler got %d calls with the apiserver down, want the %d stored objects", n, len(atStop))
	}
	// The watch keeps being retried: wait for failures reported to the
	// watch error handler.
	poll.Until(t, time.Minute, "failed watch attempts reported", func() bool { return len(obs.watchErrors()) >= 3 })
	for _, err := range obs.watchErrors() {
		if !errors.Is(err, reflector.ErrWatch) || !utilnet.IsConnectionRefused(err) {
			t.Errorf("watch error %v: want a refused watch connection", err)
		}
	}
	if n := counter.lists.Load(); n != 0 {
		t.Errorf("%d LIST requests while the apiserver was down, want 0", n)
	}

	srv.StartAPIServer(t)
	waitServerState(t, 2*time.Minute, "the informer to converge once the apiserver is back", server,
		func() state { return serverConfigMaps(t, admin, "", selector) }, inf, obs)
	t.Logf("apiserver down: %d watch attempts failed; back: start causes %v, %d LIST request(s), %d watch requests",
		len(obs.watchErrors()), obs.startCauses(), counter.lists.Load(), counter.watches.Load())
	want := []reflector.StartCause{reflector.CauseResumed, reflector.CauseRelistExpired}
	if got := obs.startCauses(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("start causes %v, want %v (resume, then one relist after the 410)", got, want)
	}
	if n := counter.lists.Load(); n != 1 {
		t.Errorf("%d LIST requests, want the one relist", n)
	}
}

// TestWarmStartSyncedWhenCaughtUp stops an informer, changes objects, and
// starts it again from its file with the default options. It must report
// synced only once its store holds every change made while it was down —
// checked at the moment HasSynced turns true — having made no full LIST,
// only the one limit=1 consistent read. The last write before the restart
// is outside the informer's selector, so only the apiserver's bookmark can
// carry the watch to the read's resourceVersion: the short first watches
// (reflector.CatchUp) must bring it, with the ordinary 5-minute watch
// timeout. With SyncedAtOpen the same restart is synced on the stored state.
func TestWarmStartSyncedWhenCaughtUp(t *testing.T) {
	const test = "caughtup"
	srv := apiservertest.Start(t, apiservertest.Options{})
	admin := newClientset(t, srv.Config(), nil)
	clusterHeartbeat(t, admin)
	namespaces := []string{"caughtup-0", "caughtup-1"}
	createNamespaces(t, admin, namespaces...)
	populateConfigMaps(t, admin, test, namespaces, 200)

	path := cachePath(t)
	selector := e2eLabel + "=" + test
	spec := informerSpec{collection: "configmaps-" + selector, resource: "configmaps", selector: selector,
		cs: newClientset(t, srv.Config(), nil)}

	db := openDB(t, path)
	spec.db = db
	inf := newInformer(t, spec)
	r := run(t, inf)
	waitSynced(t, inf)
	r.stop()
	atStop := storeState(t, inf.GetStore())
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	muts := mutateConfigMaps(t, admin, test, atStop, 20)
	server := serverConfigMaps(t, admin, "", selector)
	// A last write outside the informer's selector: the consistent read's
	// resourceVersion is then newer than any event the watch delivers, and
	// only the apiserver's bookmark can carry the watch to it.
	if _, err := admin.CoreV1().ConfigMaps(namespaces[0]).Create(t.Context(), configMap(namespaces[0], "unwatched", "other", 0), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	db = openDB(t, path)
	obs := &observer{}
	counter := &requestCounter{resource: "configmaps"}
	spec.db, spec.observer = db, obs
	spec.cs = newClientset(t, srv.Config(), counter)
	inf = newInformer(t, spec)
	start := time.Now()
	r = run(t, inf)
	waitClosed(t, inf.HasSyncedChecker().Done(), 3*time.Minute, "caught-up sync")
	atSync := storeState(t, inf.GetStore())
	synced := time.Now()
	requireSameState(t, "store when HasSynced turned true", server, atSync)

	lists, probes := counter.lists.Load(), counter.probes.Load()
	t.Logf("caught-up sync %v after Run, %v after the watch opened: %d changed keys applied; %d full LIST, %d consistent read(s) (limit=1 at resourceVersion \"\": one request, at most one object returned), %d watch request(s); start causes %v",
		synced.Sub(start).Round(time.Millisecond), synced.Sub(obs.firstWatchAt()).Round(time.Millisecond), muts.changedKeys(), lists, probes, counter.watches.Load(), obs.startCauses())
	if lists != 0 {
		t.Errorf("%d full LIST requests, want 0", lists)
	}
	if probes == 0 {
		t.Errorf("no consistent limit=1 read: what did the informer catch up to?")
	}
	if got := obs.startCauses(); fmt.Sprint(got) != fmt.Sprint([]reflector.StartCause{reflector.CauseResumed}) {
		t.Errorf("start causes %v, want a resume only", got)
	}
	r.stop()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// SyncedAtOpen: synced on the stored state, without the read.
	db = openDB(t, path)
	counter = &requestCounter{resource: "configmaps"}
	spec.db, spec.observer, spec.syncedAtOpen = db, &observer{}, true
	spec.cs = newClientset(t, srv.Config(), counter)
	inf = newInformer(t, spec)
	r = run(t, inf)
	waitClosed(t, inf.HasSyncedChecker().Done(), time.Minute, "sync at open")
	r.stop()
	if lists, probes := counter.lists.Load(), counter.probes.Load(); lists != 0 || probes != 0 {
		t.Errorf("SyncedAtOpen: %d full LISTs and %d consistent reads, want none", lists, probes)
	}
}

// TestFactoryDefaultIdentityWhileAPIServerDown starts a factory with its
// default cluster identity (the kube-system namespace's UID, read from the
// apiserver) on a populated file while kube-apiserver is stopped. The
// identity cannot be proven, so the informer must hand out nothing stored —
// its lister is empty and it is not synced — and report why. Once the
// apiserver is back it proves the identity and catches up.
func TestFactoryDefaultIdentityWhileAPIServerDown(t *testing.T) {
	const test = "offline-factory"
	srv := apiservertest.Start(t, apiservertest.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), factoryTestTimeout)
	defer cancel()
	admin := newClientset(t, srv.Config(), nil)
	createNamespaces(t, admin, "offline-factory")
	populateConfigMaps(t, admin, test, []string{"offline-factory"}, 50)
	path := cachePath(t)

	db := openDB(t, path)
	f := factory.NewSharedInformerFactoryWithOptions(typedClient(t, srv.Config(), nil), 0, db, factory.WithNamespace("offline-factory"))
	lister := f.Core().V1().ConfigMaps().Lister()
	coldCtx, stopCold := context.WithCancel(ctx)
	f.Start(coldCtx.Done())
	f.WaitForCacheSync(coldCtx.Done())
	stored, err := lister.List(k8slabels.Everything())
	if err != nil || len(stored) != 50 {
		t.Fatalf("cold lister: %d objects, %v; want 50", len(stored), err)
	}
	stopCold()
	f.Shutdown()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	srv.StopAPIServer()
	db = openDB(t, path)
	fctx, stop := context.WithCancel(ctx)
	f = factory.NewSharedInformerFactoryWithOptions(typedClient(t, srv.Config(), nil), 0, db, factory.WithNamespace("offline-factory"))
	defer func() { stop(); f.Shutdown() }()
	informer := f.Core().V1().ConfigMaps().Informer()
	reported := make(chan error, 100)
	if err := informer.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
		select {
		case reported <- err:
		default:
		}
	}); err != nil {
		t.Fatal(err)
	}
	lister = f.Core().V1().ConfigMaps().Lister()
	f.Start(fctx.Done())
	for i := 0; i < 2; i++ {
		select {
		case err := <-reported:
			if !strings.Contains(err.Error(), "cluster's identity is not known") {
				t.Errorf("reported %v, want the unknown cluster identity", err)
			}
		case <-ctx.Done():
			t.Fatal("no error reported while the apiserver is down")
		}
	}
	if informer.HasSynced() {
		t.Error("synced while the cluster's identity cannot be read")
	}
	if got, err := lister.List(k8slabels.Everything()); len(got) != 0 || err != nil {
		t.Errorf("lister served %d stored objects (%v) before the cluster's identity was proven, want none", len(got), err)
	}

	srv.StartAPIServer(t)
	waitClosed(t, informer.HasSyncedChecker().Done(), factoryTestTimeout, "sync once the apiserver is back")
	server := serverConfigMaps(t, admin, "offline-factory", "")
	poll.Until(t, time.Minute, "the lister to match the server", func() bool {
		got, _ := lister.List(k8slabels.Everything())
		return len(diffStates(server, listState(got), 1)) == 0
	})
}
