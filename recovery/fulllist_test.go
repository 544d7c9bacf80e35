package recovery

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/boltinformer/boltinformer/internal/testing/poll"
	"github.com/boltinformer/boltinformer/internal/testing/reflectortest"

	"github.com/boltinformer/boltinformer/reflector"
)

// wireLister is a fakeLister with ListObjectsWire: wire answers
// ListObjectsWire with a response body, and decode decodes such a body as
// a typed client does.
type wireLister struct {
	*fakeLister
	wire func(n int, namespace string, opts metav1.ListOptions) ([]byte, error)

	mu       sync.Mutex
	wireOpts []string // "namespace opts" of each call
}

func (l *wireLister) ListObjectsWire(_ context.Context, namespace string, opts metav1.ListOptions) (io.ReadCloser, func([]byte) (runtime.Object, error), error) {
	if err := checkRecoveryList(opts); err != nil {
		return nil, nil, err
	}
	l.mu.Lock()
	n := len(l.wireOpts)
	l.wireOpts = append(l.wireOpts, fmt.Sprintf("%q rv=%q match=%q limit=%d continue=%q", namespace, opts.ResourceVersion, opts.ResourceVersionMatch, opts.Limit, opts.Continue))
	l.mu.Unlock()
	body, err := l.wire(n, namespace, opts)
	if err != nil {
		return nil, nil, err
	}
	return wireBody(body), decodeBody, nil
}

// wireBody is a response body of a list as it arrives: a few bytes at a
// time.
func wireBody(body []byte) io.ReadCloser {
	return io.NopCloser(iotest.HalfReader(bytes.NewReader(body)))
}

// lister is the Lister of wireLister's methods.
func (l *wireLister) lister() *Lister {
	lr := l.fakeLister.lister()
	lr.ListObjectsWire = l.ListObjectsWire
	return lr
}

func (l *wireLister) WireOpts() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.wireOpts)
}

// decodeBody decodes a protobuf or JSON body as a typed client does.
func decodeBody(body []byte) (runtime.Object, error) {
	if isProtobuf(body) {
		return decodeProtobuf(body)
	}
	info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	return runtime.Decode(scheme.Codecs.WithoutConversion().DecoderToVersion(info.Serializer, v1.SchemeGroupVersion), body)
}

// protoItem is a Pod's message as an item of a list; spoiled makes its
// spec undecodable (its scan still succeeds): decoding it fails.
func protoItem(t *testing.T, p *v1.Pod, spoiled bool) pbuf {
	b, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if spoiled {
		// A second spec (merged into the first), whose containers field
		// holds a truncated varint.
		b = pbuf(b).msg(2, pbuf{0x12, 0x03, 0xff, 0xff, 0xff})
	}
	return b
}

// protoPage is a list response in protobuf.
func protoPage(rv, cont string, items ...pbuf) []byte {
	list := pbuf{}.msg(1, pbuf{}.str(2, rv).str(3, cont))
	for _, it := range items {
		list = list.msg(2, it)
	}
	return envelope(list)
}

