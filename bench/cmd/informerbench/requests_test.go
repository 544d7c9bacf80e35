package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestPodRequestsCountsProbesApart: a catching-up warm start's consistent
// read (limit=1 at resourceVersion "") is not a full LIST, nor is a
// recovery's metadata list (its Accept header) or its fetches (a list in
// one namespace); every other GET without watch is, whatever its limit (a
// paginated list's pages), and watches are counted as watches.
func TestPodRequestsCountsProbesApart(t *testing.T) {
	c := &podRequests{}
	rt := c.wrap(roundTripFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("{}"))}, nil
	}))
	get := func(u, accept string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, "https://apiserver"+u, nil)
		if err != nil {
			t.Fatal(err)
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	for _, u := range []string{
		"/api/v1/pods?limit=1&resourceVersion=",      // probe
		"/api/v1/pods?limit=1",                       // probe: no resourceVersion is ""
		"/api/v1/pods?limit=500",                     // a page of a full list
		"/api/v1/pods?limit=1&resourceVersion=12345", // not consistent: a list at a version
		"/api/v1/pods?resourceVersion=0",             // a list from the watch cache
		"/api/v1/pods?watch=true&resourceVersion=12&timeoutSeconds=3",
		"/api/v1/pods?watch=1&sendInitialEvents=true",
		"/api/v1/namespaces/kube-system", // not Pods
	} {
		get(u, "")
	}
	// A recovery: two pages of metadata, as client-go's metadata client
	// asks for them, then a fetch of one object and of a namespace.
	get("/api/v1/pods?limit=500&resourceVersion=12&resourceVersionMatch=NotOlderThan", metadataListAcceptHeader)
	get("/api/v1/pods?limit=500&continue=abc", metadataListAcceptHeader)
	get("/api/v1/namespaces/bench-01/pods?fieldSelector=metadata.name%3Dp-1&resourceVersion=14&resourceVersionMatch=NotOlderThan", "")
	get("/api/v1/namespaces/bench-02/pods?resourceVersion=14&resourceVersionMatch=NotOlderThan", "")
	if got := [4]int64{c.lists.Load(), c.probes.Load(), c.watches.Load(), c.watchLists.Load()}; got != [4]int64{3, 2, 2, 1} {
		t.Errorf("lists, limit=1 reads, watches, watch-lists = %v, want [3 2 2 1]", got)
	}
	if got := [2]int64{c.metaLists.Load(), c.fetches.Load()}; got != [2]int64{2, 2} {
		t.Errorf("metadata lists, fetches = %v, want [2 2]", got)
	}
}

// metadataListAcceptHeader is the Accept header of client-go v0.37.2's
// metadata client's List (k8s.io/client-go/metadata, metadata.go).
const metadataListAcceptHeader = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"

// TestSyncedAfterWatch: the time from the first watch to synced is a
// per-run difference, negative for a start synced before its watch opened,
// and absent when no watch was recorded (client-go).
func TestSyncedAfterWatch(t *testing.T) {
	caughtUp := &childResult{InformerSyncedSeconds: 2.5, FirstWatchSeconds: 1.5, WatchesAtSync: 1, HandlerSyncedSeconds: []float64{3, 3}}
	atOpen := &childResult{InformerSyncedSeconds: 0.003, FirstWatchSeconds: 0.2, HandlerSyncedSeconds: []float64{3, 3}}
	clientGo := &childResult{InformerSyncedSeconds: 4, HandlerSyncedSeconds: []float64{4, 4}}
	if got := caughtUp.metrics()[mSyncedAfterWatch]; got != 1 {
		t.Errorf("caught up: synced after watch = %v, want 1", got)
	}
	if got := atOpen.metrics()[mSyncedAfterWatch]; got >= 0 {
		t.Errorf("synced at open: synced after watch = %v, want negative", got)
	}
	if _, ok := clientGo.metrics()[mSyncedAfterWatch]; ok {
		t.Error("client-go has a synced-after-watch figure; it records no watch")
	}

	o := newObserver()
	if first, n := o.watchesBy(time.Now()); !first.IsZero() || n != 0 {
		t.Errorf("no watch yet: first %v, %d watches", first, n)
	}
	t0 := time.Now()
	o.watches = []time.Time{t0, t0.Add(time.Second)} // as WatchStarted records them
	if first, n := o.watchesBy(t0.Add(time.Millisecond)); !first.Equal(t0) || n != 1 {
		t.Errorf("watchesBy(between the two) = %v, %d; want the first, 1", first, n)
	}
}
