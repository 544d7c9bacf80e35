// Copyright The Kubernetes Authors.
// Copyright The boltinformer Authors.
//
// Licensed under the Apache License, Version 2.0 (the "License");
// you may not use this file except in compliance with the License.
// You may obtain a copy of the License at
//
//     http://www.apache.org/licenses/LICENSE-2.0
//
// Unless required by applicable law or agreed to in writing, software
// distributed under the License is distributed on an "AS IS" BASIS,
// WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
// See the License for the specific language governing permissions and
// limitations under the License.
//
// Tests ported from k8s.io/client-go v0.37.2, modified:
//   - tools/cache/store_test.go
//   - tools/cache/index_test.go
//   - tools/cache/thread_safe_store_test.go
// The ports are listed in hack/upstream-versions.txt.

package cache_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/persist"
)

// The tests in this file re-express client-go's store_test.go, index_test.go
// and thread_safe_store_test.go with real API objects, and check each
// expectation in memory, after a commit, and after reopening the file.

func TestStoreAddUpdateDeleteListReplace(t *testing.T) {
	for _, kind := range []string{"Pod", "ConfigMap", "Unstructured"} {
		t.Run(kind, func(t *testing.T) {
			mk := func(name, val string) interface{} {
				switch kind {
				case "Pod":
					return pod("ns", name, "", map[string]string{"val": val})
				case "ConfigMap":
					return configMap("ns", name, "", map[string]string{"val": val})
				}
				return widget("ns", name, "", val)
			}
			val := func(obj interface{}) string {
				switch o := obj.(type) {
				case *corev1.Pod:
					return o.Labels["val"]
				case *corev1.ConfigMap:
					return o.Data["val"]
				case *unstructured.Unstructured:
					v, _, _ := unstructured.NestedString(o.Object, "spec", "color")
					return v
				}
				t.Fatalf("unexpected %T", obj)
				return ""
			}
			f := newTestFile(t)
			opts := bcache.IndexerOptions{}
			store := f.indexer(opts)

			if err := store.Add(mk("foo", "bar")); err != nil {
				t.Fatal(err)
			}
			atEachStage(t, f, opts, &store, func(t *testing.T, s stage) {
				item, ok, err := store.Get(mk("foo", ""))
				if err != nil || !ok {
					t.Fatalf("%s: didn't find inserted item: %v", s, err)
				}
				if got := val(item); got != "bar" {
					t.Errorf("%s: got %q, want bar", s, got)
				}
			})
			if err := store.Update(mk("foo", "baz")); err != nil {
				t.Fatal(err)
			}
			atEachStage(t, f, opts, &store, func(t *testing.T, s stage) {
				item, ok, _ := store.GetByKey("ns/foo")
				if !ok || val(item) != "baz" {
					t.Errorf("%s: update not visible: %v %v", s, ok, item)
				}
			})
			if err := store.Delete(mk("foo", "")); err != nil {
				t.Fatal(err)
			}
			atEachStage(t, f, opts, &store, func(t *testing.T, s stage) {
				if _, ok, _ := store.Get(mk("foo", "")); ok {
					t.Errorf("%s: found deleted item", s)
				}
			})

			for _, kv := range [][2]string{{"a", "b"}, {"c", "d"}, {"e", "e"}} {
				if err := store.Add(mk(kv[0], kv[1])); err != nil {
					t.Fatal(err)
				}
			}
			atEachStage(t, f, opts, &store, func(t *testing.T, s stage) {
				var found []string
				for _, item := range store.List() {
					found = append(found, val(item))
				}
				if !eq(found, []string{"b", "d", "e"}) {
					t.Errorf("%s: List = %v", s, found)
				}
				if keys := store.ListKeys(); !eq(keys, []string{"ns/a", "ns/c", "ns/e"}) {
					t.Errorf("%s: ListKeys = %v", s, keys)
				}
			})

			if err := store.Replace([]interface{}{mk("foo", "foo"), mk("bar", "bar")}, "0"); err != nil {
				t.Fatal(err)
			}
			atEachStage(t, f, opts, &store, func(t *testing.T, s stage) {
				var found []string
				for _, item := range store.List() {
					found = append(found, val(item))
				}
				if !eq(found, []string{"foo", "bar"}) {
					t.Errorf("%s: after Replace, List = %v", s, found)
				}
				if rv := store.LastStoreSyncResourceVersion(); rv != "0" {
					t.Errorf("%s: RV = %q, want 0", s, rv)
				}
			})
		})
	}
}