// jsonPage is a list response in JSON.
func jsonPage(t *testing.T, rv, cont string, pods ...*v1.Pod) []byte {
	l := reflectortest.PodList(rv, pods...)
	l.Continue = cont
	info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	b, err := runtime.Encode(scheme.Codecs.EncoderForVersion(info.Serializer, v1.SchemeGroupVersion), l)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func notAcceptable(int, metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	return nil, apierrors.NewGenericServerResponse(406, "GET", schema.GroupResource{Resource: "pods"}, "", "", 0, false)
}

// Where the server cannot list metadata (406), the recovery lists the
// collection in full, in pages. That list is both its metadata list and its
// fetches. The diff classes are a metadata list's. Only the new and changed
// objects are decoded. The unchanged one's spec is spoiled, so decoding it
// would fail. The decoded objects are applied in key order before the watch
// opens. The recovery ends at the list's resourceVersion without fetching
// anything. The same holds in JSON, decoded whole.
func TestRecoveryFromAFullList(t *testing.T) {
	stored := []*v1.Pod{
		upod("ns", "a", "ua", "1"),  // unchanged
		upod("ns", "b", "ub", "2"),  // changed
		upod("ns", "c", "uc", "3"),  // gone
		upod("ns", "d", "ud1", "4"), // deleted and recreated: another UID
	}
	a, b, d, e := upod("ns", "a", "ua", "1"), richPod("ns", "b", "ub", "5"), upod("ns", "d", "ud2", "6"), upod("ns", "e", "ue", "7")
	for _, format := range []string{"protobuf", "json"} {
		t.Run(format, func(t *testing.T) {
			page := func(n int) []byte {
				if format == "json" {
					if n == 0 {
						return jsonPage(t, "10", "next", a, b)
					}
					return jsonPage(t, "10", "", d, e)
				}
				if n == 0 {
					return protoPage("10", "next", protoItem(t, a, true), protoItem(t, b, false))
				}
				return protoPage("10", "", protoItem(t, d, false), protoItem(t, e, false))
			}
			store := newFakeStore(stored...)
			watchOpened := make(chan struct{})
			lister := &wireLister{
				fakeLister: &fakeLister{meta: notAcceptable, objects: func(context.Context, string, string, metav1.ListOptions) (runtime.Object, error) {
					return nil, fmt.Errorf("a fetch")
				}},
				wire: func(n int, _ string, _ metav1.ListOptions) ([]byte, error) {
					select {
					case <-watchOpened:
						t.Errorf("list %d after the watch opened", n)
					default:
					}
					return page(n), nil
				},
			}
			h := startRecovery(t, store, nil, "4", func(o *testOptions, lw *reflectortest.ScriptedLW) {
				o.Recovery.Lister = lister
				o.PageSize = 500 // paged, as client-go's list with this PageSize
				lw.SignalWatch(watchOpened)
			})
			store.waitFor(t, "end@10")
			h.stop()

			reflectortest.Equal(t, "full list requests", lister.WireOpts(), []string{
				`"" rv="4" match="NotOlderThan" limit=500 continue=""`,
				`"" rv="" match="" limit=500 continue="next"`,
			})
			reflectortest.Equal(t, "fetches", lister.Fetches(), []string(nil))
			reflectortest.Equal(t, "metadata lists", len(lister.MetaOpts()), 1)
			reflectortest.Equal(t, "store calls", store.Calls(), []string{
				"begin deleted=[ns/c ns/d] unchanged=[ns/a]",
				"delete tombstone:ns/c@3", "delete tombstone:ns/d@4",
				"update ns/b@5", "add ns/d@6", "add ns/e@7",
				"end@10",
			})
			store.mu.Lock()
			gotB := store.objs["ns/b"]
			store.mu.Unlock()
			if gotB == nil || gotB.Spec.NodeName != "node-1" || len(gotB.Spec.Containers) != 1 {
				t.Errorf("ns/b is not the listed object: %+v", gotB)
			}
			if n := len(h.lw.ListOpts()); n != 0 {
				t.Errorf("%d lists through the ListerWatcher, want none", n)
			}
			reflectortest.Equal(t, "starts", h.obs.Starts(), []string{"listed relist-error 10 items=4 pages=2"})
			stats := h.obs.Stats()
			if len(stats) != 1 {
				t.Fatalf("recovered %d times, want once", len(stats))
			}
			s := stats[0]
			s.Duration, s.ListDuration = 0, 0
			// Decoded: the three to fetch, or all four of a list decoded whole.
			decoded := map[string]int{"protobuf": 3, "json": 4}[format]
			reflectortest.Equal(t, "stats", s, Stats{Listed: 4, Pages: 2, Unchanged: 1, Deleted: 2, Fetch: 3, Fetched: 3, Decoded: decoded, FullList: true})
			h.errs.CheckNone(t)
		})
	}
}

// resourceVersions that are not integers cannot be compared: the recovery
// lists in full and tells them equal or not. Unchanged objects are left
// alone, and changed ones applied whatever their order.
func TestRecoveryFromAFullListOfOpaqueVersions(t *testing.T) {
	store := newFakeStore(upod("ns", "a", "ua", "xa"), upod("ns", "b", "ub", "xb"), upod("ns", "c", "uc", "xc"))
	listed := []*v1.Pod{upod("ns", "a", "ua", "xa"), upod("ns", "b", "ub", "wb"), upod("ns", "new", "un", "")}
	lister := &wireLister{
		fakeLister: &fakeLister{meta: func(int, metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
			return metaList("opaque", listed...), nil
		}},
		wire: func(int, string, metav1.ListOptions) ([]byte, error) {
			return protoPage("opaque", "", protoItem(t, listed[0], true), protoItem(t, listed[1], false), protoItem(t, listed[2], false)), nil
		},
	}
	h := startRecovery(t, store, nil, "xc", func(o *testOptions, _ *reflectortest.ScriptedLW) { o.Recovery.Lister = lister })
	store.waitFor(t, "end@opaque")
	h.stop()
	reflectortest.Equal(t, "store calls", store.Calls(), []string{
		"begin deleted=[ns/c] unchanged=[ns/a]", "delete tombstone:ns/c@xc",
		"update ns/b@wb", "update ns/new@",
		"end@opaque",
	})
	// Without a PageSize, as client-go's relist: in one request, which the
	// watch cache serves.
	reflectortest.Equal(t, "full list requests", lister.WireOpts(), []string{`"" rv="xc" match="NotOlderThan" limit=0 continue=""`})
	reflectortest.Equal(t, "watches", h.lw.WatchRVs()[:1], []string{"opaque"})
}

// An expired continue token lists again in one request (as the pager does),
// and that list replaces the pages read so far. A stored object newer
// than the list is kept, and the recovery ends once the watch passed it.
func TestRecoveryFromAFullListExpiredContinue(t *testing.T) {
	store := newFakeStore(upod("ns", "a", "ua", "1"), upod("ns", "b", "ub", "20"))
	lister := &wireLister{
		fakeLister: &fakeLister{meta: notAcceptable},
		wire: func(n int, _ string, opts metav1.ListOptions) ([]byte, error) {
			switch n {
			case 0:
				return protoPage("10", "next", protoItem(t, upod("ns", "gone-later", "ug", "9"), false)), nil
			case 1:
				return nil, apierrors.NewResourceExpired("continue token expired")
			}
			return protoPage("12", "", protoItem(t, upod("ns", "a", "ua", "11"), false), protoItem(t, upod("ns", "b", "ub", "5"), true)), nil
		},
	}
	h := startRecovery(t, store, nil, "1", func(o *testOptions, _ *reflectortest.ScriptedLW) {
		o.Recovery.Lister = lister
		o.PageSize = 500
	})
	store.waitFor(t, "update ns/a@11")
	w := h.lw.Watcher(t, 0)
	w.Modify(upod("ns", "b", "ub", "15")) // older than the stored one: dropped
	w.Action(watch.Bookmark, upod("", "", "", "20"))
	store.waitFor(t, "end@20")
	h.stop()
	reflectortest.Equal(t, "full list requests", lister.WireOpts(), []string{
		`"" rv="1" match="NotOlderThan" limit=500 continue=""`,
		`"" rv="" match="" limit=500 continue="next"`,
		`"" rv="1" match="NotOlderThan" limit=0 continue=""`,
	})
	reflectortest.Equal(t, "store calls", store.Calls(), []string{"begin deleted=[] unchanged=[]", "update ns/a@11", "bookmark@20", "end@20"})
	if s := h.obs.Stats(); len(s) != 1 || s[0].Ahead != 1 || s[0].Pages != 1 || s[0].Listed != 2 {
		t.Errorf("stats %+v, want one page of 2, 1 ahead", s)
	}
}

// A changed object the list holds but cannot decode fails the recovery;
// the next one, after backoff, starts over (the store owes a list).
func TestRecoveryFromAFullListUndecodable(t *testing.T) {
	store := newFakeStore(upod("ns", "a", "ua", "1"))
	var mu sync.Mutex
	spoiled := true
	lister := &wireLister{
		fakeLister: &fakeLister{meta: notAcceptable},
		wire: func(n int, _ string, _ metav1.ListOptions) ([]byte, error) {
			mu.Lock()
			defer mu.Unlock()
			return protoPage(fmt.Sprint(10+n), "", protoItem(t, upod("ns", "a", "ua", "2"), spoiled)), nil
		},
	}
	h := startRecovery(t, store, nil, "1", func(o *testOptions, _ *reflectortest.ScriptedLW) { o.Recovery.Lister = lister })
	h.waitFailedThenEnded("decoding ns/a of the list", func() {
		mu.Lock()
		spoiled = false
		mu.Unlock()
	})
	h.stop()
	if calls := store.Calls(); !slices.Contains(calls, "update ns/a@2") {
		t.Errorf("store calls %v, want ns/a updated", calls)
	}
}

// Without ListObjectsWire the recovery that cannot list metadata is a full
// list through reflector.Store.Replace (TestRecoveryFallsBackToAFullList).
// With one, a recovery's fetch of the whole collection goes through it too.
// That fetch decodes only the objects it is for. Here the unchanged z/d and
// the new-since x/new are spoiled.
func TestRecoveryFetchesThroughAWireLister(t *testing.T) {
	stored := []*v1.Pod{upod("x", "a", "uxa", "1"), upod("x", "b", "uxb", "2"), upod("y", "c", "uyc", "3"), upod("z", "d", "uzd", "4")}
	listed := []*v1.Pod{upod("x", "a", "uxa", "5"), upod("x", "b", "uxb", "6"), upod("y", "c", "uyc", "7"), upod("z", "d", "uzd", "4")}
	for _, tc := range []struct {
		name string
		cfg  testRecovery
		want []string
	}{
		{"collection", testRecovery{FullListFraction: 0.75}, []string{`"" rv="10" match="NotOlderThan" limit=500 continue=""`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := newFakeStore(stored...)
			lister := &wireLister{
				fakeLister: &fakeLister{
					meta: func(int, metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
						return metaList("10", listed...), nil
					},
					objects: server("10", upod("y", "c", "uyc", "7")),
				},
				wire: func(_ int, ns string, _ metav1.ListOptions) ([]byte, error) {
					items := []pbuf{protoItem(t, upod("x", "a", "uxa", "5"), false), protoItem(t, upod("x", "b", "uxb", "6"), false),
						protoItem(t, upod("x", "new", "uxn", "9"), true)}
					if ns == "" {
						items = append(items, protoItem(t, upod("y", "c", "uyc", "7"), false), protoItem(t, upod("z", "d", "uzd", "4"), true))
					}
					return protoPage("10", "", items...), nil
				},
			}
			h := startRecovery(t, store, nil, "4", func(o *testOptions, _ *reflectortest.ScriptedLW) {
				cfg := tc.cfg
				cfg.Lister, cfg.Workers = lister, 1
				o.Recovery = &cfg
			})
			store.waitFor(t, "end@10")
			h.stop()
			reflectortest.Equal(t, "wire lists", lister.WireOpts(), tc.want)
			after := store.callsAfterBegin()
			slices.Sort(after)
			reflectortest.Equal(t, "store calls after begin", after, []string{"end@10", "update x/a@5", "update x/b@6", "update y/c@7"})
			if s := h.obs.Stats(); len(s) != 1 || s[0].Decoded != 3 {
				t.Errorf("stats %+v, want 3 objects decoded", s)
			}
			h.errs.CheckNone(t)
		})
	}
}

// ListAfter (the stored state is going to the handlers) holds back a full
// list's Replace, not a recovery: the Store orders its writes per
// key.
func TestRecoveryNotHeldByListAfter(t *testing.T) {
	for _, full := range []bool{false, true} {
		t.Run(fmt.Sprintf("full list %v", full), func(t *testing.T) {
			store := newFakeStore(upod("ns", "a", "ua", "1"), upod("ns", "b", "ub", "1"))
			meta := func(int, metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
				return metaList("10", upod("ns", "a", "ua", "1")), nil
			}
			lister := &wireLister{
				fakeLister: &fakeLister{meta: meta},
				wire: func(int, string, metav1.ListOptions) ([]byte, error) {
					return protoPage("10", "", protoItem(t, upod("ns", "a", "ua", "1"), true)), nil
				},
			}
			if full {
				lister.meta = notAcceptable
			}
			gate := make(chan struct{}) // never closed
			h := startRecovery(t, store, nil, "1", func(o *testOptions, _ *reflectortest.ScriptedLW) {
				o.Recovery.Lister = lister
				o.ListAfter = func() <-chan struct{} { return gate }
			})
			store.waitFor(t, "end@10")
			h.stop()
			reflectortest.Equal(t, "store calls", store.Calls(), []string{"begin deleted=[ns/b] unchanged=[ns/a]", "delete tombstone:ns/b@1", "end@10"})
		})
	}
}

// A full list that fails is reported (reflector.ErrList) and the recovery is tried
// again after backoff, from the metadata list on.
func TestRecoveryFromAFullListRetried(t *testing.T) {
	store := newFakeStore(upod("ns", "a", "ua", "1"))
	lister := &wireLister{
		fakeLister: &fakeLister{meta: notAcceptable},
		wire: func(n int, _ string, _ metav1.ListOptions) ([]byte, error) {
			if n == 0 {
				return nil, apierrors.NewInternalError(errors.New("etcd is unhappy"))
			}
			return protoPage("10", "", protoItem(t, upod("ns", "a", "ua", "2"), false)), nil
		},
	}
	h := startRecovery(t, store, nil, "1", func(o *testOptions, _ *reflectortest.ScriptedLW) { o.Recovery.Lister = lister })
	store.waitFor(t, "end@10")
	h.stop()
	if !slices.ContainsFunc(h.errs.Errors(), func(err error) bool {
		return errors.Is(err, reflector.ErrList) && strings.Contains(err.Error(), "full list: ") && strings.Contains(err.Error(), "etcd is unhappy")
	}) {
		t.Errorf("errors %v, want the failed full list", h.errs.Errors())
	}
	reflectortest.Equal(t, "metadata lists", len(lister.MetaOpts()), 2)
	reflectortest.Equal(t, "store calls", store.Calls(), []string{"begin deleted=[] unchanged=[]", "update ns/a@2", "end@10"})
}

// metaWireLister serves its fakeLister's metadata lists as response
// bodies: protobuf as kube-apiserver writes them, or JSON; of kind
// PartialObjectMetadataList unless kind says otherwise.
type metaWireLister struct {
	*fakeLister
	json bool
	kind string
}

func (l *metaWireLister) ListMetadataWire(ctx context.Context, opts metav1.ListOptions) (io.ReadCloser, error) {
	body, err := l.body(ctx, opts)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(iotest.HalfReader(bytes.NewReader(body))), nil
}

// lister is the Lister of metaWireLister's methods.
func (l *metaWireLister) lister() *Lister {
	lr := l.fakeLister.lister()
	lr.ListMetadataWire = l.ListMetadataWire
	return lr
}

// body is the response body of a metadata list.
func (l *metaWireLister) body(ctx context.Context, opts metav1.ListOptions) ([]byte, error) {
	list, err := l.ListMetadata(ctx, opts)
	if err != nil {
		return nil, err
	}
	kind := cmp.Or(l.kind, "PartialObjectMetadataList")
	list.APIVersion, list.Kind = metav1.SchemeGroupVersion.String(), kind
	if l.json {
		return json.Marshal(list)
	}
	raw, err := list.Marshal()
	if err != nil {
		return nil, err
	}
	unk, err := (&runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: list.APIVersion, Kind: kind}, Raw: raw}).Marshal()
	return append(slices.Clone(protobufPrefix), unk...), err
}

