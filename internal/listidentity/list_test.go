package listidentity

import (
	"net/url"
	"reflect"
	"testing"

	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Every ListOptions field is either a filter or the reflector's: a new
// field client-go adds fails here until it is sorted into one or the other
// (a reflector field missed would name a new collection at every page).
func TestFilterOptionsKeepsOnlyFilters(t *testing.T) {
	timeout, initial := int64(30), true
	all := metav1.ListOptions{
		TypeMeta:             metav1.TypeMeta{Kind: "ListOptions", APIVersion: "meta.k8s.io/v1"},
		LabelSelector:        "app=web",
		FieldSelector:        "metadata.name!=x",
		ShardSelector:        "shard-1",
		Watch:                true,
		AllowWatchBookmarks:  true,
		ResourceVersion:      "7",
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		TimeoutSeconds:       &timeout,
		Limit:                500,
		Continue:             "abc",
		SendInitialEvents:    &initial,
	}
	want := metav1.ListOptions{LabelSelector: "app=web", FieldSelector: "metadata.name!=x", ShardSelector: "shard-1"}
	if got := FilterOptions(all); !reflect.DeepEqual(got, want) {
		t.Errorf("FilterOptions = %+v, want %+v", got, want)
	}
	// Every field is set above: a ListOptions field this test does not
	// know is zero in all.
	v := reflect.ValueOf(all)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Errorf("ListOptions.%s is not set by this test: sort it into the filters or reflectorParams", v.Type().Field(i).Name)
		}
	}
	q := query(all)
	if got, want := Filters(q), (url.Values{"labelSelector": {"app=web"}, "fieldSelector": {"metadata.name!=x"}, "shardSelector": {"shard-1"}}); !reflect.DeepEqual(got, want) {
		t.Errorf("Filters(%v) = %v, want %v", q, got, want)
	}
}

// The two spellings, including what the adapters' goldens do not reach: a
// filter other than the selectors in a request, and an apiserver URL with
// a path prefix. The expected names are those the code before this package
// derived (factory/collection.go, controllerruntime/identity.go).
func TestSpellings(t *testing.T) {
	deployments := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	parse := func(s string) *url.URL {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	for _, tc := range []struct {
		name                 string
		list                 List
		collection, identity string
		namespace            string
		description          map[string]string // checked if set
	}{{
		name:       "options",
		list:       FromOptions("typed", deployments, "Deployment", "prod", metav1.ListOptions{LabelSelector: "app=web", Limit: 500}),
		collection: "typed/apps/v1/deployments ns=prod labels=app=web",
		identity:   `{"source":"typed","group":"apps","version":"v1","resource":"deployments","kind":"Deployment","namespace":"prod","options":{"labelSelector":"app=web"}}`,
		namespace:  "prod",
	}, {
		name:       "options with a custom ListerWatcher",
		list:       FromOptions("typed", deployments, "Deployment", "", metav1.ListOptions{ShardSelector: "s"}).WithListerWatcher("lw{List=f}", ""),
		collection: "typed/apps/v1/deployments options=2421e0826526 listwatch=custom",
		identity:   `{"source":"typed","group":"apps","version":"v1","resource":"deployments","kind":"Deployment","options":{"shardSelector":"s"},"listerWatcher":{"code":"lw{List=f}","version":""}}`,
	}, {
		name:       "request with another filter",
		list:       FromRequest("typed", deployments.GroupVersion().WithKind("Deployment"), parse("https://h/apis/apps/v1/namespaces/prod/deployments?labelSelector=app%3Dweb&shardSelector=s&limit=500&resourceVersion=0"), ""),
		collection: "typed apps/v1 Deployment ns=prod labels=app=web @c8c9ad31",
		identity:   "typed apps/v1, Kind=Deployment GET /apis/apps/v1/namespaces/prod/deployments?labelSelector=app%3Dweb&shardSelector=s",
		namespace:  "prod",
		description: map[string]string{
			"source": "controller-runtime", "form": "typed", "group": "apps", "version": "v1", "kind": "Deployment",
			"path": "/apis/apps/v1/namespaces/prod/deployments", "namespace": "prod", "labelSelector": "app=web", "shardSelector": "s",
		},
	}, {
		name:       "request through a path prefix, with a transform version",
		list:       FromRequest("metadata", schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, parse("https://h/k8s/clusters/c-1/api/v1/configmaps"), "t1"),
		collection: "metadata v1 ConfigMap @316b2343 transform=t1",
		identity:   "metadata /v1, Kind=ConfigMap GET /k8s/clusters/c-1/api/v1/configmaps?",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.list.Collection(); got != tc.collection {
				t.Errorf("Collection() = %q, want %q", got, tc.collection)
			}
			if got := tc.list.String(); got != tc.identity {
				t.Errorf("String() = %q, want %q", got, tc.identity)
			}
			if got := tc.list.Namespace(); got != tc.namespace {
				t.Errorf("Namespace() = %q, want %q", got, tc.namespace)
			}
			if got := tc.list.Description(); tc.description != nil && !reflect.DeepEqual(got, tc.description) {
				t.Errorf("Description() = %v, want %v", got, tc.description)
			}
		})
	}
}

func TestWithListerWatcherOnRequestPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("WithListerWatcher on a List from FromRequest did not panic")
		}
	}()
	FromRequest("typed", schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, &url.URL{Path: "/api/v1/pods"}, "").WithListerWatcher("lw", "v1")
}
