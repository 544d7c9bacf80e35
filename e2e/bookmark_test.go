package e2e

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/boltinformer/boltinformer/internal/testing/apiservertest"
	"github.com/boltinformer/boltinformer/internal/testing/poll"
	"github.com/boltinformer/boltinformer/reflector"
)

// bookmarkWatchTimeout is the informer's MinWatchTimeout in
// TestBookmarksAdvanceStoredRV. Each watch then lasts between this and
// twice this. The watch cache sends a bookmark 2s before a watch's deadline
// (otherwise about once a minute), so a short timeout makes bookmarks come
// within seconds. client-go raises any MinWatchTimeout under 5 minutes to 5
// minutes. boltinformer's reflector honours it down to 1s.
const bookmarkWatchTimeout = 10 * time.Second

// TestBookmarksAdvanceStoredRV runs an informer on ConfigMaps of an empty
// namespace while only Secrets of another namespace change. The committed
// resourceVersion of its collection must move past its start value through
// watch bookmarks alone, with no event reaching the handler and no relist.
// A restart must then resume from the bookmarked version without listing.
//
// The apiserver sends a watcher a bookmark only with a resourceVersion newer
// than the watch's start. For an idle resource its watch cache learns newer
// versions only from etcd's progress notifications (every 5s on
// apiservertest's etcd), so the Secret writes are what moves the etcd
// revision.
func TestBookmarksAdvanceStoredRV(t *testing.T) {
	const test = "bookmark"
	srv := apiservertest.Start(t, apiservertest.Options{})
	admin := newClientset(t, srv.Config(), nil)
	const idleNS, busyNS = "idle", "busy"
	createNamespaces(t, admin, idleNS, busyNS)

	path := cachePath(t)
	selector := e2eLabel + "=" + test
	obs := &observer{}
	db := openDB(t, path)
	watchCounter := &requestCounter{resource: "configmaps"}
	spec := informerSpec{cs: newClientset(t, srv.Config(), watchCounter), db: db, collection: "configmaps-" + idleNS,
		resource: "configmaps", namespace: idleNS, selector: selector, observer: obs,
		minWatchTimeout: bookmarkWatchTimeout}
	inf := newInformer(t, spec)
	rec := &recorder{}
	reg, err := inf.AddEventHandler(rec)
	if err != nil {
		t.Fatal(err)
	}
	r := run(t, inf)
	waitSynced(t, inf, reg)
	coll := inf.Indexer().Collection()
	if err := coll.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	startRV, err := coll.CommittedResourceVersion()
	if err != nil || startRV == "" {
		t.Fatalf("committed rv after the initial list = %q (%v), want the list's", startRV, err)
	}

	// Move the etcd revision with Secret writes in another namespace until
	// the test has seen its bookmark.
	writerCtx, stopWriter := context.WithCancel(t.Context())
	var writerWG sync.WaitGroup
	var lastSecretRV string
	var writerErr error
	writerWG.Go(func() {
		secrets := admin.CoreV1().Secrets(busyNS)
		s, err := secrets.Create(writerCtx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ticker"}}, metav1.CreateOptions{})
		for i := 0; err == nil; i++ {
			lastSecretRV = s.ResourceVersion
			select {
			case <-writerCtx.Done():
				return
			case <-time.After(2 * time.Second):
			}
			s.StringData = map[string]string{"tick": strconv.Itoa(i)}
			s, err = secrets.Update(writerCtx, s, metav1.UpdateOptions{})
		}
		if writerCtx.Err() == nil {
			writerErr = err
		}
	})
	defer func() { stopWriter(); writerWG.Wait() }()

	start := time.Now()
	var advancedRV string
	poll.Until(t, 75*time.Second, fmt.Sprintf("committed rv advancing past %s through bookmarks", startRV), func() bool {
		rv, err := coll.CommittedResourceVersion()
		if err != nil {
			t.Fatal(err)
		}
		if rvNumber(t, rv) > rvNumber(t, startRV) {
			advancedRV = rv
			return true
		}
		return false
	})
	took := time.Since(start)
	stopWriter()
	writerWG.Wait()
	if writerErr != nil {
		t.Fatalf("writing secrets: %v", writerErr)
	}
	r.stop()

	timeouts := watchCounter.timeouts()
	t.Logf("committed rv %s → %s after %v without a ConfigMap event (MinWatchTimeout %v; watch timeoutSeconds %v; last Secret rv %s)",
		startRV, advancedRV, took.Round(time.Millisecond), bookmarkWatchTimeout, timeouts, lastSecretRV)
	// The reflector honours a MinWatchTimeout under client-go's 5-minute
	// floor: every watch asks for [MinWatchTimeout, 2*MinWatchTimeout).
	for _, ts := range timeouts {
		if n, err := strconv.Atoi(ts); err != nil || n < int(bookmarkWatchTimeout.Seconds()) || n >= 2*int(bookmarkWatchTimeout.Seconds()) {
			t.Errorf("watch timeoutSeconds = %q, want in [%d, %d)", ts, int(bookmarkWatchTimeout.Seconds()), 2*int(bookmarkWatchTimeout.Seconds()))
		}
	}
	if n := rec.len(); n != 0 {
		t.Errorf("handler got %d calls on an empty, idle namespace: %v", n, rec.snapshot())
	}
	if causes := obs.startCauses(); fmt.Sprint(causes) != fmt.Sprint([]reflector.StartCause{reflector.CauseCold}) {
		t.Errorf("reflector start causes = %v, want only the cold list", causes)
	}
	if errs := obs.watchErrors(); len(errs) > 0 {
		t.Errorf("watch errors: %v", errs)
	}
	finalRV := coll.ResourceVersion()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// A restart resumes from the bookmarked version, without listing.
	obs = &observer{}
	counter := &requestCounter{resource: "configmaps"}
	spec.db, spec.observer, spec.cs = openDB(t, path), obs, newClientset(t, srv.Config(), counter)
	inf = newInformer(t, spec)
	r = run(t, inf)
	waitSynced(t, inf)
	poll.Until(t, 30*time.Second, "resumed watch", func() bool { return len(obs.watches()) > 0 })
	r.stop()
	if causes := obs.startCauses(); fmt.Sprint(causes) != fmt.Sprint([]reflector.StartCause{reflector.CauseResumed}) {
		t.Errorf("restart: start causes = %v, want [%s]", causes, reflector.CauseResumed)
	}
	if w := obs.watches(); w[0] != finalRV || rvNumber(t, w[0]) < rvNumber(t, advancedRV) {
		t.Errorf("restart watched from %s, want the stored %s (≥ bookmarked %s)", w[0], finalRV, advancedRV)
	}
	if n := counter.lists.Load(); n != 0 {
		t.Errorf("restart made %d LIST requests, want 0", n)
	}
}