// A recovery through ListMetadataWire reads the metadata list's pages from
// their bytes, protobuf or JSON. It comes to the same diff, fetches and
// store calls as from decoded lists. A body of another kind is an error,
// and nothing is applied.
func TestRecoveryReadsTheMetadataListFromTheWire(t *testing.T) {
	onServer := []*v1.Pod{upod("ns", "a", "ua", "1"), upod("ns", "b", "ub", "5"), upod("ns", "d", "ud2", "6"), upod("ns", "e", "ue", "7")}
	pages := func(n int, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
		if opts.Continue == "" {
			l := metaList("10", onServer[:2]...)
			l.Continue = "next"
			return l, nil
		}
		return metaList("10", onServer[2:]...), nil
	}
	for _, tc := range []struct {
		name    string
		wire    bool
		json    bool
		kind    string
		wantErr string
	}{
		{name: "decoded"},
		{name: "protobuf", wire: true},
		{name: "json", wire: true, json: true},
		{name: "protobuf of another kind", wire: true, kind: "PodList", wantErr: "the server sent a meta.k8s.io/v1 PodList for a metadata list"},
		{name: "json of another kind", wire: true, json: true, kind: "PodList", wantErr: "the server sent a meta.k8s.io/v1 PodList for a metadata list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := newFakeStore(upod("ns", "a", "ua", "1"), upod("ns", "b", "ub", "2"), upod("ns", "c", "uc", "3"), upod("ns", "d", "ud1", "4"))
			lister := &fakeLister{meta: pages, objects: server("10", onServer...)}
			h := startRecovery(t, store, lister, "4", func(o *testOptions, _ *reflectortest.ScriptedLW) {
				if tc.wire {
					o.Recovery.Lister = &metaWireLister{fakeLister: lister, json: tc.json, kind: tc.kind}
				}
			})
			if tc.wantErr != "" {
				poll.Until(t, 5*time.Second, "the error reported", func() bool {
					return slices.ContainsFunc(h.errs.Errors(), func(err error) bool { return strings.Contains(err.Error(), tc.wantErr) })
				})
				h.stop()
				if calls := store.Calls(); len(calls) != 0 {
					t.Errorf("store calls %v, want none", calls)
				}
				return
			}
			store.waitFor(t, "end@10")
			h.stop()
			reflectortest.Equal(t, "fetches", lister.Fetches(), []string{"ns/b@10", "ns/d@10", "ns/e@10"})
			reflectortest.Equal(t, "store calls", store.Calls(), []string{
				"begin deleted=[ns/c ns/d] unchanged=[ns/a]",
				"delete tombstone:ns/c@3", "delete tombstone:ns/d@4",
				"update ns/b@5", "add ns/d@6", "add ns/e@7",
				"end@10",
			})
			reflectortest.Equal(t, "starts", h.obs.Starts(), []string{"listed relist-error 10 items=4 pages=2"})
			limit := int64(recoveryPageSize)
			if tc.wire {
				limit = recoveryStreamPageSize // read as they arrive
			}
			reflectortest.Equal(t, "metadata list options", lister.MetaOpts(), []metav1.ListOptions{
				{ResourceVersion: "4", ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, Limit: limit},
				{Continue: "next", Limit: limit},
			})
			h.errs.CheckNone(t)
		})
	}
}

