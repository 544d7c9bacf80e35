package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/boltinformer/boltinformer/internal/testing/apiservertest"
	"github.com/boltinformer/boltinformer/internal/testing/poll"
	"github.com/boltinformer/boltinformer/reflector"
)

// warmMutations is how many ConfigMaps the warm and relist tests create,
// update and delete (each) while the informer is down.
const warmMutations = 100

// TestWarmRestartWithinWindow stops a synced informer, changes the server,
// and restarts the informer on the same file while its resourceVersion is
// still in the watch cache. The restart must make no LIST request. Handlers
// must get OnAdd(obj, true) for exactly the state at stop, then the missed
// changes as ordinary adds, updates and deletes. The store must end equal to
// the server's. It logs the cold and the warm time to HasSynced.
func TestWarmRestartWithinWindow(t *testing.T) {
	const test = "warm"
	n := *flagObjects
	srv := apiservertest.Start(t, apiservertest.Options{})
	admin := newClientset(t, srv.Config(), nil)
	namespaces := []string{"warm-0", "warm-1", "warm-2", "warm-3", "warm-4"}
	createNamespaces(t, admin, namespaces...)
	populateConfigMaps(t, admin, test, namespaces, n)

	path := cachePath(t)
	selector := e2eLabel + "=" + test
	spec := informerSpec{collection: "configmaps-" + selector, resource: "configmaps", selector: selector}

	// First run: cold.
	coldCounter := &requestCounter{resource: "configmaps"}
	spec.cs = newClientset(t, srv.Config(), coldCounter)
	coldStart := time.Now()
	db := openDB(t, path)
	spec.db = db
	inf := newInformer(t, spec)
	reg, err := inf.AddEventHandler(&recorder{})
	if err != nil {
		t.Fatal(err)
	}
	r := run(t, inf)
	waitClosed(t, inf.HasSyncedChecker().Done(), 3*time.Minute, "cold sync")
	coldSync := time.Since(coldStart)
	waitSynced(t, inf, reg)
	server := serverConfigMaps(t, admin, "", selector)
	requireSameState(t, "store after the cold start", server, storeState(t, inf.GetStore()))
	r.stop()
	atStop := storeState(t, inf.GetStore())
	requireSameState(t, "store at stop", server, atStop)
	storedRV := inf.Indexer().Collection().ResourceVersion()
	// The informer closed its collection: the file is read through db.
	if committed := committedRV(t, db, inf.Indexer().Collection().Name()); committed != storedRV {
		t.Fatalf("after RunWithContext returned, committed rv = %q, want the store's %q", committed, storedRV)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// A cold start lists in pages of reflector.DefaultPagedListPageSize.
	if got, want := coldCounter.lists.Load(), int64((n+reflector.DefaultPagedListPageSize-1)/reflector.DefaultPagedListPageSize); got != want {
		t.Errorf("cold start made %d LIST requests, want %d (pages of %d)", got, want, reflector.DefaultPagedListPageSize)
	}

	// While it is down.
	muts := mutateConfigMaps(t, admin, test, atStop, warmMutations)
	server = serverConfigMaps(t, admin, "", selector)

	// Second run: warm, from the file.
	obs := &observer{}
	rec := &recorder{}
	counter := &requestCounter{resource: "configmaps"}
	spec.cs = newClientset(t, srv.Config(), counter)
	spec.observer = obs
	warmStart := time.Now()
	spec.db = openDB(t, path)
	inf = newInformer(t, spec)
	opened := time.Since(warmStart)
	if reg, err = inf.AddEventHandler(rec); err != nil {
		t.Fatal(err)
	}
	r = run(t, inf)
	waitClosed(t, inf.HasSyncedChecker().Done(), time.Minute, "warm sync")
	warmSync := time.Since(warmStart)
	waitSynced(t, inf, reg)
	t.Logf("cold sync of %d objects: %v; warm restart: %v (opening the file and collection: %v)",
		len(atStop), coldSync.Round(time.Millisecond), warmSync.Round(time.Millisecond), opened.Round(time.Millisecond))

	want := len(atStop) + muts.changedKeys()
	poll.Until(t, time.Minute, "handler receiving the missed changes", func() bool { return rec.len() >= want })
	waitServerState(t, time.Minute, "store converging to the server's state", server,
		func() state { return serverConfigMaps(t, admin, "", selector) }, inf, obs)
	requireSameState(t, "store after the warm restart", server, storeState(t, inf.GetStore()))
	events := rec.snapshot()
	r.stop()

	if n := counter.lists.Load(); n != 0 {
		t.Errorf("warm restart made %d LIST requests, want 0", n)
	}
	t.Logf("LIST requests: cold start %d, warm restart %d; warm restart watches: %d",
		coldCounter.lists.Load(), counter.lists.Load(), counter.watches.Load())
	if causes := obs.startCauses(); fmt.Sprint(causes) != fmt.Sprint([]reflector.StartCause{reflector.CauseResumed}) {
		t.Errorf("reflector start causes = %v, want [%s]", causes, reflector.CauseResumed)
	}
	if w := obs.watches(); len(w) == 0 || w[0] != storedRV {
		t.Errorf("watches started at %v, want the first at the stored rv %s", w, storedRV)
	}
	if len(events) != want {
		t.Errorf("handler got %d calls, want %d (%d initial adds + %d changes)", len(events), want, len(atStop), muts.changedKeys())
	}
	initial, changes := splitWarmStart(t, events, func(e event) (eventKind, string, bool) { return e.kind, e.key, e.initial })
	checkInitialAdds(t, initial, atStop)
	checkMissedChanges(t, changes, atStop, muts)
}

// splitWarmStart separates a warm start's initial adds, handed out in the
// background, from the watch's events, which are applied meanwhile,
// checking the order that holds per key: a key's initial add comes before
// any of its events, and a key not stored is added by the watch before it
// is updated or deleted. of says what an event is.
func splitWarmStart[E any](t *testing.T, events []E, of func(E) (kind eventKind, key string, initial bool)) (initial, changes []E) {
	t.Helper()
	added := map[string]bool{}
	for _, e := range events {
		kind, key, isInitial := of(e)
		if kind == evAdd && isInitial {
			initial = append(initial, e)
			added[key] = true
			continue
		}
		if kind != evAdd && !added[key] {
			t.Errorf("%s of %s came before the key's initial add", kind, key)
		}
		if kind == evAdd {
			added[key] = true
		}
		changes = append(changes, e)
	}
	return initial, changes
}

// checkInitialAdds requires events to be exactly one OnAdd(obj, true) per
// object of want, at want's resourceVersion.
func checkInitialAdds(t *testing.T, events []event, want state) {
	t.Helper()
	got := state{}
	for _, e := range events {
		if e.kind != evAdd || !e.initial {
			t.Errorf("before the missed changes: %v, want only initial adds", e)
			continue
		}
		if _, dup := got[e.key]; dup {
			t.Errorf("second initial add for %s", e.key)
		}
		got[e.key] = e.rv
	}
	requireSameState(t, "initial adds after the warm start", want, got)
}

// checkMissedChanges requires events, the calls after the initial adds, to
// be exactly muts delivered as a resumed watch delivers them: OnAdd(obj,
// false), OnUpdate(old, new) with old from atStop, OnDelete(obj) with the
// object itself (no tombstone).
func checkMissedChanges(t *testing.T, events []event, atStop state, muts mutations) {
	t.Helper()
	seen := map[string]int{}
	for _, e := range events {
		seen[e.key]++
		switch e.kind {
		case evAdd:
			if rv, ok := muts.created[e.key]; !ok || e.initial || e.rv != rv {
				t.Errorf("unexpected %v (created: rv %q)", e, rv)
			}
		case evUpdate:
			if rv, ok := muts.updated[e.key]; !ok || e.rv != rv || e.oldRV != atStop[e.key] {
				t.Errorf("unexpected %v (updated: rv %s→%s)", e, atStop[e.key], rv)
			}
		case evDelete:
			if _, ok := muts.deleted[e.key]; !ok || e.tombstone || e.typ != "*v1.ConfigMap" {
				t.Errorf("unexpected %v (%s), want a deletion of a *v1.ConfigMap the test deleted", e, e.typ)
			}
		}
	}
	muts.checkEachSeenOnce(t, seen)
}