func TestStoreTransformer(t *testing.T) {
	f := newTestFile(t)
	called := 0
	opts := bcache.IndexerOptions{Transform: func(obj interface{}) (interface{}, error) {
		called++
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return nil, errors.New("wrong object type")
		}
		p = p.DeepCopy()
		p.ManagedFields = nil
		p.Annotations = map[string]string{"transformed": "yes"}
		return p, nil
	}}
	store := f.indexer(opts)
	p := pod("ns", "a", "1", nil)
	p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	if err := store.Add(p); err != nil {
		t.Fatal(err)
	}
	if err := store.Add(configMap("ns", "cm", "2", nil)); err == nil || !strings.Contains(err.Error(), "wrong object type") {
		t.Errorf("transform error not surfaced: %v", err)
	}
	atEachStage(t, f, opts, &store, func(t *testing.T, s stage) {
		item, ok, _ := store.GetByKey("ns/a")
		if !ok {
			t.Fatalf("%s: missing", s)
		}
		got := item.(*corev1.Pod)
		if got.Annotations["transformed"] != "yes" || got.ManagedFields != nil {
			t.Errorf("%s: stored object was not transformed: %+v", s, got.ObjectMeta)
		}
		if _, ok, _ := store.GetByKey("ns/cm"); ok {
			t.Errorf("%s: object whose transform failed was stored", s)
		}
	})
	if called == 0 {
		t.Error("transformer not called")
	}
}

func TestIndexByValue(t *testing.T) {
	f := newTestFile(t)
	opts := bcache.IndexerOptions{KeyFunc: cache.MetaNamespaceKeyFunc, Indexers: cache.Indexers{"by_val": byLabel("val")}}
	indexer := f.indexer(opts)
	for _, kv := range [][2]string{{"a", "b"}, {"c", "b"}, {"e", "f"}, {"g", "h"}} {
		if err := indexer.Add(pod("", kv[0], "", map[string]string{"val": kv[1]})); err != nil {
			t.Fatal(err)
		}
	}
	expected := map[string][]string{"b": {"a", "c"}, "f": {"e"}, "h": {"g"}, "missing": {}}
	atEachStage(t, f, opts, &indexer, func(t *testing.T, s stage) {
		for v, want := range expected {
			got, err := indexer.Index("by_val", pod("", "", "", map[string]string{"val": v}))
			if err != nil {
				t.Fatalf("%s: %v", s, err)
			}
			if !eq(names(got), want) {
				t.Errorf("%s: Index(%s) = %v, want %v", s, v, names(got), want)
			}
		}
		if _, err := indexer.Index("nope", pod("", "", "", nil)); err == nil {
			t.Errorf("%s: Index on unknown index did not fail", s)
		}
	})
}

