package e2e

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"github.com/boltinformer/boltinformer/factory"
	"github.com/boltinformer/boltinformer/internal/testing/apiservertest"
	"github.com/boltinformer/boltinformer/internal/testing/poll"
)

// TestFactorySeededBeforeStart: a controller test seeds a factory's lister
// before Start, on a cache file that holds a warm collection. The seeded
// objects read back as from client-go's factory; once started, our factory
// starts cold — one LIST, the stored collection not resumed — and ends with
// the server's objects and the same handler calls as client-go's factory
// started the same way against the same apiserver.
func TestFactorySeededBeforeStart(t *testing.T) {
	const test = "seed"
	// kube-apiserver v1.37 refuses a loopback advertise address with its
	// default endpoint reconciler; the test needs no kubernetes Service.
	srv := apiservertest.Start(t, apiservertest.Options{})
	admin := newClientset(t, srv.Config(), nil)
	createNamespaces(t, admin, test)
	populateConfigMaps(t, admin, test, []string{test}, 3)

	// A warm collection: one run of our factory, stopped.
	path := cachePath(t)
	db := openDB(t, path)
	f := factory.NewSharedInformerFactoryWithOptions(newClientset(t, srv.Config(), nil), 0, db, factory.WithNamespace(test))
	f.Core().V1().ConfigMaps().Informer()
	ctx, cancel := context.WithTimeout(context.Background(), factoryTestTimeout)
	f.Start(ctx.Done())
	if res := f.WaitForCacheSyncWithContext(ctx); res.Err != nil {
		t.Fatal(res.Err)
	}
	cancel()
	f.Shutdown()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().ConfigMaps(test).Create(t.Context(), configMap(test, "while-down", test, 9), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	db = openDB(t, path)
	counter := newAPICounter()
	cfg := protobuf(srv.Config())
	cfg.Wrap(counter.wrap)
	ours := factory.NewSharedInformerFactoryWithOptions(kubernetes.NewForConfigOrDie(cfg), 0, db, factory.WithNamespace(test))
	theirs := informers.NewSharedInformerFactoryWithOptions(newClientset(t, srv.Config(), nil), 0, informers.WithNamespace(test))
	recorders := map[string]*recorder{}
	for name, f := range map[string]informers.SharedInformerFactory{"ours": ours, "client-go's": theirs} {
		cms := f.Core().V1().ConfigMaps()
		for _, cm := range []*corev1.ConfigMap{
			{ObjectMeta: metav1.ObjectMeta{Namespace: test, Name: "seeded-only", ResourceVersion: "1"}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: test, Name: "cm-00000", ResourceVersion: "1"}},
		} {
			if err := cms.Informer().GetIndexer().Add(cm); err != nil {
				t.Fatalf("%s: seeding: %v", name, err)
			}
		}
		if got, err := cms.Lister().ConfigMaps(test).Get("seeded-only"); err != nil || got.ResourceVersion != "1" {
			t.Errorf("%s lister before Start: %v, %v; want the seeded ConfigMap", name, got, err)
		}
		recorders[name] = &recorder{}
		if _, err := cms.Informer().AddEventHandler(recorders[name]); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel = context.WithTimeout(context.Background(), factoryTestTimeout)
	defer theirs.Shutdown()
	defer ours.Shutdown()
	defer cancel()
	ours.Start(ctx.Done())
	theirs.Start(ctx.Done())
	if res := ours.WaitForCacheSyncWithContext(ctx); res.Err != nil {
		t.Fatal(res.Err)
	}
	for typ, ok := range theirs.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("client-go's %v did not sync", typ)
		}
	}
	server := serverConfigMaps(t, admin, test, "")
	for name, f := range map[string]informers.SharedInformerFactory{"ours": ours, "client-go's": theirs} {
		got, err := f.Core().V1().ConfigMaps().Lister().List(k8slabels.Everything())
		if err != nil {
			t.Fatal(err)
		}
		st := state{}
		for _, cm := range got {
			st[cm.Namespace+"/"+cm.Name] = cm.ResourceVersion
		}
		requireSameState(t, name+" lister after sync", server, st)
	}
	if n := counter.listsOf("configmaps"); n != 1 {
		t.Errorf("our factory made %d LISTs of configmaps, want 1: a store seeded before Start starts cold", n)
	}
	// delete seeded-only, update cm-00000, add cm-00001, cm-00002, while-down
	poll.Until(t, time.Minute, "every handler call", func() bool {
		return recorders["ours"].len() >= 5 && recorders["client-go's"].len() >= 5
	})
	strs := func(r *recorder) []string {
		var out []string
		for _, e := range r.snapshot() {
			out = append(out, e.String())
		}
		sort.Strings(out)
		return out
	}
	if got, want := strs(recorders["ours"]), strs(recorders["client-go's"]); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("handler calls:\n  %v\nclient-go's:\n  %v", got, want)
	}
}
