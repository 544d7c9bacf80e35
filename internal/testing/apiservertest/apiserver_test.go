package apiservertest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"

	"github.com/boltinformer/boltinformer/internal/testing/apiservertest"
)

const ns = "apiservertest"

// TestServer exercises the helper end to end against the real binaries. The
// subtests share one server and run in order.
func TestServer(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	cs := kubernetes.NewForConfigOrDie(s.Config())
	ctx := t.Context()

	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Data: map[string]string{"k": "v"}}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	list, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "a" {
		t.Fatalf("list = %v, want exactly configmap a", list.Items)
	}
	preRestartRV := list.ResourceVersion

	t.Run("Kubeconfig", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "kubeconfig")
		if err := s.WriteKubeconfig(path); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var kc clientcmdv1.Config
		if err := json.Unmarshal(data, &kc); err != nil {
			t.Fatal(err)
		}
		cfg := s.Config()
		if len(kc.Clusters) != 1 || kc.Clusters[0].Cluster.Server != cfg.Host ||
			len(kc.AuthInfos) != 1 || kc.AuthInfos[0].AuthInfo.Token != cfg.BearerToken ||
			kc.CurrentContext == "" {
			t.Errorf("kubeconfig does not match Config():\n%s", data)
		}
	})

	t.Run("BookmarkBeforeWatchTimeout", func(t *testing.T) {
		testBookmark(t, cs, preRestartRV)
	})

	t.Run("WatchFromPreRestartRVExpires", func(t *testing.T) {
		s.RestartAPIServer(t)
		// The client must reconnect transparently: same port, same creds.
		w, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: preRestartRV})
		if err != nil {
			t.Fatalf("watch from %s: got HTTP-level error %v, want an in-stream ERROR event", preRestartRV, err)
		}
		defer w.Stop()
		ev := nextEvent(t, w, 10*time.Second)
		if ev.Type != watch.Error {
			t.Fatalf("first event = %s %T, want ERROR", ev.Type, ev.Object)
		}
		status, ok := ev.Object.(*metav1.Status)
		if !ok {
			t.Fatalf("ERROR event object = %T, want *metav1.Status", ev.Object)
		}
		t.Logf("watch from pre-restart RV %s: %s code=%d reason=%s message=%q",
			preRestartRV, ev.Type, status.Code, status.Reason, status.Message)
		if status.Code != http.StatusGone || status.Reason != metav1.StatusReasonExpired {
			t.Errorf("status = %d %s, want 410 Expired", status.Code, status.Reason)
		}
		if err := apierrors.FromObject(status); !apierrors.IsResourceExpired(err) {
			t.Errorf("FromObject = %v, want IsResourceExpired", err)
		}
	})

	t.Run("CompactEtcd", func(t *testing.T) {
		rev := s.CompactEtcd(t)
		_, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{
			ResourceVersion:      preRestartRV,
			ResourceVersionMatch: metav1.ResourceVersionMatchExact,
		})
		t.Logf("compacted etcd to %d; exact list at %s: %v", rev, preRestartRV, err)
		if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
			t.Errorf("exact list at compacted RV: err = %v, want 410", err)
		}
	})
}

// testBookmark watches an idle resource (configmaps) with bookmarks allowed
// and a short timeout. The watch cache sends a bookmark 2s before a watch's
// deadline (about every minute for watches without one), but only with an RV
// newer than the watch's start RV, and it learns of newer RVs of an idle
// resource only from etcd's progress notifications (every 5s here). On an
// idle cluster the etcd revision may not move at all, so a Secret write
// advances it; the configmaps watch cache sees that within 5s and the
// bookmark comes at the 10s mark.
func testBookmark(t *testing.T, cs kubernetes.Interface, rv string) {
	timeout := int64(12)
	start := time.Now()
	w, err := cs.CoreV1().ConfigMaps(ns).Watch(t.Context(), metav1.ListOptions{
		ResourceVersion:     rv,
		AllowWatchBookmarks: true,
		TimeoutSeconds:      &timeout,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "advance-etcd-revision"}}
	if _, err := cs.CoreV1().Secrets(ns).Create(t.Context(), secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The bookmark carries the watch cache's revision, which must be newer
	// than the watch's start: the write above moves etcd's, and a
	// consistent read brings the ConfigMap watch cache up to it (as
	// reflector.CatchUp does). Repeated until the bookmark comes: on a
	// loaded machine the first read may be served before the write reached
	// the cache's progress notification.
	readCtx, cancelReads := context.WithCancel(t.Context())
	readsDone := make(chan struct{})
	stopReads := func() { cancelReads(); <-readsDone }
	defer stopReads()
	go func() {
		defer close(readsDone)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			_, _ = cs.CoreV1().ConfigMaps(ns).List(readCtx, metav1.ListOptions{Limit: 1})
			select {
			case <-readCtx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	ev := nextEvent(t, w, 20*time.Second)
	if ev.Type != watch.Bookmark {
		t.Fatalf("first event = %s %T, want BOOKMARK", ev.Type, ev.Object)
	}
	m, err := apimeta.Accessor(ev.Object)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("bookmark after %v at RV %s (watch from RV %s)", time.Since(start).Round(time.Millisecond), m.GetResourceVersion(), rv)
}

// nextEvent returns w's next event or fails after d.
func nextEvent(t *testing.T, w watch.Interface, d time.Duration) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch closed without an event")
		}
		return ev
	case <-time.After(d):
		t.Fatalf("no watch event within %v", d)
	}
	panic("unreachable")
}
