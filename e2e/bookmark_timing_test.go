package e2e

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/boltinformer/boltinformer/internal/apiservertest"
	"github.com/boltinformer/boltinformer/reflector"
)

// TestCatchUpWatchGetsBookmark checks, against the real apiserver, the fact
// reflector.CatchUp is built on: a watch of reflector.DefaultCatchUpWatchTimeout
// from an older resourceVersion, on a namespace nothing writes to, gets a
// bookmark at or past a consistent limit=1 read taken before it opened —
// the apiserver's pre-timeout bookmark — before it closes. If a release
// stops sending it, warm starts relist (CauseRelistCatchUp) instead of
// catching up; this test says so first.
func TestCatchUpWatchGetsBookmark(t *testing.T) {
	srv := apiservertest.Start(t, apiservertest.Options{})
	admin := newClientset(t, srv.Config(), nil)
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
	read, err := admin.CoreV1().ConfigMaps("quiet").List(t.Context(), metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	timeout := int64(reflector.DefaultCatchUpWatchTimeout / time.Second)
	start := time.Now()
	w, err := admin.CoreV1().ConfigMaps("quiet").Watch(t.Context(), metav1.ListOptions{ResourceVersion: stored, TimeoutSeconds: &timeout, AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
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
