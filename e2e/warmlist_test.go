package e2e

import (
	"maps"
	"slices"
	"testing"
	"time"

	bcache "github.com/boltinformer/boltinformer/cache"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/boltinformer/boltinformer/internal/apiservertest"
	"github.com/boltinformer/boltinformer/reflector"
)

// TestWarmListOfASmallCollection: a warm start of a small collection with
// InformerOptions.WarmListBelow does not wait for the apiserver's bookmark
// to prove it caught up; it recovers at once from a consistent metadata
// list, which also finds what changed while it was down. It is synced
// with the server's state (changes made while down included), its start
// is reported as warm-list, and it lists no object in full: only the
// metadata, and the objects that changed. The times of a cold start, a
// resumed warm start and the warm-list start, each counted from informer
// construction, are logged (not asserted).
func TestWarmListOfASmallCollection(t *testing.T) {
	const test = "warmlist"
	srv := apiservertest.Start(t, apiservertest.Options{})
	admin := newClientset(t, srv.Config(), nil)
	createNamespaces(t, admin, test)
	populateConfigMaps(t, admin, test, []string{test}, 100)
	clusterHeartbeat(t, admin) // a live cluster's etcd moves: the stored resourceVersion is behind
	selector := e2eLabel + "=" + test
	path := cachePath(t)

	start := func(warmListBelow int) (*bcache.Informer, *observer, *requestCounter, *running, time.Duration) {
		t.Helper()
		db := openDB(t, path)
		counter := &requestCounter{resource: "configmaps"}
		cs := newClientset(t, srv.Config(), counter)
		obs := &observer{}
		begin := time.Now()
		inf := newInformer(t, informerSpec{cs: cs, db: db, collection: "configmaps-" + selector,
			resource: "configmaps", selector: selector, observer: obs, recovery: true, warmListBelow: warmListBelow})
		r := run(t, inf)
		waitSynced(t, inf)
		took := time.Since(begin)
		if got, want := storeState(t, inf.GetStore()), serverConfigMaps(t, admin, "", selector); !maps.Equal(got, want) {
			t.Fatalf("synced with %d objects, the server has %d", len(got), len(want))
		}
		return inf, obs, counter, r, took
	}
	stopAndClose := func(r *running, inf *bcache.Informer) {
		r.stop()
		if err := inf.Indexer().Collection().DB().Close(); err != nil {
			t.Fatal(err)
		}
	}

	inf, _, _, r, cold := start(0)
	stopAndClose(r, inf)
	inf, obs, _, r, resumed := start(0)
	if causes := obs.startCauses(); !slices.Equal(causes, []reflector.StartCause{reflector.CauseResumed}) {
		t.Errorf("warm start without WarmListBelow: starts %v, want resumed", causes)
	}
	stopAndClose(r, inf)

	// While it is down: one object changed, one deleted.
	cm, err := admin.CoreV1().ConfigMaps(test).Get(t.Context(), "cm-00003", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data = map[string]string{"changed": "while down"}
	if _, err := admin.CoreV1().ConfigMaps(test).Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := admin.CoreV1().ConfigMaps(test).Delete(t.Context(), "cm-00004", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	inf, obs, counter, r, listed := start(bcache.SuggestedWarmListBelow)
	if causes := obs.startCauses(); len(causes) == 0 || causes[0] != reflector.CauseWarmList {
		t.Errorf("warm start with WarmListBelow: starts %v, want warm-list first", causes)
	}
	// A metadata list, and one fetch of the changed object.
	if n := counter.lists.Load(); n > 2 {
		t.Errorf("the warm-list start made %d LIST requests for configmaps, want the metadata list and one fetch", n)
	}
	stopAndClose(r, inf)
	t.Logf("100 ConfigMaps, from construction to synced: cold %v, resumed warm %v, warm-list %v (1 changed, 1 deleted while down)",
		cold.Round(time.Millisecond), resumed.Round(time.Millisecond), listed.Round(time.Millisecond))
}
