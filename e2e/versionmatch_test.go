package e2e

import (
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/internal/testing/apiservertest"
	"github.com/boltinformer/boltinformer/reflector"
)

// TestWarmStartCaughtUpByVersions: a warm start of a small collection
// (below InformerOptions.WarmListBelow, by default) takes a consistent
// metadata list and is synced as soon as its store holds exactly the listed
// versions — without the apiserver's bookmark, which the resumed watch
// otherwise waits for. To tell the two apart, the test refuses the limit=1
// consistent reads the bookmark path needs: without the list (WarmListBelow
// -1) the start can only catch up by relisting after its short watches
// (relist-catchup); with it, the start is synced having resumed, with no
// list but the metadata one. The watch still replays what changed while
// the process was down, so a handler gets the update and the deletion as
// watch events, not as a relist's DeletedFinalStateUnknown. Times from
// informer construction to synced are logged, not asserted.
func TestWarmStartCaughtUpByVersions(t *testing.T) {
	const test = "versionmatch"
	srv := apiservertest.Start(t, apiservertest.Options{})
	admin := newClientset(t, srv.Config(), nil)
	createNamespaces(t, admin, test)
	populateConfigMaps(t, admin, test, []string{test}, 100)
	clusterHeartbeat(t, admin) // a live cluster's etcd moves: the stored resourceVersion is behind
	selector := e2eLabel + "=" + test
	path := cachePath(t)

	type events struct {
		mu      sync.Mutex
		updated map[string]string // name → new data's "changed" value
		deleted map[string]bool   // name → deleted by a watch event (not a tombstone)
	}
	start := func(warmListBelow int, refuseProbes bool, ev *events) (*bcache.Informer, *observer, *requestCounter, *running, time.Duration) {
		t.Helper()
		db := openDB(t, path)
		counter := &requestCounter{resource: "configmaps", refuseProbes: refuseProbes}
		cs := newClientset(t, srv.Config(), counter)
		obs := &observer{}
		begin := time.Now()
		inf := newInformer(t, informerSpec{cs: cs, db: db, collection: "configmaps-" + selector,
			resource: "configmaps", selector: selector, observer: obs, recovery: true, warmListBelow: warmListBelow})
		if ev != nil {
			if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
				UpdateFunc: func(_, obj interface{}) {
					cm := obj.(*corev1.ConfigMap)
					ev.mu.Lock()
					defer ev.mu.Unlock()
					ev.updated[cm.Name] = cm.Data["changed"]
				},
				DeleteFunc: func(obj interface{}) {
					cm, ok := obj.(*corev1.ConfigMap)
					ev.mu.Lock()
					defer ev.mu.Unlock()
					if ok {
						ev.deleted[cm.Name] = true
					} else if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
						ev.deleted[d.Key] = false
					}
				},
			}); err != nil {
				t.Fatal(err)
			}
		}
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

	inf, _, _, r, cold := start(0, false, nil)
	stopAndClose(r, inf)
	inf, obs, counter, r, bookmarked := start(-1, false, nil)
	if causes := obs.startCauses(); !slices.Equal(causes, []reflector.StartCause{reflector.CauseResumed}) {
		t.Errorf("warm start with WarmListBelow -1: starts %v, want resumed", causes)
	}
	if n := counter.lists.Load(); n != 0 {
		t.Errorf("warm start with WarmListBelow -1 made %d LIST requests, want none", n)
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
	ev := &events{updated: map[string]string{}, deleted: map[string]bool{}}
	inf, obs, counter, r, matched := start(0, true, ev)
	if causes := obs.startCauses(); !slices.Equal(causes, []reflector.StartCause{reflector.CauseResumed}) {
		t.Errorf("warm start with the default WarmListBelow, limit=1 reads refused: starts %v, want resumed alone", causes)
	}
	if n, m := counter.lists.Load(), counter.metaLists.Load(); n != 0 || m != 1 {
		t.Errorf("warm start with the default WarmListBelow made %d LIST requests and %d consistent metadata lists, want 0 and 1", n, m)
	}
	stopAndClose(r, inf)
	ev.mu.Lock()
	if got := ev.updated["cm-00003"]; got != "while down" {
		t.Errorf("handler's update of cm-00003: %q, want the change made while down", got)
	}
	if byWatch, ok := ev.deleted["cm-00004"]; !ok || !byWatch {
		t.Errorf("handler's deletion of cm-00004: %v (seen %t), want a watch event", byWatch, ok)
	}
	ev.mu.Unlock()
	t.Logf("100 ConfigMaps, from construction to synced: cold %v, warm by bookmark %v, warm by versions %v (1 changed, 1 deleted while down)",
		cold.Round(time.Millisecond), bookmarked.Round(time.Millisecond), matched.Round(time.Millisecond))
}
