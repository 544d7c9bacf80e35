package controllerruntime

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
)

// A fetch narrows the informer's own list request: the object's name is
// added to the informer's field selector, an informer of all namespaces
// gets the namespace in its path, and anything else the informer asked is
// kept. A request that is not the informer's list is refused, not sent
// wider than asked.
func TestFetchNarrowsTheInformersList(t *testing.T) {
	parse := func(s string) *url.URL {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	for _, tc := range []struct {
		what, list, namespace, name, want string
	}{
		{"one object, informer of a namespace, with selectors", "https://h/api/v1/namespaces/a/configmaps?labelSelector=app%3Dx&fieldSelector=type%21%3Dz&limit=500",
			"a", "cm-1", "https://h/api/v1/namespaces/a/configmaps?fieldSelector=type%21%3Dz%2Cmetadata.name%3Dcm-1&labelSelector=app%3Dx&limit=500"},
		{"one object, informer of all namespaces", "https://h/apis/apps/v1/deployments?resourceVersion=7&resourceVersionMatch=NotOlderThan",
			"b", "web", "https://h/apis/apps/v1/namespaces/b/deployments?fieldSelector=metadata.name%3Dweb&resourceVersion=7&resourceVersionMatch=NotOlderThan"},
		{"a namespace of an informer of all namespaces, behind a path prefix", "https://h/k8s/clusters/c1/api/v1/pods?labelSelector=app%3Dx&limit=500&continue=tok",
			"b", "", "https://h/k8s/clusters/c1/api/v1/namespaces/b/pods?labelSelector=app%3Dx&limit=500&continue=tok"},
		{"a cluster-scoped object", "https://h/api/v1/nodes?labelSelector=role%3Dw",
			"", "n1", "https://h/api/v1/nodes?fieldSelector=metadata.name%3Dn1&labelSelector=role%3Dw"},
		{"a name a selector must escape (RBAC names may hold , and =)", "https://h/apis/rbac.authorization.k8s.io/v1/namespaces/a/roles",
			"a", "read,write=x", `https://h/apis/rbac.authorization.k8s.io/v1/namespaces/a/roles?fieldSelector=metadata.name%3Dread%5C%2Cwrite%5C%3Dx`},
	} {
		u := parse(tc.list)
		target, err := parseListPath(u.Path)
		if err != nil {
			t.Fatalf("%s: %v", tc.what, err)
		}
		got, err := fetch{list: target, namespace: tc.namespace, name: tc.name}.narrow(u)
		if err != nil {
			t.Errorf("%s: %v", tc.what, err)
			continue
		}
		want := parse(tc.want)
		if got.Path != want.Path || got.Query().Encode() != want.Query().Encode() || got.Host != want.Host {
			t.Errorf("%s:\n got  %s\n want %s", tc.what, got, want)
		}
	}
	target, err := parseListPath("/api/v1/namespaces/a/configmaps")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (fetch{list: target, name: "x"}).narrow(parse("https://h/api/v1/namespaces/a/secrets")); err == nil {
		t.Error("a fetch of another path than the informer's list was narrowed and sent")
	}
}

// Typed and unstructured informers of built-in groups recover, and so do
// those of the groups named in Options.RecoverGroups. Each gets a metadata
// list of exactly its list. Custom resources that were not named do not
// recover. Nor does an informer whose list carries a parameter the
// metadata list cannot repeat. Typed informers of built-in types can also list in full
// undecoded (recovery.Lister.ListObjectsWire). Metadata-only informers recover from
// their own list, any group's, comparing the resourceVersions of a group
// not vouched for only for equality.
func TestWhichInformersRecover(t *testing.T) {
	var sent []string
	hc := &http.Client{Transport: probeTransport{base: fetchTransport{base: roundTripper(func(req *http.Request) (*http.Response, error) {
		sent = append(sent, req.URL.String())
		return nil, http.ErrNotSupported
	})}}}
	r, err := newRecoveries(&rest.Config{Host: "https://h", QPS: -1}, hc, []string{"widgets.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	// lw stands in for the informer's ListerWatcher: its list request is u.
	lw := func(u string) toolscache.ListerWatcher {
		return &toolscache.ListWatch{ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
			if err != nil {
				return nil, err
			}
			_, err = hc.Do(req)
			return nil, err
		}}
	}
	key := func(f form, group, kind string) objectKey {
		return objectKey{form: f, gvk: schema.GroupVersionKind{Group: group, Version: "v1", Kind: kind}}
	}
	for _, tc := range []struct {
		what    string
		key     objectKey
		list    string
		recover bool
		wire    bool
		err     string
		// own: recovers from its own list (ListInFull); opaque: with
		// OpaqueVersions.
		own, opaque bool
	}{
		{"typed ConfigMaps", key(formTyped, "", "ConfigMap"), "https://h/api/v1/namespaces/a/configmaps?labelSelector=app%3Dx", true, true, "", false, false},
		{"unstructured Deployments", key(formUnstructured, "apps", "Deployment"), "https://h/apis/apps/v1/deployments?fieldSelector=metadata.namespace%21%3Dkube-system", true, false, "", false, false},
		{"a named custom resource group", key(formTyped, "widgets.example.com", "Widget"), "https://h/apis/widgets.example.com/v1/widgets", true, false, "", false, false},
		{"metadata-only", key(formMetadata, "", "ConfigMap"), "https://h/api/v1/configmaps", true, false, "", true, false},
		{"metadata-only, a group not named", key(formMetadata, "metrics.k8s.io", "PodMetrics"), "https://h/apis/metrics.k8s.io/v1/pods", true, false, "", true, true},
		{"a group not named (custom or aggregated)", key(formTyped, "metrics.k8s.io", "PodMetrics"), "https://h/apis/metrics.k8s.io/v1/pods", false, false, "", false, false},
		{"an unrepeatable parameter", key(formTyped, "", "Pod"), "https://h/api/v1/pods?shardSelector=1", false, false, "shardSelector", false, false},
	} {
		u, err := url.Parse(tc.list)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := r.recovery(lw(tc.list), tc.key, u)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want one naming %s", tc.what, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.what, err)
		case (rec != nil) != tc.recover:
			t.Errorf("%s: recovery %v, want %v", tc.what, rec != nil, tc.recover)
		case rec != nil:
			if wire := rec.Lister.ListObjectsWire != nil; wire != tc.wire {
				t.Errorf("%s: lists in full undecoded %v, want %v", tc.what, wire, tc.wire)
			}
			if rec.ListInFull != tc.own || rec.OpaqueVersions != tc.opaque {
				t.Errorf("%s: ListInFull %v, OpaqueVersions %v, want %v, %v", tc.what, rec.ListInFull, rec.OpaqueVersions, tc.own, tc.opaque)
			}
		}
	}
	if len(sent) != 0 {
		t.Errorf("setting up recoveries sent requests: %v", sent)
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