// A metadata list's first page may show at least FirstPageFraction of the
// collection changed since the stored resourceVersion. It then ends the
// metadata list there, and the recovery lists in full, reading the list's
// bytes. The rest of the metadata list, then a full list, would cost more.
// A first page with fewer changes lists the rest of the metadata.
func TestRecoveryFirstPageManyChanged(t *testing.T) {
	stored := []*v1.Pod{upod("ns", "a", "ua", "1"), upod("ns", "b", "ub", "2"), upod("ns", "c", "uc", "3"), upod("ns", "d", "ud", "4")}
	for _, tc := range []struct {
		name      string
		firstPage []*v1.Pod
		full      bool
	}{
		{"half of the first page changed", []*v1.Pod{upod("ns", "a", "ua", "7"), upod("ns", "b", "ub", "2")}, true},
		{"none of the first page changed", []*v1.Pod{upod("ns", "a", "ua", "1"), upod("ns", "b", "ub", "2")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			onServer := append(slices.Clone(tc.firstPage), upod("ns", "c", "uc", "3"), upod("ns", "d", "ud", "8"))
			store := newFakeStore(stored...)
			meta := func(_ int, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
				if opts.Continue == "" {
					l := metaList("10", tc.firstPage...)
					l.Continue = "next"
					return l, nil
				}
				return metaList("10", onServer[2:]...), nil
			}
			var items []pbuf
			for _, p := range onServer {
				items = append(items, protoItem(t, p, false))
			}
			lister := &wireLister{
				fakeLister: &fakeLister{meta: meta, objects: server("10", onServer...)},
				wire:       func(int, string, metav1.ListOptions) ([]byte, error) { return protoPage("10", "", items...), nil },
			}
			h := startRecovery(t, store, nil, "4", func(o *testOptions, _ *reflectortest.ScriptedLW) {
				o.Recovery.Lister = lister
				o.Recovery.FirstPageFraction = 0.5
			})
			store.waitFor(t, "end@10")
			h.stop()
			pages, fullLists := 2, 0
			want := []string{"begin deleted=[] unchanged=[ns/a ns/b ns/c]", "update ns/d@8", "end@10"}
			if tc.full {
				pages, fullLists = 1, 1
				want = []string{"begin deleted=[] unchanged=[ns/b ns/c]", "update ns/a@7", "update ns/d@8", "end@10"}
			}
			reflectortest.Equal(t, "metadata pages", len(lister.MetaOpts()), pages)
			reflectortest.Equal(t, "full lists", len(lister.WireOpts()), fullLists)
			reflectortest.Equal(t, "store calls", store.Calls(), want)
			h.errs.CheckNone(t)
		})
	}
}

