package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/boltinformer/boltinformer/internal/testing/apiservertest"
	"github.com/boltinformer/boltinformer/internal/testing/poll"
	"github.com/boltinformer/boltinformer/reflector"
)

// TestWarmRestartWatchForbidden restarts an informer on its file with a
// client that RBAC lets list ConfigMaps but not watch them: every watch is
// answered 403. The informer must not wait forever for a watch to catch it
// up: after the second refusal it lists (one list, reconciled with the
// file: the changes made while it was down reach the handler as a relist's
// do) and is synced once it has applied that list — as a client-go
// informer with the same client, run beside it, is synced after its first
// list. Both stores must equal the server's, and keep following it through
// relists: a ConfigMap created after the sync reaches both. An informer
// that recovers by what changed (a metadata lister) gets there the same
// way: its recovery cannot end without a watch, so it lists in full.
func TestWarmRestartWatchForbidden(t *testing.T) {
	for _, recovery := range []bool{false, true} {
		t.Run(map[bool]string{false: "relist", true: "recovery"}[recovery], func(t *testing.T) {
			testWarmRestartWatchForbidden(t, recovery)
		})
	}
}

func testWarmRestartWatchForbidden(t *testing.T, recovery bool) {
	const test, ns = "forbidden", "forbidden"
	srv := apiservertest.Start(t, apiservertest.Options{})
	admin := newClientset(t, srv.Config(), nil)
	createNamespaces(t, admin, ns)
	populateConfigMaps(t, admin, test, []string{ns}, 200)

	path := cachePath(t)
	selector := e2eLabel + "=" + test
	spec := informerSpec{collection: "configmaps-" + selector, resource: "configmaps", namespace: ns, selector: selector,
		cs: newClientset(t, srv.Config(), nil), recovery: recovery}

	// First run: cold, as an admin.
	db := openDB(t, path)
	spec.db = db
	inf := newInformer(t, spec)
	r := run(t, inf)
	waitSynced(t, inf)
	r.stop()
	atStop := storeState(t, inf.GetStore())
	requireSameState(t, "store at stop", serverConfigMaps(t, admin, ns, selector), atStop)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// While it is down.
	muts := mutateConfigMaps(t, admin, test, atStop, 20)
	server := serverConfigMaps(t, admin, ns, selector)

	// Second run, from the file, as a ServiceAccount that may get and list
	// ConfigMaps in the namespace, not watch them.
	cfg, _, err := srv.ServiceAccountConfig(t.Context(), ns, "lister", []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	obs := &observer{}
	counter := &requestCounter{resource: "configmaps"}
	spec.db, spec.observer = openDB(t, path), obs
	spec.cs = newClientset(t, cfg, counter)
	inf = newInformer(t, spec)
	rec := &recorder{}
	reg, err := inf.AddEventHandler(rec)
	if err != nil {
		t.Fatal(err)
	}

	// client-go's informer with the same client, beside it.
	theirCS := newClientset(t, cfg, nil)
	theirs := cache.NewSharedIndexInformer(
		cache.NewFilteredListWatchFromClient(theirCS.CoreV1().RESTClient(), "configmaps", ns,
			func(o *metav1.ListOptions) { o.LabelSelector = selector }),
		&corev1.ConfigMap{}, 0, cache.Indexers{})
	// Quiet: its refused watches are expected.
	if err := theirs.SetWatchErrorHandlerWithContext(func(context.Context, *cache.Reflector, error) {}); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	r = run(t, inf)
	theirStop := runClientGo(t, theirs)
	waitClosed(t, inf.HasSyncedChecker().Done(), time.Minute, "warm sync with the watch forbidden")
	synced := time.Since(start)
	waitSynced(t, inf, reg)
	waitClosed(t, theirs.HasSyncedChecker().Done(), time.Minute, "client-go's sync")
	requireSameState(t, "store at sync", server, storeState(t, inf.GetStore()))
	requireSameState(t, "client-go's store at sync", server, storeState(t, theirs.GetStore()))

	// The stores follow the server through relists.
	sentinel, err := admin.CoreV1().ConfigMaps(ns).Create(t.Context(), configMap(ns, "sentinel", test, 0), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sentinelKey := ns + "/" + sentinel.Name
	server[sentinelKey] = sentinel.ResourceVersion
	poll.Until(t, time.Minute, "both informers relisting the sentinel", func() bool {
		_, ours, _ := inf.GetStore().GetByKey(sentinelKey)
		_, their, _ := theirs.GetStore().GetByKey(sentinelKey)
		return ours && their
	})
	poll.Until(t, time.Minute, "the handler seeing the sentinel", func() bool { return rec.seen(sentinelKey) })
	requireSameState(t, "store after the sentinel", server, storeState(t, inf.GetStore()))
	events := rec.snapshot()
	r.stop()
	theirStop()

	causes := obs.startCauses()
	t.Logf("synced %v after the start; %d LIST requests, %d watch requests; start causes %v",
		synced.Round(time.Millisecond), counter.lists.Load(), counter.watches.Load(), causes)
	if want := []reflector.StartCause{reflector.CauseResumed, reflector.CauseRelistCatchUp}; len(causes) < 2 || fmt.Sprint(causes[:2]) != fmt.Sprint(want) {
		t.Errorf("start causes = %v, want %v first", causes, want)
	}
	errs := obs.watchErrors()
	if len(errs) < 2 {
		t.Fatalf("watch errors = %v, want the refused watches", errs)
	}
	for _, err := range errs[:2] {
		if !apierrors.IsForbidden(err) {
			t.Errorf("watch error %v, want 403 Forbidden", err)
		}
	}

	// Handlers: the stored state as initial adds, then what changed as the
	// relist reconciled with the file delivers it, then the sentinel.
	unchanged := state{}
	for key, rv := range atStop {
		_, updated := muts.updated[key]
		_, deleted := muts.deleted[key]
		if !updated && !deleted {
			unchanged[key] = rv
		}
	}
	if len(events) < len(atStop) {
		t.Fatalf("%d handler calls, fewer than the %d stored objects", len(events), len(atStop))
	}
	checkInitialAdds(t, events[:len(atStop)], atStop)
	checkRelistChanges(t, events[len(atStop):], atStop, muts, unchanged, sentinelKey, false)
	if want := len(atStop) + muts.changedKeys() + 1; len(events) != want {
		t.Errorf("%d handler calls, want %d", len(events), want)
	}
}

// runClientGo runs a client-go informer until the returned stop, which
// waits for Run to return; stop is also a cleanup.
func runClientGo(t *testing.T, inf cache.SharedIndexInformer) (stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		inf.RunWithContext(ctx)
	}()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}
