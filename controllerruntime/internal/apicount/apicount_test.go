package apicount

import (
	"net/http"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		url, accept string
		resource    string // "" for not a collection
		kind        string
	}{
		{"https://h/api/v1/pods?limit=500", "", "pods", List},
		{"https://h/api/v1/namespaces/a/pods?resourceVersion=5&resourceVersionMatch=NotOlderThan&limit=500", "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json", "pods", Metadata},
		{"https://h/apis/apps/v1/namespaces/a/deployments?fieldSelector=metadata.name%3Dweb", "", "deployments", Fetch},
		{"https://h/apis/apps/v1/deployments?limit=1", "", "deployments", Read},
		{"https://h/api/v1/pods?limit=1", "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1", "pods", Read},
		{"https://h/api/v1/pods?watch=true&resourceVersion=7", "", "pods", Watch},
		{"https://h/api/v1/pods?watch=1&sendInitialEvents=true", "", "pods", WatchList},
		{"https://h/api/v1/namespaces", "", "namespaces", List},
		{"https://h/k8s/clusters/c/apis/widgets.example.com/v1/widgets", "", "widgets", List},
		{"https://h/api/v1/namespaces/kube-system", "", "", ""},
		{"https://h/apis/apps/v1/namespaces/a/deployments/web", "", "", ""},
		{"https://h/version", "", "", ""},
	} {
		req, err := http.NewRequest(http.MethodGet, tc.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", tc.accept)
		k, ok := classify(req)
		if ok != (tc.resource != "") || k.resource != tc.resource || k.kind != tc.kind {
			t.Errorf("%s: %v %+v, want %q %q", tc.url, ok, k, tc.resource, tc.kind)
		}
	}
}