// With ListInFull a recovery lists the whole collection, with no metadata
// list and no fetches. A lister without ListObjectsWire lists it page by
// page, decoded. The diff is a metadata list's, and the changed objects
// come from the list.
func TestRecoveryListsInFull(t *testing.T) {
	store := newFakeStore(upod("ns", "a", "ua", "1"), upod("ns", "b", "ub", "2"), upod("ns", "c", "uc", "3"), upod("ns", "d", "ud1", "4"))
	onServer := []*v1.Pod{upod("ns", "a", "ua", "1"), upod("ns", "b", "ub", "5"), upod("ns", "d", "ud2", "6"), upod("ns", "e", "ue", "7")}
	lister := &fakeLister{
		meta: func(int, metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
			t.Error("a metadata list with ListInFull")
			return nil, errors.New("no metadata lists")
		},
		objects: server("10", onServer...),
	}
	h := startRecovery(t, store, lister, "4", func(o *testOptions, _ *reflectortest.ScriptedLW) {
		o.Recovery.ListInFull = true
	})
	store.waitFor(t, "end@10")
	h.stop()
	reflectortest.Equal(t, "lists", lister.Fetches(), []string{"*@4"})
	reflectortest.Equal(t, "store calls", store.Calls(), []string{
		"begin deleted=[ns/c ns/d] unchanged=[ns/a]",
		"delete tombstone:ns/c@3", "delete tombstone:ns/d@4",
		"update ns/b@5", "add ns/d@6", "add ns/e@7",
		"end@10",
	})
	stats := h.obs.Stats()
	if len(stats) != 1 {
		t.Fatalf("recovered %d times, want once", len(stats))
	}
	s := stats[0]
	s.Duration, s.ListDuration = 0, 0
	reflectortest.Equal(t, "stats", s, Stats{Listed: 4, Pages: 1, Unchanged: 1, Deleted: 2, Fetch: 3, Fetched: 3, Decoded: 4, FullList: true})
}

