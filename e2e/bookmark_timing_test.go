package e2e

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/kubernetes"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/boltinformer/boltinformer/internal/testing/apiservertest"
	"github.com/boltinformer/boltinformer/reflector"
)

// TestCatchUpWatchGetsBookmark checks, against the real apiserver, the fact
// reflector.CatchUp is built on: a watch of reflector.DefaultCatchUpWatchTimeout
// from an older resourceVersion, on a namespace nothing writes to, gets a
// bookmark at or past a consistent limit=1 read taken after it opened —
// the apiserver's pre-timeout bookmark — before it closes. If a release
// stops sending it, warm starts relist (CauseRelistCatchUp) instead of
// catching up; this test says so first. The cluster lives (clusterHeartbeat):
// the bookmark carries a revision newer than the watch's start only if etcd
// has one.
func TestCatchUpWatchGetsBookmark(t *testing.T) {
	srv := apiservertest.Start(t, apiservertest.Options{})
	admin := newClientset(t, srv.Config(), nil)
	clusterHeartbeat(t, admin)
	createNamespaces(t, admin, "quiet")
	populateConfigMaps(t, admin, "bookmark-timing", []string{"quiet"}, 10)
	l, err := admin.CoreV1().ConfigMaps("quiet").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stored := l.ResourceVersion
	// Writes elsewhere move the cluster's resourceVersion past the stored one.
	if _, err := admin.CoreV1().ConfigMaps(metav1.NamespaceDefault).Create(t.Context(), configMap(metav1.NamespaceDefault, "elsewhere", "other", 0), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	timeout := int64(reflector.DefaultCatchUpWatchTimeout / time.Second)
	start := time.Now()
	w, err := admin.CoreV1().ConfigMaps("quiet").Watch(t.Context(), metav1.ListOptions{ResourceVersion: stored, TimeoutSeconds: &timeout, AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	// As reflector.CatchUp does: a consistent read once the watch has
	// opened, repeated every half second while it lasts.
	read, err := admin.CoreV1().ConfigMaps("quiet").List(t.Context(), metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	readCtx, stopReads := context.WithCancel(t.Context())
	reads := make(chan struct{})
	go func() {
		defer close(reads)
		for {
			select {
			case <-readCtx.Done():
				return
			case <-time.After(500 * time.Millisecond):
			}
			_, _ = admin.CoreV1().ConfigMaps("quiet").List(readCtx, metav1.ListOptions{Limit: 1})
		}
	}()
	defer func() { stopReads(); <-reads }()
	for ev := range w.ResultChan() {
		if ev.Type != watch.Bookmark {
			t.Fatalf("%s event on a namespace nothing writes to", ev.Type)
		}
		acc, err := meta.Accessor(ev.Object)
		if err != nil {
			t.Fatal(err)
		}
		if rv := acc.GetResourceVersion(); rvNumber(t, rv) >= rvNumber(t, read.ResourceVersion) {
			t.Logf("watch from %s (timeoutSeconds %d): bookmark at %s, past the read's %s, %v after it opened",
				stored, timeout, rv, read.ResourceVersion, time.Since(start).Round(10*time.Millisecond))
			return
		}
	}
	t.Fatalf("a %d-second watch from %s closed after %v without a bookmark at or past the read's %s",
		timeout, stored, time.Since(start).Round(10*time.Millisecond), read.ResourceVersion)
}

// clusterHeartbeat renews a Lease every 200 ms until the test ends, as
// kubelets and leader-elected controllers renew theirs in every live
// cluster. A caught-up warm start needs etcd to move after its watch opens
// (see reflector.CatchUp); this test server otherwise writes only its own
// identity lease, every 10 s. The writes touch no resource the tests
// watch, and the helper's goroutine ends before the test does.
func clusterHeartbeat(t testing.TB, cs kubernetes.Interface) {
	t.Helper()
	leases := cs.CoordinationV1().Leases(metav1.NamespaceDefault)
	lease, err := leases.Create(t.Context(), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "e2e-heartbeat"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("heartbeat lease: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				renew := metav1.NewMicroTime(now)
				lease.Spec.RenewTime = &renew
				if l, err := leases.Update(ctx, lease, metav1.UpdateOptions{}); err == nil {
					lease = l
				}
			}
		}
	}()
}
