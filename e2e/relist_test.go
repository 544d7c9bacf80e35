package e2e

import (
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/boltinformer/boltinformer/internal/testing/apiservertest"
	"github.com/boltinformer/boltinformer/internal/testing/poll"
	"github.com/boltinformer/boltinformer/persist"
	"github.com/boltinformer/boltinformer/reflector"
)

// TestRelistAfterExpiry stops a synced informer, changes the server and
// restarts kube-apiserver, which expires every older resourceVersion. It
// then starts an informer from the file. That informer resumes, gets 410
// Expired inside the watch stream, and relists exactly once. It then
// reconciles against the file:
//   - objects deleted meanwhile reach handlers as DeletedFinalStateUnknown
//     carrying the stored object;
//   - created and updated objects arrive as adds and updates;
//   - unchanged objects are not written to the file again, and reach only a
//     handler with a resync period, as OnUpdate(old, new) with the same
//     resourceVersion.
//
// The store must end equal to the server's.
func TestRelistAfterExpiry(t *testing.T) {
	const test = "relist"
	srv := apiservertest.Start(t, apiservertest.Options{})
	admin := newClientset(t, srv.Config(), nil)
	namespaces := []string{"relist-0", "relist-1", "relist-2"}
	createNamespaces(t, admin, namespaces...)
	populateConfigMaps(t, admin, test, namespaces, *flagRelistObjects)

	path := cachePath(t)
	selector := e2eLabel + "=" + test
	spec := informerSpec{collection: "configmaps-" + selector, resource: "configmaps", selector: selector,
		cs: newClientset(t, srv.Config(), nil)}

	// First run: cold, then stop.
	db := openDB(t, path)
	spec.db = db
	inf := newInformer(t, spec)
	r := run(t, inf)
	waitSynced(t, inf)
	r.stop()
	atStop := storeState(t, inf.GetStore())
	requireSameState(t, "store at stop", serverConfigMaps(t, admin, "", selector), atStop)
	storedRV := inf.Indexer().Collection().ResourceVersion()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// While it is down: change the server, then expire every older
	// resourceVersion.
	muts := mutateConfigMaps(t, admin, test, atStop, warmMutations)
	srv.RestartAPIServer(t)
	server := serverConfigMaps(t, admin, "", selector)

	// Second run, from the file, with one handler that resyncs and one that
	// does not. The resync period (a minute) is longer than the test, so no
	// periodic resync adds to what the relist delivers.
	const resync = time.Minute
	db = openDB(t, path)
	var commitMu sync.Mutex
	var committedChanges, commits int
	db.AddCommitObserver(func(s persist.CommitStats) {
		commitMu.Lock()
		defer commitMu.Unlock()
		if s.Err == nil {
			committedChanges += s.Changes
			commits++
		}
	})
	obs := &observer{}
	counter := &requestCounter{resource: "configmaps"}
	spec.db, spec.observer, spec.resync = db, obs, resync
	spec.cs = newClientset(t, srv.Config(), counter)
	inf = newInformer(t, spec)
	resyncing, plain := &recorder{}, &recorder{}
	regResync, err := inf.AddEventHandlerWithResyncPeriod(resyncing, resync)
	if err != nil {
		t.Fatal(err)
	}
	regPlain, err := inf.AddEventHandlerWithResyncPeriod(plain, 0)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r = run(t, inf)
	waitSynced(t, inf, regResync, regPlain)
	poll.Until(t, time.Minute, "relist after the expired watch", func() bool { return len(obs.startCauses()) >= 2 })
	relisted := time.Since(start)

	// A sentinel created after the relist is the last event both handlers
	// get: once each has it, each has handled everything before it.
	sentinelNS := namespaces[0]
	sentinel, err := admin.CoreV1().ConfigMaps(sentinelNS).Create(t.Context(),
		configMap(sentinelNS, "sentinel", test, 0), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sentinelKey := sentinelNS + "/" + sentinel.Name
	server[sentinelKey] = sentinel.ResourceVersion
	poll.Until(t, time.Minute, "both handlers seeing the sentinel", func() bool {
		return resyncing.seen(sentinelKey) && plain.seen(sentinelKey)
	})
	requireSameState(t, "store after the relist", server, storeState(t, inf.GetStore()))
	if err := db.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	r.stop()

	lists := counter.lists.Load()
	t.Logf("relist after apiserver restart: %d LIST request(s), %d watch requests, relist done %v after start; stored rv %s; watch errors: %v",
		lists, counter.watches.Load(), relisted.Round(time.Millisecond), storedRV, obs.watchErrors())
	if lists != 1 {
		t.Errorf("LIST requests = %d, want exactly 1", lists)
	}
	wantCauses := []reflector.StartCause{reflector.CauseResumed, reflector.CauseRelistExpired}
	if causes := obs.startCauses(); fmt.Sprint(causes) != fmt.Sprint(wantCauses) {
		t.Errorf("reflector start causes = %v, want %v", causes, wantCauses)
	}

	// The file: only the changed keys (and the sentinel) were written.
	commitMu.Lock()
	changes, nCommits := committedChanges, commits
	commitMu.Unlock()
	wantChanges := muts.changedKeys() + 1
	t.Logf("commits after the restart: %d, with %d changed keys; %d keys changed on the server (+1 sentinel), %d unchanged",
		nCommits, changes, muts.changedKeys(), len(atStop)-len(muts.updated)-len(muts.deleted))
	if changes != wantChanges {
		t.Errorf("committed %d changes, want %d: unchanged objects must not be rewritten", changes, wantChanges)
	}

	unchanged := state{}
	for key, rv := range atStop {
		_, updated := muts.updated[key]
		_, deleted := muts.deleted[key]
		if !updated && !deleted {
			unchanged[key] = rv
		}
	}
	for _, h := range []struct {
		name     string
		rec      *recorder
		resyncs  bool
		expected int
	}{
		{"resyncing handler", resyncing, true, len(atStop) + muts.changedKeys() + len(unchanged) + 1},
		{"non-resyncing handler", plain, false, len(atStop) + muts.changedKeys() + 1},
	} {
		t.Run(h.name, func(t *testing.T) {
			events := h.rec.snapshot()
			if len(events) < len(atStop) {
				t.Fatalf("%d handler calls, fewer than the %d stored objects", len(events), len(atStop))
			}
			checkInitialAdds(t, events[:len(atStop)], atStop)
			checkRelistChanges(t, events[len(atStop):], atStop, muts, unchanged, sentinelKey, h.resyncs)
			if len(events) != h.expected {
				t.Errorf("%d handler calls, want %d", len(events), h.expected)
			}
		})
	}
}

// checkRelistChanges requires events, the calls after the initial adds, to
// be what reconciling the relist against the file gives: OnAdd(obj, false)
// for created keys, OnUpdate with the stored old object for updated keys,
// OnDelete(DeletedFinalStateUnknown) carrying the stored object for deleted
// keys, and, for a resyncing handler only, one OnUpdate(old, new) with the
// unchanged resourceVersion per unchanged key. The sentinel's add ends them.
func checkRelistChanges(t *testing.T, events []event, atStop state, muts mutations, unchanged state, sentinelKey string, resyncs bool) {
	t.Helper()
	if len(events) == 0 || events[len(events)-1].key != sentinelKey {
		t.Errorf("last handler call is not the sentinel's add")
	}
	seen := map[string]int{}
	syncs := 0
	for _, e := range events {
		if e.key == sentinelKey {
			if e.kind != evAdd || e.initial {
				t.Errorf("unexpected %v", e)
			}
			continue
		}
		seen[e.key]++
		switch e.kind {
		case evAdd:
			if rv, ok := muts.created[e.key]; !ok || e.initial || e.rv != rv {
				t.Errorf("unexpected %v (created: rv %q)", e, rv)
			}
		case evUpdate:
			if rv, ok := unchanged[e.key]; ok {
				syncs++
				if !resyncs && syncs <= 5 {
					t.Errorf("non-resyncing handler got %v for an unchanged object", e)
				}
				if e.oldRV != rv || e.rv != rv {
					t.Errorf("unexpected %v (unchanged: rv %s)", e, rv)
				}
				continue
			}
			if rv, ok := muts.updated[e.key]; !ok || e.rv != rv || e.oldRV != atStop[e.key] {
				t.Errorf("unexpected %v (updated: rv %s→%s)", e, atStop[e.key], rv)
			}
		case evDelete:
			if _, ok := muts.deleted[e.key]; !ok || !e.tombstone || !e.tombstoneObj || e.rv != atStop[e.key] || e.typ != "*v1.ConfigMap" {
				t.Errorf("unexpected %v (object %s), want DeletedFinalStateUnknown with the stored *v1.ConfigMap at rv %s",
					e, e.typ, atStop[e.key])
			}
		}
	}
	wantSyncs := 0
	if resyncs {
		wantSyncs = len(unchanged)
	}
	if syncs != wantSyncs {
		t.Errorf("%d same-resourceVersion updates of unchanged objects, want %d", syncs, wantSyncs)
	}
	for key := range unchanged {
		if want := map[bool]int{true: 1, false: 0}[resyncs]; seen[key] != want {
			t.Errorf("unchanged %s: %d handler calls, want %d", key, seen[key], want)
			break
		}
	}
	muts.checkEachSeenOnce(t, seen)
}
