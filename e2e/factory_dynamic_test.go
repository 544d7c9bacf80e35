package e2e

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	klabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/boltinformer/boltinformer/factory"
	"github.com/boltinformer/boltinformer/internal/testing/apiservertest"
	"github.com/boltinformer/boltinformer/internal/testing/poll"
)

var (
	crdGVR    = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	widgetGVR = schema.GroupVersionResource{Group: "e2e.boltinformer.io", Version: "v1", Resource: "widgets"}
)

// TestFactoryDynamicWarmRestart installs a CRD and runs the dynamic factory's
// informer for its custom objects, whose specs nest maps, lists, strings,
// booleans, nulls, integers (one beyond float64's exact range) and floats:
//
//  1. cold: the lister holds exactly what the server returns for each
//     object (reflect.DeepEqual of the whole Unstructured content);
//  2. warm, on the same file after objects were created, updated and
//     deleted while it was down: no LIST request; the handler gets
//     OnAdd(obj, true) for each stored object with content equal to the
//     server's at stop, then exactly the missed creates, updates (old
//     content = at stop, new = the server's) and deletes; the lister ends
//     equal to the server, content included.
func TestFactoryDynamicWarmRestart(t *testing.T) {
	srv := apiservertest.Start(t, apiservertest.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), factoryTestTimeout)
	defer cancel()
	admin := dynamicClient(t, srv.Config(), nil)
	installWidgetCRD(ctx, t, admin)
	createNamespaces(t, newClientset(t, srv.Config(), nil), "dyn-a", "dyn-b")
	widgets := func(ns string) dynamic.ResourceInterface { return admin.Resource(widgetGVR).Namespace(ns) }
	for i := range 20 {
		ns := []string{"dyn-a", "dyn-b"}[i%2]
		if _, err := widgets(ns).Create(ctx, widget(ns, fmt.Sprintf("w-%02d", i), i), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create widget: %v", err)
		}
	}
	path := cachePath(t)

	// 1. Cold.
	counter := newAPICounter()
	db := openDB(t, path)
	f := factory.NewDynamicSharedInformerFactory(dynamicClient(t, srv.Config(), counter), 0, db)
	generic := f.ForResource(widgetGVR)
	requirePersistent(t, "widget informer", generic.Informer())
	stop := startResourceFactory(ctx, t, f)
	atStop := requireWidgetListerMatchesServer(ctx, t, admin, generic.Lister())
	// The premise: the server hands back integers as int64 (2.0 included,
	// JSON does not tell them apart), one of them beyond float64's exact
	// range, and floats as float64.
	spec := atStop["dyn-b/w-03"].Object["spec"].(map[string]interface{})
	if spec["big"] != int64(1<<53+1) || spec["ratio"] != int64(2) || spec["weight"] != 3.25 {
		t.Fatalf("server returned spec big=%#v ratio=%#v weight=%#v; the test expects int64(%d), int64(2), 3.25",
			spec["big"], spec["ratio"], spec["weight"], int64(1<<53+1))
	}
	// A namespaced Get through the generic lister.
	got, err := generic.Lister().ByNamespace("dyn-b").Get("w-03")
	if err != nil || !reflect.DeepEqual(got.(*unstructured.Unstructured).Object, atStop["dyn-b/w-03"].Object) {
		t.Errorf("lister Get(dyn-b/w-03) = %v, %v; want the server's object", got, err)
	}
	stop()
	if n := counter.listsOf("widgets"); n != 1 {
		t.Errorf("cold start made %d widget LIST requests, want 1", n)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// While it is down: create, update, delete.
	created, updated, deleted := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for i := 20; i < 24; i++ {
		ns := []string{"dyn-a", "dyn-b"}[i%2]
		if _, err := widgets(ns).Create(ctx, widget(ns, fmt.Sprintf("w-%02d", i), i), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create widget: %v", err)
		}
		created[fmt.Sprintf("%s/w-%02d", ns, i)] = true
	}
	for i := range 4 {
		key := fmt.Sprintf("%s/w-%02d", []string{"dyn-a", "dyn-b"}[i%2], i)
		obj := atStop[key].DeepCopy()
		spec := obj.Object["spec"].(map[string]interface{})
		spec["ratio"] = 3.5
		spec["big"] = int64(-1 << 62)
		spec["nested"].(map[string]interface{})["list"] = []interface{}{int64(i), 0.1, "changed", map[string]interface{}{}}
		spec["added"] = map[string]interface{}{"at": "down", "n": 2.0}
		if _, err := widgets(obj.GetNamespace()).Update(ctx, obj, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("update %s: %v", key, err)
		}
		updated[key] = true
	}
	for i := 10; i < 14; i++ {
		key := fmt.Sprintf("%s/w-%02d", []string{"dyn-a", "dyn-b"}[i%2], i)
		ns, name := splitKey(key)
		if err := widgets(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete %s: %v", key, err)
		}
		deleted[key] = true
	}

	// 2. Warm, on the same file.
	counter = newAPICounter()
	db = openDB(t, path)
	f = factory.NewDynamicSharedInformerFactory(dynamicClient(t, srv.Config(), counter), 0, db)
	generic = f.ForResource(widgetGVR)
	requirePersistent(t, "warm widget informer", generic.Informer())
	rec := &contentRecorder{}
	if _, err := generic.Informer().AddEventHandler(rec); err != nil {
		t.Fatal(err)
	}
	stop = startResourceFactory(ctx, t, f)
	want := len(atStop) + len(created) + len(updated) + len(deleted)
	poll.Until(t, time.Minute, "handler receiving the missed changes", func() bool { return rec.len() >= want })
	final := requireWidgetListerMatchesServer(ctx, t, admin, generic.Lister())
	stop()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if n := counter.listsOf("widgets"); n != 0 {
		t.Errorf("warm restart made %d widget LIST requests, want none", n)
	}
	if counter.watchesOf("widgets") == 0 {
		t.Error("warm restart made no widget WATCH request")
	}

	events := rec.snapshot()
	if len(events) != want {
		t.Errorf("handler got %d calls, want %d (%d initial adds + %d changes)", len(events), want, len(atStop), want-len(atStop))
	}
	// Initial adds: the stored objects, with the server's content at stop,
	// each before its key's events (splitWarmStart checks that).
	adds, changes := splitWarmStart(t, events, func(e contentEvent) (eventKind, string, bool) { return e.kind, e.key, e.initial })
	initial := map[string]bool{}
	for _, e := range adds {
		if e.kind != evAdd || !e.initial || initial[e.key] {
			t.Errorf("before the missed changes: %s(%s initial=%t), want one initial add per stored object", e.kind, e.key, e.initial)
			continue
		}
		initial[e.key] = true
		requireSameContent(t, "initial add of "+e.key, atStop[e.key], e.obj)
	}
	if len(initial) != len(atStop) {
		t.Errorf("%d initial adds, want %d", len(initial), len(atStop))
	}
	// And exactly the missed changes.
	seen := map[string]int{}
	for _, e := range changes {
		seen[e.key]++
		switch {
		case e.kind == evAdd && created[e.key] && !e.initial:
			requireSameContent(t, "add of "+e.key, final[e.key], e.obj)
		case e.kind == evUpdate && updated[e.key]:
			requireSameContent(t, "old object of the update of "+e.key, atStop[e.key], e.old)
			requireSameContent(t, "new object of the update of "+e.key, final[e.key], e.obj)
		case e.kind == evDelete && deleted[e.key] && !e.tombstone:
			// A watch DELETE event carries the last state at the deletion's
			// resourceVersion (the server's doing).
			u, ok := e.obj.(*unstructured.Unstructured)
			if !ok {
				t.Errorf("delete of %s: %T, want *unstructured.Unstructured", e.key, e.obj)
				continue
			}
			u = u.DeepCopy()
			if rvNumber(t, u.GetResourceVersion()) <= rvNumber(t, atStop[e.key].GetResourceVersion()) {
				t.Errorf("delete of %s at rv %s, not after the stored rv %s", e.key, u.GetResourceVersion(), atStop[e.key].GetResourceVersion())
			}
			u.SetResourceVersion(atStop[e.key].GetResourceVersion())
			requireSameContent(t, "deleted object "+e.key, atStop[e.key], u)
		default:
			t.Errorf("unexpected %s(%s initial=%t tombstone=%t)", e.kind, e.key, e.initial, e.tombstone)
		}
	}
	for _, keys := range []map[string]bool{created, updated, deleted} {
		for key := range keys {
			if seen[key] != 1 {
				t.Errorf("%s: %d handler calls after the initial adds, want 1", key, seen[key])
			}
		}
	}
}