// With OpaqueVersions resourceVersions are only told equal or not, even
// where they parse as integers. A stored object at a "higher" version than
// the listed one is not kept as newer, as an etcd revision would be. It is
// replaced by the listed state. The watch's events pass as they come.
func TestRecoveryOpaqueVersions(t *testing.T) {
	for _, opaque := range []bool{true, false} {
		t.Run(fmt.Sprintf("opaque=%t", opaque), func(t *testing.T) {
			store := newFakeStore(upod("ns", "a", "ua", "1"), upod("ns", "b", "ub", "20"))
			lister := &fakeLister{objects: server("10", upod("ns", "a", "ua", "1"), upod("ns", "b", "ub", "5"))}
			h := startRecovery(t, store, lister, "20", func(o *testOptions, _ *reflectortest.ScriptedLW) {
				o.Recovery.ListInFull, o.Recovery.OpaqueVersions = !opaque, opaque // OpaqueVersions implies ListInFull
			})
			var want []string
			if opaque {
				store.waitFor(t, "end@10")
				h.lw.Watcher(t, 0).Modify(upod("ns", "b", "ub", "3"))
				store.waitFor(t, "update ns/b@3")
				want = []string{"update ns/b@5", "end@10", "update ns/b@3"}
			} else {
				// As etcd revisions, the stored b is newer than the list.
				// The recovery waits for the watch to pass it.
				h.lw.Watcher(t, 0).Action(watch.Bookmark, upod("", "", "", "20"))
				store.waitFor(t, "end@20")
				want = []string{"bookmark@20", "end@20"}
			}
			h.stop()
			reflectortest.Equal(t, "store calls after begin", store.callsAfterBegin(), want)
		})
	}
}

