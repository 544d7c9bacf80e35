package persist

import (
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
)

// An Apply releases applyMu before it calls noteApplied. Close can take
// applyMu in that gap, commit and return. The Apply's noteApplied then
// runs on a closed DB. It must not leave a batch timer pending there.
// The test runs that tail of Apply by hand, after Close has returned.
func TestNoBatchTimerArmedAfterClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	synctest.Test(t, func(t *testing.T) {
		db, err := Open(path, Options{Scheme: scheme.Scheme, NoSync: true, BatchInterval: time.Second, BatchLimit: 1 << 30})
		if err != nil {
			t.Fatal(err)
		}
		c, err := db.Collection("cms", CollectionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		o := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: "uid-a", ResourceVersion: "1"}}
		if err := c.Apply([]Op{{Key: "ns/a", Object: o}}, "1"); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		db.noteApplied(1) // the preempted Apply's last step
		db.mu.Lock()
		pending := db.batchTimer != nil
		db.mu.Unlock()
		if pending {
			t.Errorf("a batch timer is pending on a closed DB; it fires batchDue into the closed DB %v later", db.opts.BatchInterval)
		}
	})
}