// installWidgetCRD creates the Widget CRD as unstructured and waits until it
// is Established and its resource is served.
func installWidgetCRD(ctx context.Context, t *testing.T, dc dynamic.Interface) {
	t.Helper()
	crd := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]interface{}{"name": widgetGVR.Resource + "." + widgetGVR.Group},
		"spec": map[string]interface{}{
			"group": widgetGVR.Group,
			"scope": "Namespaced",
			"names": map[string]interface{}{
				"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList",
			},
			"versions": []interface{}{map[string]interface{}{
				"name": widgetGVR.Version, "served": true, "storage": true,
				"schema": map[string]interface{}{"openAPIV3Schema": map[string]interface{}{
					"type": "object",
					"properties": map[string]interface{}{
						"spec": map[string]interface{}{"type": "object", "x-kubernetes-preserve-unknown-fields": true},
					},
				}},
			}},
		},
	}}
	if _, err := dc.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create CRD: %v", err)
	}
	start := time.Now()
	poll.Until(t, time.Minute, "CRD Established", func() bool {
		got, err := dc.Resource(crdGVR).Get(ctx, crd.GetName(), metav1.GetOptions{})
		if err != nil {
			return false
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			c, _ := c.(map[string]interface{})
			if c["type"] == "Established" && c["status"] == "True" {
				return true
			}
		}
		return false
	})
	poll.Until(t, time.Minute, "widgets served", func() bool {
		_, err := dc.Resource(widgetGVR).List(ctx, metav1.ListOptions{})
		return err == nil
	})
	t.Logf("CRD %s established and served in %v", crd.GetName(), time.Since(start).Round(time.Millisecond))
}