// A full list read from its bytes keeps those of the items newer than the
// resourceVersion it was made at. That is the version the store holds the
// collection at. An item no newer is stored at the same version wherever
// the store is consistent, and is not decoded. Here ns/b is listed at 4 but
// stored at 2, as a recovery that failed after its diff leaves a key. The
// recovery fetches that key instead.
func TestRecoveryFromAFullListKeepsTheNewerItems(t *testing.T) {
	store := newFakeStore(upod("ns", "a", "ua", "1"), upod("ns", "b", "ub", "2"))
	lister := &wireLister{
		fakeLister: &fakeLister{meta: notAcceptable, objects: server("10", upod("ns", "b", "ub", "4"))},
		wire: func(int, string, metav1.ListOptions) ([]byte, error) {
			// Spoiled where a decode would show they were kept.
			return protoPage("10", "", protoItem(t, upod("ns", "a", "ua", "1"), true), protoItem(t, upod("ns", "b", "ub", "4"), true),
				protoItem(t, upod("ns", "c", "uc", "7"), false)), nil
		},
	}
	h := startRecovery(t, store, nil, "5", func(o *testOptions, _ *reflectortest.ScriptedLW) { o.Recovery.Lister = lister })
	store.waitFor(t, "end@10")
	h.stop()
	after := store.callsAfterBegin()
	slices.Sort(after)
	reflectortest.Equal(t, "store calls after begin", after, []string{"add ns/c@7", "end@10", "update ns/b@4"})
	reflectortest.Equal(t, "fetches", lister.Fetches(), []string{"ns/b@10"})
	if s := h.obs.Stats(); len(s) != 1 || !s[0].FullList || s[0].Fetch != 2 || s[0].Fetched != 2 {
		t.Errorf("stats %+v, want a full list, 2 to fetch, both fetched", s)
	}
	h.errs.CheckNone(t)
}