func TestGetIndexFuncValues(t *testing.T) {
	f := newTestFile(t)
	opts := bcache.IndexerOptions{KeyFunc: cache.MetaNamespaceKeyFunc, Indexers: cache.Indexers{"testmodes": byLabel("foo")}}
	index := f.indexer(opts)
	for _, p := range []*corev1.Pod{
		pod("", "one", "", map[string]string{"foo": "bar"}),
		pod("", "two", "", map[string]string{"foo": "bar"}),
		pod("", "tre", "", map[string]string{"foo": "biz"}),
	} {
		if err := index.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	atEachStage(t, f, opts, &index, func(t *testing.T, s stage) {
		if got := index.ListIndexFuncValues("testmodes"); !eq(got, []string{"bar", "biz"}) {
			t.Errorf("%s: ListIndexFuncValues = %v", s, got)
		}
	})
}

func usersIndex(obj interface{}) ([]string, error) {
	return strings.Split(obj.(*corev1.Pod).Annotations["users"], ","), nil
}

func TestMultiIndexKeys(t *testing.T) {
	f := newTestFile(t)
	opts := bcache.IndexerOptions{KeyFunc: cache.MetaNamespaceKeyFunc, Indexers: cache.Indexers{"byUser": usersIndex}}
	index := f.indexer(opts)
	mk := func(name, users string) *corev1.Pod {
		p := pod("", name, "", nil)
		p.Annotations = map[string]string{"users": users}
		return p
	}
	pod1, pod2, pod3 := mk("one", "ernie,bert"), mk("two", "bert,oscar"), mk("tre", "ernie,elmo")
	for _, p := range []*corev1.Pod{pod1, pod2, pod3} {
		if err := index.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	byUser := func(t *testing.T, s stage, user string, want ...string) {
		t.Helper()
		got, err := index.ByIndex("byUser", user)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if !eq(names(got), want) {
			t.Errorf("%s: ByIndex(%s) = %v, want %v", s, user, names(got), want)
		}
		keys, err := index.IndexKeys("byUser", user)
		if err != nil || !eq(keys, want) {
			t.Errorf("%s: IndexKeys(%s) = %v, %v, want %v", s, user, keys, err, want)
		}
	}
	atEachStage(t, f, opts, &index, func(t *testing.T, s stage) {
		byUser(t, s, "ernie", "one", "tre")
		byUser(t, s, "bert", "one", "two")
		byUser(t, s, "elmo", "tre")
		byUser(t, s, "oscar", "two")
		byUser(t, s, "elmo1")
	})
	if err := index.Delete(pod3); err != nil {
		t.Fatal(err)
	}
	atEachStage(t, f, opts, &index, func(t *testing.T, s stage) {
		byUser(t, s, "ernie", "one")
		byUser(t, s, "elmo")
	})
	copyOfPod2 := pod2.DeepCopy()
	copyOfPod2.Annotations["users"] = "oscar"
	if err := index.Update(copyOfPod2); err != nil {
		t.Fatal(err)
	}
	atEachStage(t, f, opts, &index, func(t *testing.T, s stage) {
		byUser(t, s, "bert", "one")
		byUser(t, s, "oscar", "two")
	})
}

// client-go: TestThreadSafeStoreDeleteRemovesEmptySetsFromIndex and
// TestThreadSafeStoreAddKeepsNonEmptySetPostDeleteFromIndex.
func TestIndexValueDisappearsOnlyWithItsLastKey(t *testing.T) {
	f := newTestFile(t)
	opts := bcache.IndexerOptions{Indexers: cache.Indexers{"byApp": byLabel("app")}}
	store := f.indexer(opts)
	for _, name := range []string{"retain", "delete", "alone"} {
		app := "shared"
		if name == "alone" {
			app = "alone"
		}
		if err := store.Add(pod("ns", name, "", map[string]string{"app": app})); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.Delete(pod("ns", "delete", "", nil)); err != nil {
		t.Fatal(err)
	}
	if err := store.Delete(pod("ns", "alone", "", nil)); err != nil {
		t.Fatal(err)
	}
	atEachStage(t, f, opts, &store, func(t *testing.T, s stage) {
		if got := store.ListIndexFuncValues("byApp"); !eq(got, []string{"shared"}) {
			t.Errorf("%s: values = %v, want [shared]", s, got)
		}
		if keys, _ := store.IndexKeys("byApp", "shared"); !eq(keys, []string{"ns/retain"}) {
			t.Errorf("%s: keys = %v, want [ns/retain]", s, keys)
		}
	})
}

// client-go: TestThreadSafeStoreIndexingFunctionsWithMultipleValues.
func TestIndexingFunctionsWithMultipleValues(t *testing.T) {
	f := newTestFile(t)
	split := func(obj interface{}) ([]string, error) {
		return strings.Split(obj.(*corev1.ConfigMap).Data["v"], ","), nil
	}
	opts := bcache.IndexerOptions{Indexers: cache.Indexers{"split": split}}
	store := f.indexer(opts)
	set := func(key, v string) {
		t.Helper()
		if err := store.Update(configMap("ns", key, "", map[string]string{"v": v})); err != nil {
			t.Fatal(err)
		}
	}
	del := func(key string) {
		t.Helper()
		if err := store.Delete(configMap("ns", key, "", nil)); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(want map[string][]string) {
		t.Helper()
		atEachStage(t, f, opts, &store, func(t *testing.T, s stage) {
			t.Helper()
			for v, keys := range want {
				for n := range keys {
					keys[n] = "ns/" + strings.TrimPrefix(keys[n], "ns/")
				}
				got, err := store.IndexKeys("split", v)
				if err != nil || !eq(got, keys) {
					t.Errorf("%s: IndexKeys(%s) = %v %v, want %v", s, v, got, err, keys)
				}
			}
		})
	}
	set("key1", "foo")
	set("key2", "bar")
	expect(map[string][]string{"foo": {"key1"}, "bar": {"key2"}})
	set("key2", "foo,bar")
	expect(map[string][]string{"foo": {"key1", "key2"}, "bar": {"key2"}})
	set("key1", "foo,bar")
	expect(map[string][]string{"foo": {"key1", "key2"}, "bar": {"key1", "key2"}})
	set("key3", "foo,bar,baz")
	expect(map[string][]string{"foo": {"key1", "key2", "key3"}, "bar": {"key1", "key2", "key3"}, "baz": {"key3"}})
	set("key1", "foo")
	expect(map[string][]string{"foo": {"key1", "key2", "key3"}, "bar": {"key2", "key3"}, "baz": {"key3"}})
	set("key2", "bar")
	expect(map[string][]string{"foo": {"key1", "key3"}, "bar": {"key2", "key3"}, "baz": {"key3"}})
	del("key1")
	expect(map[string][]string{"foo": {"key3"}, "bar": {"key2", "key3"}, "baz": {"key3"}})
	del("key3")
	expect(map[string][]string{"foo": {}, "bar": {"key2"}, "baz": {}})
}

// client-go: TestThreadSafeStoreRV.
func TestResourceVersion(t *testing.T) {
	f := newTestFile(t)
	opts := bcache.IndexerOptions{}
	store := f.indexer(opts)
	expectRV := func(want string) {
		t.Helper()
		atEachStage(t, f, opts, &store, func(t *testing.T, s stage) {
			t.Helper()
			if rv := store.LastStoreSyncResourceVersion(); rv != want {
				t.Errorf("%s: RV = %q, want %q", s, rv, want)
			}
		})
	}
	expectRV("")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(store.Add(configMap("ns", "key1", "10", nil)))
	expectRV("10")
	must(store.Add(configMap("ns", "key3", "10", nil)))
	expectRV("10")
	must(store.Add(configMap("ns", "key4", "20", nil)))
	expectRV("20")
	must(store.Delete(configMap("ns", "key4", "30", nil)))
	expectRV("30")
	// A tombstone carries no object metadata: the RV stays.
	must(store.Delete(cache.DeletedFinalStateUnknown{Key: "ns/key3", Obj: configMap("ns", "key3", "10", nil)}))
	expectRV("30")
	if _, ok, _ := store.GetByKey("ns/key3"); ok {
		t.Error("tombstone delete did not delete")
	}
	// An object that cannot be stored changes nothing, RV included.
	if err := store.Add(&metav1.Status{Message: "not stored"}); err == nil {
		t.Error("adding an object without metadata succeeded")
	}
	expectRV("30")
	if err := store.Transaction(
		cache.Transaction{Type: cache.TransactionTypeUpdate, Object: configMap("ns", "key9", "40", nil)},
		cache.Transaction{Type: cache.TransactionTypeUpdate, Object: configMap("ns", "key10", "30", nil)},
		cache.Transaction{Type: cache.TransactionTypeUpdate, Object: configMap("ns", "key11", "50", nil)},
	); err != nil {
		t.Fatal(err)
	}
	expectRV("50")
	must(store.Replace([]interface{}{configMap("ns", "key2", "30", nil), configMap("ns", "key3", "40", nil)}, "60"))
	expectRV("60")
	store.Bookmark("70")
	expectRV("70")
	atEachStage(t, f, opts, &store, func(t *testing.T, s stage) {
		if keys := store.ListKeys(); !eq(keys, []string{"ns/key2", "ns/key3"}) {
			t.Errorf("%s: keys after Replace = %v", s, keys)
		}
	})
}

func TestTransactionReportsPerItemErrors(t *testing.T) {
	f := newTestFile(t)
	failing := errors.New("index says no")
	opts := bcache.IndexerOptions{Indexers: cache.Indexers{"picky": func(obj interface{}) ([]string, error) {
		if obj.(*corev1.ConfigMap).Data["bad"] == "yes" {
			return nil, failing
		}
		return []string{"ok"}, nil
	}}}
	store := f.indexer(opts)
	err := store.Transaction(
		cache.Transaction{Type: cache.TransactionTypeAdd, Object: configMap("ns", "a", "1", nil)},
		cache.Transaction{Type: cache.TransactionTypeAdd, Object: 42},
		cache.Transaction{Type: cache.TransactionTypeAdd, Object: configMap("ns", "b", "2", map[string]string{"bad": "yes"})},
		cache.Transaction{Type: cache.TransactionTypeAdd, Object: configMap("ns", "c", "3", nil)},
	)
	if err == nil {
		t.Fatal("expected a TransactionError")
	}
	if fmt.Sprint(err.SuccessfulIndices) != "[0 3]" || err.TotalTransactions != 4 || len(err.Errors) != 2 {
		t.Errorf("TransactionError = %+v", err)
	}
	if !errors.Is(err.Errors[1], failing) {
		t.Errorf("index error not wrapped: %v", err.Errors[1])
	}
	atEachStage(t, f, opts, &store, func(t *testing.T, s stage) {
		if keys := store.ListKeys(); !eq(keys, []string{"ns/a", "ns/c"}) {
			t.Errorf("%s: keys = %v", s, keys)
		}
	})
}

func TestIndexFunctionErrorLeavesNoPartialState(t *testing.T) {
	f := newTestFile(t)
	failing := errors.New("index function failed")
	picky := func(obj interface{}) ([]string, error) {
		if obj.(*corev1.Pod).Labels["fail"] == "yes" {
			return nil, failing
		}
		return []string{obj.(*corev1.Pod).Labels["app"]}, nil
	}
	opts := bcache.IndexerOptions{Indexers: cache.Indexers{"byApp": byLabel("app"), "picky": picky}}
	store := f.indexer(opts)
	if err := store.Add(pod("ns", "a", "1", map[string]string{"app": "x"})); err != nil {
		t.Fatal(err)
	}
	err := store.Update(pod("ns", "a", "2", map[string]string{"app": "y", "fail": "yes"}))
	if !errors.Is(err, failing) || !strings.Contains(err.Error(), `"ns/a"`) {
		t.Fatalf("Update error = %v; want the index error naming the key", err)
	}
	atEachStage(t, f, opts, &store, func(t *testing.T, s stage) {
		item, ok, _ := store.GetByKey("ns/a")
		if !ok || item.(*corev1.Pod).ResourceVersion != "1" {
			t.Errorf("%s: failed update changed the object: %v", s, item)
		}
		for _, idx := range []string{"byApp", "picky"} {
			if keys, _ := store.IndexKeys(idx, "x"); !eq(keys, []string{"ns/a"}) {
				t.Errorf("%s: %s[x] = %v", s, idx, keys)
			}
			if keys, _ := store.IndexKeys(idx, "y"); len(keys) != 0 {
				t.Errorf("%s: %s[y] = %v, want none", s, idx, keys)
			}
		}
		if rv := store.LastStoreSyncResourceVersion(); rv != "1" {
			t.Errorf("%s: RV = %q, want 1", s, rv)
		}
	})
}

// A Replace applies its list without the objects the index functions
// refuse, each refused as Update refuses it: a refused key keeps what the
// store held, stored or absent. The error names each refusal.
func TestReplaceLeavesOutOnlyTheObjectsItRefuses(t *testing.T) {
	f := newTestFile(t)
	failing := errors.New("index function failed")
	picky := func(obj interface{}) ([]string, error) {
		if obj.(*corev1.Pod).Labels["fail"] == "yes" {
			return nil, failing
		}
		return []string{obj.(*corev1.Pod).Labels["app"]}, nil
	}
	opts := bcache.IndexerOptions{Indexers: cache.Indexers{"byApp": byLabel("app"), "picky": picky}}
	store := f.indexer(opts)
	for _, p := range []*corev1.Pod{pod("ns", "a", "1", map[string]string{"app": "x"}), pod("ns", "b", "2", map[string]string{"app": "x"})} {
		if err := store.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	err := store.Replace([]interface{}{
		pod("ns", "a", "5", map[string]string{"app": "y", "fail": "yes"}), // a new version refused: a@1 stays
		pod("ns", "c", "4", map[string]string{"app": "y"}),
		pod("ns", "d", "3", map[string]string{"fail": "yes"}), // refused: stays absent
	}, "5") // b is gone
	if !errors.Is(err, failing) || !strings.Contains(err.Error(), `"ns/a"`) || !strings.Contains(err.Error(), `"ns/d"`) {
		t.Fatalf("Replace error = %v; want the index errors naming ns/a and ns/d", err)
	}
	atEachStage(t, f, opts, &store, func(t *testing.T, s stage) {
		var got []string
		for _, obj := range store.List() {
			got = append(got, obj.(*corev1.Pod).Name+"@"+obj.(*corev1.Pod).ResourceVersion)
		}
		if want := []string{"a@1", "c@4"}; !eq(sorted(got), want) {
			t.Errorf("%s: the store holds %v, want %v", s, sorted(got), want)
		}
		for _, idx := range []string{"byApp", "picky"} {
			if keys, _ := store.IndexKeys(idx, "x"); !eq(keys, []string{"ns/a"}) {
				t.Errorf("%s: %s[x] = %v, want [ns/a]", s, idx, keys)
			}
			if keys, _ := store.IndexKeys(idx, "y"); !eq(keys, []string{"ns/c"}) {
				t.Errorf("%s: %s[y] = %v, want [ns/c]", s, idx, keys)
			}
		}
		if rv := store.LastStoreSyncResourceVersion(); rv != "5" {
			t.Errorf("%s: RV = %q, want the list's 5", s, rv)
		}
	})
}

func TestUnencodableObjectIsRejected(t *testing.T) {
	f := newTestFile(t)
	store := f.indexer(bcache.IndexerOptions{})
	type notInScheme struct{ corev1.Pod }
	err := store.Add(&notInScheme{Pod: *pod("ns", "x", "1", nil)})
	if !errors.Is(err, persist.ErrUnencodable) {
		t.Fatalf("error = %v, want ErrUnencodable", err)
	}
	if !strings.Contains(err.Error(), "scheme") {
		t.Errorf("error does not say what to do: %v", err)
	}
	if keys := store.ListKeys(); len(keys) != 0 {
		t.Errorf("keys = %v", keys)
	}
}
