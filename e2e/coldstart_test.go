package e2e

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"

	"github.com/boltinformer/boltinformer/internal/testing/apiservertest"
	"github.com/boltinformer/boltinformer/reflector"
)

// TestColdStartMatchesServer syncs ConfigMap and Pod informers, sharing one
// empty cache file, against thousands of objects. Each store must hold
// exactly the server's objects, and the namespace index must agree with
// them. The handlers must get exactly one OnAdd(obj, true) per object and
// nothing else.
func TestColdStartMatchesServer(t *testing.T) {
	const test = "cold"
	total := *flagObjects
	nConfigMaps := total * 3 / 5
	nPods := total - nConfigMaps

	srv := apiservertest.Start(t, apiservertest.Options{})
	admin := newClientset(t, srv.Config(), nil)
	namespaces := []string{"cold-0", "cold-1", "cold-2", "cold-3", "cold-4"}
	createNamespaces(t, admin, namespaces...)
	populateConfigMaps(t, admin, test, namespaces, nConfigMaps)
	populatePods(t, admin, test, namespaces, nPods)

	db := openDB(t, cachePath(t))
	cs := newClientset(t, srv.Config(), nil)
	selector := e2eLabel + "=" + test

	type side struct {
		resource string
		obs      *observer
		rec      *recorder
		reg      cache.ResourceEventHandlerRegistration
		server   func() state
	}
	sides := []*side{
		{resource: "configmaps", server: func() state { return serverConfigMaps(t, admin, "", selector) }},
		{resource: "pods", server: func() state { return serverPods(t, admin, "", selector) }},
	}
	for _, s := range sides {
		start := time.Now()
		s.obs, s.rec = &observer{}, &recorder{}
		inf := newInformer(t, informerSpec{cs: cs, db: db, collection: s.resource + "-" + selector,
			resource: s.resource, selector: selector, observer: s.obs})
		var err error
		if s.reg, err = inf.AddEventHandler(s.rec); err != nil {
			t.Fatal(err)
		}
		run(t, inf)
		waitSynced(t, inf, s.reg)
		t.Logf("%s: cold sync of %d objects in %v",
			s.resource, s.rec.len(), time.Since(start).Round(time.Millisecond))

		t.Run(s.resource, func(t *testing.T) {
			if got, want := s.obs.startCauses(), []reflector.StartCause{reflector.CauseCold}; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("reflector start causes = %v, want %v", got, want)
			}
			want := s.server()
			if len(want) != map[string]int{"configmaps": nConfigMaps, "pods": nPods}[s.resource] {
				t.Fatalf("server holds %d labelled %s, want what the test created", len(want), s.resource)
			}
			requireSameState(t, "informer store", want, storeState(t, inf.GetStore()))

			// The namespace index agrees with the objects.
			perNS := map[string]int{}
			for key := range want {
				ns, _ := splitKey(key)
				perNS[ns]++
			}
			for _, ns := range namespaces {
				objs, err := inf.GetIndexer().ByIndex(cache.NamespaceIndex, ns)
				if err != nil {
					t.Fatal(err)
				}
				if len(objs) != perNS[ns] {
					t.Errorf("ByIndex(namespace, %s) = %d objects, want %d", ns, len(objs), perNS[ns])
				}
			}

			// Exactly one OnAdd(obj, true) per object, and nothing else.
			adds := map[string]int{}
			for _, e := range s.rec.snapshot() {
				if e.kind != evAdd || !e.initial {
					t.Errorf("unexpected handler call %v", e)
					continue
				}
				if rv := want[e.key]; rv != e.rv {
					t.Errorf("initial add %v: server has rv %q", e, rv)
				}
				adds[e.key]++
			}
			for key := range want {
				if adds[key] != 1 {
					t.Errorf("%s: %d initial adds, want 1", key, adds[key])
				}
			}
		})
	}
}