// A page may turn out, part read, not to be the layout the scanner reads.
// Here its list message comes twice, and the generated Unmarshal keeps the
// second. Such a page is asked for again and decoded whole. A changed
// layout costs a request, not correctness.
func TestRecoveryFromAFullListOfAnotherLayout(t *testing.T) {
	store := newFakeStore(upod("ns", "a", "ua", "1"))
	first := pbuf{}.msg(1, pbuf{}.str(2, "9")).msg(2, protoItem(t, upod("ns", "stale", "us", "8"), false))
	second := pbuf{}.msg(1, pbuf{}.str(2, "10")).msg(2, protoItem(t, upod("ns", "a", "ua", "7"), false))
	body := append(envelope(first), pbuf{}.msg(2, second)...)
	lister := &wireLister{
		fakeLister: &fakeLister{meta: notAcceptable},
		wire:       func(int, string, metav1.ListOptions) ([]byte, error) { return body, nil },
	}
	h := startRecovery(t, store, nil, "1", func(o *testOptions, _ *reflectortest.ScriptedLW) { o.Recovery.Lister = lister })
	store.waitFor(t, "end@10")
	h.stop()
	reflectortest.Equal(t, "store calls after begin", store.callsAfterBegin(), []string{"update ns/a@7", "end@10"})
	reflectortest.Equal(t, "full list requests", len(lister.WireOpts()), 2)
	h.errs.CheckNone(t)
}
