package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/boltinformer/boltinformer/internal/testing/apiservertest"
	"github.com/boltinformer/boltinformer/internal/testing/poll"
)

// corruptStored overwrites key's record in the cache file at path (closed)
// with bytes no codec decodes, as a damaged page would leave it.
func corruptStored(t *testing.T, path, collection, key string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error {
		objs := tx.Bucket([]byte("collections")).Bucket([]byte(collection)).Bucket([]byte("objects"))
		if objs.Get([]byte(key)) == nil {
			return fmt.Errorf("no record %q", key)
		}
		return objs.Put([]byte(key), []byte("not a record"))
	}); err != nil {
		t.Fatal(err)
	}
}

// holdLists returns a clientset for cfg whose full LISTs of resource fail
// while held is set; watches and limit=1 probes pass.
func holdLists(t *testing.T, cfg *rest.Config, resource string, held *atomic.Bool) kubernetes.Interface {
	t.Helper()
	cfg = protobuf(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			q := req.URL.Query()
			isList := req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/"+resource) &&
				q.Get("watch") != "true" && q.Get("watch") != "1" && !(q.Get("limit") == "1" && q.Get("resourceVersion") == "")
			if isList && held.Load() {
				return nil, errors.New("list held back by the test")
			}
			return rt.RoundTrip(req)
		})
	})
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestReadErrorStopBeforeRelist: a warm start meets a stored record it
// cannot read back, hands out what it read, sets the rest aside and
// relists. A ConfigMap created meanwhile is applied from the watch after
// the set-aside, writing a valid resourceVersion back to the file, and the
// informer stops before its relist lands (the test holds LISTs back). The
// next start must list — the file says a list is owed — and be synced with
// the server's state; resuming from the stored resourceVersion would never
// bring back what was set aside.
func TestReadErrorStopBeforeRelist(t *testing.T) {
	const test = "readerror"
	// kube-apiserver v1.37 refuses a loopback advertise address with its
	// default endpoint reconciler; the test needs no kubernetes Service.
	srv := apiservertest.Start(t, apiservertest.Options{})
	admin := newClientset(t, srv.Config(), nil)
	createNamespaces(t, admin, test)
	populateConfigMaps(t, admin, test, []string{test}, 600) // more than one delivery chunk (256)

	path := cachePath(t)
	selector := e2eLabel + "=" + test
	spec := informerSpec{collection: "configmaps-" + selector, resource: "configmaps", selector: selector,
		cs: newClientset(t, srv.Config(), nil)}

	// First run: cold, then stop; then damage a record past the first chunk.
	db := openDB(t, path)
	spec.db = db
	inf := newInformer(t, spec)
	r := run(t, inf)
	waitSynced(t, inf)
	r.stop()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	corruptStored(t, path, spec.collection, test+"/cm-00400")

	// Second run: the read error, an event after the set-aside, a stop
	// before the relist.
	var held atomic.Bool
	held.Store(true)
	db = openDB(t, path)
	spec.db, spec.cs = db, holdLists(t, srv.Config(), "configmaps", &held)
	inf = newInformer(t, spec)
	var once sync.Once
	applied := make(chan string, 1)
	if err := inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, _ *cache.Reflector, err error) {
		if !strings.Contains(err.Error(), "set aside") {
			return
		}
		once.Do(func() {
			// Called before the informer stops its first watch.
			cm, cerr := admin.CoreV1().ConfigMaps(test).Create(ctx, configMap(test, "after-set-aside", test, 0), metav1.CreateOptions{})
			if cerr != nil {
				t.Errorf("creating a ConfigMap after the set-aside: %v", cerr)
				applied <- ""
				return
			}
			want := rvNumber(t, cm.ResourceVersion)
			if werr := poll.Wait(time.Minute, func() bool {
				rv := inf.Indexer().Collection().ResourceVersion()
				return rv != "" && rvNumber(t, rv) >= want
			}); werr != nil {
				t.Errorf("the ConfigMap created after the set-aside was not applied: %v", werr)
			}
			applied <- cm.ResourceVersion
		})
	}); err != nil {
		t.Fatal(err)
	}
	r = run(t, inf)
	var createdRV string
	select {
	case createdRV = <-applied:
	case <-time.After(2 * time.Minute):
		t.Fatal("the unreadable record was not reported")
	}
	r.stop()
	storedRV := inf.Indexer().Collection().ResourceVersion()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("stopped before the relist: stored resourceVersion %s (the ConfigMap created after the set-aside: %s)", storedRV, createdRV)

	// Third run: must list, and be synced with the server's state.
	db = openDB(t, path)
	counter := &requestCounter{resource: "configmaps"}
	spec.db, spec.cs = db, newClientset(t, srv.Config(), counter)
	inf = newInformer(t, spec)
	r = run(t, inf)
	waitSynced(t, inf)
	requireSameState(t, "store when synced", serverConfigMaps(t, admin, "", selector), storeState(t, inf.GetStore()))
	if n := counter.lists.Load(); n < 1 {
		t.Errorf("%d LIST requests: the start resumed from a file that owes a list", n)
	}
	if inf.Indexer().Collection().MustList() {
		t.Error("the collection still owes a list after one was applied")
	}
	r.stop()
}