// widget returns a custom object whose spec holds every JSON kind of value.
func widget(ns, name string, i int) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": widgetGVR.GroupVersion().String(),
		"kind":       "Widget",
		"metadata": map[string]interface{}{
			"namespace":   ns,
			"name":        name,
			"labels":      map[string]interface{}{e2eLabel: "factory-dynamic"},
			"annotations": map[string]interface{}{"note": "ünïcödé ✓ " + strings.Repeat("x", i)},
		},
		"spec": map[string]interface{}{
			"replicas": int64(i),
			"ratio":    2.0, // JSON has no float type: the server answers int64 2
			"weight":   0.25 + float64(i),
			"tiny":     1e-9,
			"big":      int64(1<<53 + 1), // not exact as a float64
			"negative": int64(-7),
			"enabled":  i%2 == 0,
			"nothing":  nil,
			"nested": map[string]interface{}{
				"list":      []interface{}{int64(1), 2.5, "x", true, nil, map[string]interface{}{"deep": map[string]interface{}{"n": int64(-3), "f": 1.5}}},
				"empty":     map[string]interface{}{},
				"emptyList": []interface{}{},
			},
		},
	}}
}

// resourceFactory is what the dynamic and metadata factories (client-go's
// and boltinformer's) have in common.
type resourceFactory interface {
	Start(stopCh <-chan struct{})
	WaitForCacheSync(stopCh <-chan struct{}) map[schema.GroupVersionResource]bool
	Shutdown()
}

// startResourceFactory starts f, waits for its informers to sync and
// returns a function that stops them and waits for Shutdown; it also runs
// in t's cleanup.
func startResourceFactory(ctx context.Context, t *testing.T, f resourceFactory) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); f.Shutdown() }) }
	f.Start(ctx.Done())
	t.Cleanup(stop)
	for gvr, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("%v did not sync", gvr)
		}
	}
	return stop
}

// requireWidgetListerMatchesServer waits until the lister holds exactly the
// server's widgets, each with the content a plain dynamic Get returns, and
// returns those objects by key.
func requireWidgetListerMatchesServer(ctx context.Context, t *testing.T, dc dynamic.Interface, lister cache.GenericLister) map[string]*unstructured.Unstructured {
	t.Helper()
	var diffs []string
	for {
		list, err := dc.Resource(widgetGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		server := map[string]*unstructured.Unstructured{}
		for i := range list.Items {
			obj, err := dc.Resource(widgetGVR).Namespace(list.Items[i].GetNamespace()).Get(ctx, list.Items[i].GetName(), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			server[obj.GetNamespace()+"/"+obj.GetName()] = obj
		}
		objs, err := lister.List(klabels.Everything())
		if err != nil {
			t.Fatal(err)
		}
		diffs = nil
		got := map[string]bool{}
		for _, o := range objs {
			u := o.(*unstructured.Unstructured)
			key := u.GetNamespace() + "/" + u.GetName()
			got[key] = true
			if want, ok := server[key]; !ok {
				diffs = append(diffs, "unexpected "+key)
			} else if !reflect.DeepEqual(u.Object, want.Object) {
				diffs = append(diffs, fmt.Sprintf("%s: content differs:\n%s", key, contentDiff(want.Object, u.Object)))
			}
		}
		for key := range server {
			if !got[key] {
				diffs = append(diffs, "missing "+key)
			}
		}
		if len(diffs) == 0 {
			return server
		}
		select {
		case <-ctx.Done():
			sort.Strings(diffs)
			t.Fatalf("lister differs from the server:\n  %s", strings.Join(diffs, "\n  "))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// requireSameContent fails unless got's content equals want's exactly.
func requireSameContent(t *testing.T, what string, want *unstructured.Unstructured, got runtime.Object) {
	t.Helper()
	u, ok := got.(*unstructured.Unstructured)
	switch {
	case want == nil:
		t.Errorf("%s: no object to compare with", what)
	case !ok:
		t.Errorf("%s: %T, want *unstructured.Unstructured", what, got)
	case !reflect.DeepEqual(u.Object, want.Object):
		t.Errorf("%s: content differs from the server's:\n%s", what, contentDiff(want.Object, u.Object))
	}
}

// contentDiff lists the paths where two unstructured contents differ, with
// values and Go types.
func contentDiff(want, got interface{}) string {
	var out []string
	var walk func(path string, w, g interface{})
	walk = func(path string, w, g interface{}) {
		wm, wok := w.(map[string]interface{})
		gm, gok := g.(map[string]interface{})
		if wok && gok {
			for k := range wm {
				walk(path+"."+k, wm[k], gm[k])
			}
			for k := range gm {
				if _, ok := wm[k]; !ok {
					walk(path+"."+k, nil, gm[k])
				}
			}
			return
		}
		ws, wok := w.([]interface{})
		gs, gok := g.([]interface{})
		if wok && gok && len(ws) == len(gs) {
			for i := range ws {
				walk(fmt.Sprintf("%s[%d]", path, i), ws[i], gs[i])
			}
			return
		}
		if !reflect.DeepEqual(w, g) {
			out = append(out, fmt.Sprintf("    %s: server %#v (%T), got %#v (%T)", path, w, w, g, g))
		}
	}
	walk("", want, got)
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// contentEvent is one handler call with the objects it carried.
type contentEvent struct {
	kind      eventKind
	key       string
	initial   bool
	tombstone bool
	obj, old  runtime.Object // deep copies; obj is the tombstone's object for DeletedFinalStateUnknown
}

// contentRecorder is a cache.ResourceEventHandler that records every call
// with deep copies of its objects.
type contentRecorder struct {
	mu     sync.Mutex
	events []contentEvent
}

func (r *contentRecorder) record(e contentEvent) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func copyObject(obj interface{}) runtime.Object {
	if o, ok := obj.(runtime.Object); ok {
		return o.DeepCopyObject()
	}
	return nil
}

func (r *contentRecorder) OnAdd(obj interface{}, isInInitialList bool) {
	key, _ := objectKeyRV(obj)
	r.record(contentEvent{kind: evAdd, key: key, initial: isInInitialList, obj: copyObject(obj)})
}

func (r *contentRecorder) OnUpdate(oldObj, newObj interface{}) {
	key, _ := objectKeyRV(newObj)
	r.record(contentEvent{kind: evUpdate, key: key, obj: copyObject(newObj), old: copyObject(oldObj)})
}

func (r *contentRecorder) OnDelete(obj interface{}) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		r.record(contentEvent{kind: evDelete, key: d.Key, tombstone: true, obj: copyObject(d.Obj)})
		return
	}
	key, _ := objectKeyRV(obj)
	r.record(contentEvent{kind: evDelete, key: key, obj: copyObject(obj)})
}

func (r *contentRecorder) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

func (r *contentRecorder) snapshot() []contentEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]contentEvent(nil), r.events...)
}
