package recovery

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/boltinformer/boltinformer/internal/testing/poll"
	"github.com/boltinformer/boltinformer/internal/testing/reflectortest"
	"github.com/boltinformer/boltinformer/reflector"
)

// cutBetweenItems cuts body, a list with item among its items, just before
// that item's field. The cut falls between two fields of the list message.
// A reader that takes the stream's end for the message's would see a list
// without the item.
func cutBetweenItems(t *testing.T, body []byte, item []byte) []byte {
	t.Helper()
	at := bytes.Index(body, item)
	if at < 2 || body[at-2] != 0x12 || int(body[at-1]) != len(item) {
		t.Fatalf("item not found as a field of one-byte length in %q", body)
	}
	return body[:at-2]
}

// onceCut serves the first body of each kind cut short, the rest whole.
type onceCut struct {
	mu       sync.Mutex
	metaCut  bool
	wholeCut bool
}

func (c *onceCut) first(done *bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	first := !*done
	*done = true
	return first
}

// cutMetaLister is a metaWireLister whose first metadata page arrives cut
// between two items.
type cutMetaLister struct {
	*metaWireLister
	t    *testing.T
	cut  *onceCut
	item metav1.PartialObjectMetadata
}

func (l *cutMetaLister) ListMetadataWire(ctx context.Context, opts metav1.ListOptions) (io.ReadCloser, error) {
	body, err := l.body(ctx, opts)
	if err != nil || !l.cut.first(&l.cut.metaCut) {
		return io.NopCloser(bytes.NewReader(body)), err
	}
	item, err := l.item.Marshal()
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(cutBetweenItems(l.t, body, item))), nil
}

// A page whose body ends early between two items is a failed page. A
// connection that closed mid-response ends it so. The recovery asks for
// such a page again and reads it whole. This holds for a metadata page and
// a page of a full list. It is never read as a shorter list, nor as a
// stream that closed normally.
func TestRecoveryAsksAgainForACutPage(t *testing.T) {
	stored := []*v1.Pod{upod("ns", "a", "ua", "1"), upod("ns", "b", "ub", "2"), upod("ns", "c", "uc", "3")}
	onServer := []*v1.Pod{upod("ns", "a", "ua", "1"), upod("ns", "b", "ub", "5"), upod("ns", "c", "uc", "3")}
	want := []string{"begin deleted=[] unchanged=[ns/a ns/c]", "update ns/b@5", "end@10"}

	t.Run("metadata page", func(t *testing.T) {
		lister := &fakeLister{
			meta: func(int, metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
				return metaList("10", onServer...), nil
			},
			objects: server("10", onServer...),
		}
		cut := &cutMetaLister{metaWireLister: &metaWireLister{fakeLister: lister}, t: t, cut: &onceCut{},
			item: metav1.PartialObjectMetadata{ObjectMeta: onServer[2].ObjectMeta}}
		store := newFakeStore(stored...)
		h := startRecovery(t, store, lister, "3", func(o *testOptions, _ *reflectortest.ScriptedLW) { o.Recovery.Lister = cut })
		store.waitFor(t, "end@10")
		h.stop()
		reflectortest.Equal(t, "store calls", store.Calls(), want)
		reflectortest.Equal(t, "metadata page requests", len(lister.MetaOpts()), 2)
		h.errs.CheckNone(t)
		if n := len(h.obs.Stats()); n != 1 {
			t.Errorf("recovered %d times, want once", n)
		}
	})

	t.Run("full list page", func(t *testing.T) {
		cut := &onceCut{}
		items := []pbuf{protoItem(t, onServer[0], false), protoItem(t, onServer[1], false), protoItem(t, onServer[2], false)}
		lister := &wireLister{
			fakeLister: &fakeLister{meta: notAcceptable, objects: func(context.Context, string, string, metav1.ListOptions) (runtime.Object, error) {
				return nil, fmt.Errorf("a fetch")
			}},
			wire: func(int, string, metav1.ListOptions) ([]byte, error) {
				body := protoPage("10", "", items...)
				if cut.first(&cut.wholeCut) {
					return cutBetweenItems(t, body, items[2]), nil
				}
				return body, nil
			},
		}
		store := newFakeStore(stored...)
		h := startRecovery(t, store, nil, "3", func(o *testOptions, _ *reflectortest.ScriptedLW) { o.Recovery.Lister = lister })
		store.waitFor(t, "end@10")
		h.stop()
		reflectortest.Equal(t, "store calls", store.Calls(), want)
		reflectortest.Equal(t, "full list page requests", len(lister.WireOpts()), 2)
		h.errs.CheckNone(t)
		if n := len(h.obs.Stats()); n != 1 {
			t.Errorf("recovered %d times, want once", n)
		}
	})
}

// cutBody is body cut after n bytes, arriving a few bytes at a time. Its
// reader then ends with end. That is io.EOF, or io.ErrUnexpectedEOF as
// net/http reports a body short of its length.
func cutBody(body []byte, n int, end error) io.ReadCloser {
	return io.NopCloser(io.MultiReader(iotest.HalfReader(bytes.NewReader(body[:n])), iotest.ErrReader(end)))
}

// cutAt serves a list's body cut by cutBody: the first time only, given
// a once, else until healed.
type cutAt struct {
	body []byte
	n    int
	end  error
	once *onceCut

	mu     sync.Mutex
	asked  int
	healed bool
}

// serve returns the body of the next request, cut or whole.
func (c *cutAt) serve(first func(*onceCut) bool) io.ReadCloser {
	c.mu.Lock()
	c.asked++
	cut := !c.healed && (c.once == nil || first(c.once))
	c.mu.Unlock()
	if cut {
		return cutBody(c.body, c.n, c.end)
	}
	return cutBody(c.body, len(c.body), io.EOF)
}

// heal serves whole bodies from now on.
func (c *cutAt) heal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.healed = true
}

// Asked is the number of bodies asked for.
func (c *cutAt) Asked() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.asked
}

// cutAtMetaLister is a fakeLister with ListMetadataWire, whose metadata
// pages are served by cutAt. Its decoded metadata lists, the pages asked
// for again, are its fakeLister's.
type cutAtMetaLister struct {
	*fakeLister
	*cutAt
}

func (l *cutAtMetaLister) ListMetadataWire(context.Context, metav1.ListOptions) (io.ReadCloser, error) {
	return l.serve(func(c *onceCut) bool { return c.first(&c.metaCut) }), nil
}

// cutAtWireLister is a fakeLister with ListObjectsWire, for a full list,
// whose pages are served by cutAt.
type cutAtWireLister struct {
	*fakeLister
	*cutAt
}

func (l *cutAtWireLister) ListObjectsWire(context.Context, string, metav1.ListOptions) (io.ReadCloser, func([]byte) (runtime.Object, error), error) {
	return l.serve(func(c *onceCut) bool { return c.first(&c.wholeCut) }), decodeBody, nil
}

// encodeMetadataList encodes list as kube-apiserver writes a metadata
// list: protobuf whole or streaming (collections.go), or JSON.
func encodeMetadataList(t *testing.T, list *metav1.PartialObjectMetadataList) map[string][]byte {
	t.Helper()
	list = list.DeepCopy()
	list.APIVersion, list.Kind = metav1.SchemeGroupVersion.String(), "PartialObjectMetadataList"
	out := map[string][]byte{}
	for name, streaming := range map[string]bool{"protobuf": false, "streaming protobuf": true} {
		var buf bytes.Buffer
		ser := protobuf.NewSerializerWithOptions(nil, nil, protobuf.SerializerOptions{StreamingCollectionsEncoding: streaming})
		if err := ser.Encode(list, &buf); err != nil {
			t.Fatal(err)
		}
		out[name] = buf.Bytes()
	}
	b, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	out["json"] = b
	return out
}

// encodePodList encodes list as kube-apiserver writes a full list:
// protobuf whole or streaming, or JSON.
func encodePodList(t *testing.T, list *v1.PodList) map[string][]byte {
	t.Helper()
	streamed := list.DeepCopy()
	streamed.APIVersion, streamed.Kind = "v1", "PodList"
	var buf bytes.Buffer
	ser := protobuf.NewSerializerWithOptions(nil, nil, protobuf.SerializerOptions{StreamingCollectionsEncoding: true})
	if err := ser.Encode(streamed, &buf); err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{
		"protobuf":           encodeProtobuf(t, list),
		"streaming protobuf": buf.Bytes(),
		"json":               jsonPage(t, list.ResourceVersion, list.Continue, podPointers(list)...),
	}
}

func podPointers(list *v1.PodList) []*v1.Pod {
	out := make([]*v1.Pod, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out
}

// A page's body may be cut at any byte, from an empty body to a whole one.
// It may be protobuf, whole or streaming, or JSON. Its reader may say io.EOF
// or io.ErrUnexpectedEOF at the cut. The recovery's own sniffing of its
// format reads it. The page is read whole, or asked for again once and read
// whole. The recovery never fails on it, never reports an error, and never
// reads a shorter list. The diff and store calls are those of the page
// uncut. This holds for a metadata page and a full list's page.
func TestRecoveryAsksAgainForAPageCutAnywhere(t *testing.T) {
	stored := []*v1.Pod{upod("ns", "a", "ua", "1"), upod("ns", "b", "ub", "2"), upod("ns", "c", "uc", "3")}
	onServer := []*v1.Pod{upod("ns", "a", "ua", "1"), upod("ns", "b", "ub", "5"), upod("ns", "c", "uc", "3")}
	want := []string{"begin deleted=[] unchanged=[ns/a ns/c]", "update ns/b@5", "end@10"}
	ends := []error{io.EOF, io.ErrUnexpectedEOF}

	// checkRun requires one recovery to the uncut page's store calls, with
	// the page asked for again at most once, and no error reported.
	checkRun := func(t *testing.T, what string, store *fakeStore, h *recoveryHarness, asked int) {
		t.Helper()
		store.waitFor(t, "end@10")
		h.stop()
		if calls := store.Calls(); !reflect.DeepEqual(calls, want) {
			t.Fatalf("%s: store calls %q, want %q", what, calls, want)
		}
		if errs := h.errs.Errors(); len(errs) > 0 {
			t.Fatalf("%s: errors reported: %v", what, errs)
		}
		if n := len(h.obs.Stats()); n != 1 {
			t.Fatalf("%s: recovered %d times, want once", what, n)
		}
		if asked > 1 {
			t.Fatalf("%s: the page asked for again %d times, want at most once", what, asked)
		}
	}

	for format, body := range encodeMetadataList(t, metaList("10", onServer...)) {
		t.Run("metadata page in "+format, func(t *testing.T) {
			for n := range len(body) + 1 {
				end := ends[n%len(ends)]
				lister := &fakeLister{
					meta: func(int, metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
						return metaList("10", onServer...), nil
					},
					objects: server("10", onServer...),
				}
				cut := &cutAtMetaLister{fakeLister: lister, cutAt: &cutAt{body: body, n: n, end: end, once: &onceCut{}}}
				store := newFakeStore(stored...)
				h := startRecovery(t, store, lister, "3", func(o *testOptions, _ *reflectortest.ScriptedLW) { o.Recovery.Lister = cut })
				checkRun(t, fmt.Sprintf("cut at %d of %d bytes, then %v", n, len(body), end), store, h, len(lister.MetaOpts()))
			}
		})
	}

	for format, body := range encodePodList(t, reflectortest.PodList("10", onServer...)) {
		t.Run("full list page in "+format, func(t *testing.T) {
			for n := range len(body) + 1 {
				end := ends[n%len(ends)]
				cut := &cutAtWireLister{
					fakeLister: &fakeLister{meta: notAcceptable, objects: func(context.Context, string, string, metav1.ListOptions) (runtime.Object, error) {
						return nil, fmt.Errorf("a fetch")
					}},
					cutAt: &cutAt{body: body, n: n, end: end, once: &onceCut{}},
				}
				store := newFakeStore(stored...)
				h := startRecovery(t, store, nil, "3", func(o *testOptions, _ *reflectortest.ScriptedLW) { o.Recovery.Lister = cut })
				checkRun(t, fmt.Sprintf("cut at %d of %d bytes, then %v", n, len(body), end), store, h, cut.Asked()-1)
			}
		})
	}
}

// Every body shorter than the protobuf prefix, with each of its reader's
// ends, reads through the metadata page's sniffing as a whole page. A cut
// one is asked for again and decoded. This is the page alone, so both ends
// are tried at every byte. TestRecoveryAsksAgainForAPageCutAnywhere runs
// whole recoveries.
func TestMetadataPageCutAnywhere(t *testing.T) {
	pods := []*v1.Pod{upod("ns", "a", "ua", "1"), upod("ns", "b", "ub", "5"), upod("", "c", "uc", "3")}
	list := metaList("10", pods...)
	list.Continue = "next"
	whole := decodedMetadataPage(list)
	for format, body := range encodeMetadataList(t, list) {
		for n := range len(body) + 1 {
			for _, end := range []error{io.EOF, io.ErrUnexpectedEOF} {
				what := fmt.Sprintf("%s cut at %d of %d bytes, then %v", format, n, len(body), end)
				lister := &fakeLister{meta: func(int, metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) { return list.DeepCopy(), nil }}
				cut := &cutAtMetaLister{fakeLister: lister, cutAt: &cutAt{body: body, n: n, end: end, once: &onceCut{}}}
				changes := &changeCount{stored: 3, fraction: 2}
				page, err := metadataPage(context.Background(), cut.lister(), metav1.ListOptions{Limit: 3}, nil, nil, changes)
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				got := [3]any{page.resourceVersion, page.continueToken, page.items}
				if want := [3]any{whole.resourceVersion, whole.continueToken, whole.items}; !reflect.DeepEqual(got, want) {
					t.Fatalf("%s: read %+v, want %+v", what, got, want)
				}
				if changes.changed != 1 {
					t.Fatalf("%s: counted %d changed items, want 1", what, changes.changed)
				}
				if asked := len(lister.MetaOpts()); asked > 1 || n < len(body)-8 && asked != 1 {
					t.Fatalf("%s: asked for again %d times, want once", what, asked)
				}
			}
		}
	}
}

// captureHandleError makes utilruntime.ErrorHandlers record every error
// until the test ends, and returns what they recorded so far.
func captureHandleError(t *testing.T) func() []error {
	var mu sync.Mutex
	var got []error
	saved := utilruntime.ErrorHandlers
	utilruntime.ErrorHandlers = []utilruntime.ErrorHandler{func(_ context.Context, err error, _ string, _ ...interface{}) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, err)
	}}
	t.Cleanup(func() { utilruntime.ErrorHandlers = saved })
	return func() []error {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}

// A page cut short again when asked for again fails the recovery. With
// the default error handler (Options.WatchErrorHandler nil) the failure
// is reported through utilruntime.HandleErrorWithContext, as a failed
// list is by client-go's, though its error wraps io.ErrUnexpectedEOF. The
// recovery is made again only once the backoff's timer fires, so a server
// that keeps cutting its answers is not asked in a loop. Once the bodies
// arrive whole, the recovery ends.
func TestRecoveryOfAPageCutTwiceIsReportedAndBacksOff(t *testing.T) {
	stored := []*v1.Pod{upod("ns", "a", "ua", "1"), upod("ns", "b", "ub", "2"), upod("ns", "c", "uc", "3")}
	onServer := []*v1.Pod{upod("ns", "a", "ua", "1"), upod("ns", "b", "ub", "5"), upod("ns", "c", "uc", "3")}
	readFailed := fmt.Errorf("unexpected error when reading response body. Please retry. Original error: %w", io.ErrUnexpectedEOF)
	for _, tc := range []struct {
		name string
		// lister cuts every body at its start until healed. asked counts
		// the requests, two an attempt: the page, and the page asked for
		// again.
		lister func(healed func() bool) (l testLister, cut *cutAt, asked func() int)
	}{{
		name: "metadata page",
		lister: func(healed func() bool) (testLister, *cutAt, func() int) {
			body := encodeMetadataList(t, metaList("10", onServer...))["protobuf"]
			cut := &cutAt{body: body, n: 0, end: io.EOF}
			decoded := &fakeLister{
				meta: func(int, metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
					if !healed() {
						return nil, readFailed // the page asked for again, cut too
					}
					return metaList("10", onServer...), nil
				},
				objects: server("10", onServer...),
			}
			return &cutAtMetaLister{fakeLister: decoded, cutAt: cut}, cut, func() int { return cut.Asked() + len(decoded.MetaOpts()) }
		},
	}, {
		name: "full list page",
		lister: func(func() bool) (testLister, *cutAt, func() int) {
			body := encodePodList(t, reflectortest.PodList("10", onServer...))["protobuf"]
			cut := &cutAt{body: body, n: 0, end: io.ErrUnexpectedEOF}
			return &cutAtWireLister{fakeLister: &fakeLister{meta: notAcceptable, objects: func(context.Context, string, string, metav1.ListOptions) (runtime.Object, error) {
				return nil, fmt.Errorf("a fetch")
			}}, cutAt: cut}, cut, cut.Asked
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			reported := captureHandleError(t)
			clock := testingclock.NewFakeClock(time.Now())
			var healed atomic.Bool
			lister, cut, asked := tc.lister(healed.Load)
			store := newFakeStore(stored...)
			h := startRecovery(t, store, nil, "3", func(o *testOptions, _ *reflectortest.ScriptedLW) {
				o.Recovery.Lister = lister
				o.WatchErrorHandler = nil // the default: log like client-go
				o.Clock = clock
			})
			for attempt := 1; attempt <= 2; attempt++ {
				poll.Until(t, 5*time.Second, fmt.Sprintf("failure %d reported, and the backoff's timer set", attempt), func() bool {
					return len(reported()) == attempt && clock.HasWaiters()
				})
				err := reported()[attempt-1]
				if !errors.Is(err, reflector.ErrList) || errors.Is(err, io.EOF) {
					t.Errorf("failure %d reported as %v, want an ErrList, not wrapping io.EOF", attempt, err)
				}
				// Waiting on the backoff: nothing more was asked.
				if n := asked(); n != 2*attempt {
					t.Fatalf("after failure %d, %d requests, want %d", attempt, n, 2*attempt)
				}
				if attempt == 2 {
					healed.Store(true)
					cut.heal()
				}
				clock.Step(time.Second)
			}
			store.waitFor(t, "end@10")
			h.stop()
			reflectortest.Equal(t, "store calls", store.Calls(), []string{"begin deleted=[] unchanged=[ns/a ns/c]", "update ns/b@5", "end@10"})
			if n := len(reported()); n != 2 {
				t.Errorf("%d failures reported, want 2: %v", n, reported())
			}
		})
	}
}

// A page of a full list may have every body cut at the same byte, with
// either end of its reader. It then fails the recovery or reads the whole
// page, never a shorter list. The recovery asks for a cut page again and
// decodes that body whole. A protobuf body cut with a bare io.EOF just
// after its envelope's type field decodes as a list without items or
// resourceVersion. Once the bodies arrive whole, the recovery ends with the
// uncut page's store calls.
func TestRecoveryOfAPageCutTwiceAnywhereNeverReadsLess(t *testing.T) {
	stored := []*v1.Pod{upod("ns", "a", "ua", "1"), upod("ns", "b", "ub", "2"), upod("ns", "c", "uc", "3")}
	onServer := []*v1.Pod{upod("ns", "a", "ua", "1"), upod("ns", "b", "ub", "5"), upod("ns", "c", "uc", "3")}
	want := []string{"begin deleted=[] unchanged=[ns/a ns/c]", "update ns/b@5", "end@10"}
	for format, body := range encodePodList(t, reflectortest.PodList("10", onServer...)) {
		t.Run(format, func(t *testing.T) {
			for n := range len(body) {
				for _, end := range []error{io.EOF, io.ErrUnexpectedEOF} {
					what := fmt.Sprintf("every body cut at %d of %d bytes, then %v", n, len(body), end)
					cut := &cutAtWireLister{
						fakeLister: &fakeLister{meta: notAcceptable, objects: func(context.Context, string, string, metav1.ListOptions) (runtime.Object, error) {
							return nil, fmt.Errorf("a fetch")
						}},
						cutAt: &cutAt{body: body, n: n, end: end},
					}
					store := newFakeStore(stored...)
					h := startRecovery(t, store, nil, "3", func(o *testOptions, _ *reflectortest.ScriptedLW) { o.Recovery.Lister = cut })
					poll.Until(t, 5*time.Second, what+": a failed recovery, or its end", func() bool {
						return len(h.errs.Errors()) > 0 || slices.ContainsFunc(store.Calls(), func(c string) bool { return strings.HasPrefix(c, "end@") })
					})
					if calls := store.Calls(); len(calls) > 0 && !slices.Equal(calls, want) {
						t.Fatalf("%s: store calls %q, want none before the bodies heal, or %q", what, calls, want)
					}
					cut.heal()
					store.waitFor(t, "end@10")
					h.stop()
					if calls := store.Calls(); !reflect.DeepEqual(calls, want) {
						t.Fatalf("%s: store calls %q, want %q", what, calls, want)
					}
				}
			}
		})
	}
}

// lister is the Lister of cutMetaLister's methods.
func (l *cutMetaLister) lister() *Lister {
	lr := l.metaWireLister.lister()
	lr.ListMetadataWire = l.ListMetadataWire
	return lr
}

// lister is the Lister of cutAtMetaLister's methods.
func (l *cutAtMetaLister) lister() *Lister {
	lr := l.fakeLister.lister()
	lr.ListMetadataWire = l.ListMetadataWire
	return lr
}

// lister is the Lister of cutAtWireLister's methods.
func (l *cutAtWireLister) lister() *Lister {
	lr := l.fakeLister.lister()
	lr.ListObjectsWire = l.ListObjectsWire
	return lr
}

// prefixCutMetaLister is a metaWireLister whose first metadata page
// arrives with only its first n bytes. With n = 0 the connection closed
// right after the response's headers. Otherwise it closed inside the
// protobuf prefix.
type prefixCutMetaLister struct {
	*metaWireLister
	n   int
	cut *onceCut
}

func (l *prefixCutMetaLister) ListMetadataWire(ctx context.Context, opts metav1.ListOptions) (io.ReadCloser, error) {
	body, err := l.body(ctx, opts)
	if err != nil || !l.cut.first(&l.cut.metaCut) {
		return io.NopCloser(bytes.NewReader(body)), err
	}
	return io.NopCloser(bytes.NewReader(body[:l.n])), nil
}

// A metadata page cut short is a failed page, asked for again and decoded
// whole (metadataPage). A stream cut short is never a bare io.EOF
// (internal/wire). A reflector's error handler would take that for a normal
// close. TestRecoveryAsksAgainForACutPage cuts a page between two items.
// Here the page is cut before or inside the 4-byte protobuf prefix. It must
// not be taken for JSON, which would fail the whole recovery with a JSON
// error. For an empty body that error would wrap io.EOF. The reflector's
// default error handler drops such an error without a word, as "watch
// closed normally".
func TestRecoveryAsksAgainForAMetadataPageCutInItsPrefix(t *testing.T) {
	stored := []*v1.Pod{upod("ns", "a", "ua", "1"), upod("ns", "b", "ub", "2"), upod("ns", "c", "uc", "3")}
	onServer := []*v1.Pod{upod("ns", "a", "ua", "1"), upod("ns", "b", "ub", "5"), upod("ns", "c", "uc", "3")}
	want := []string{"begin deleted=[] unchanged=[ns/a ns/c]", "update ns/b@5", "end@10"}
	for _, n := range []int{0, 2} {
		t.Run(fmt.Sprintf("cut after %d bytes", n), func(t *testing.T) {
			lister := &fakeLister{
				meta: func(int, metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
					return metaList("10", onServer...), nil
				},
				objects: server("10", onServer...),
			}
			cut := &prefixCutMetaLister{metaWireLister: &metaWireLister{fakeLister: lister}, n: n, cut: &onceCut{}}
			store := newFakeStore(stored...)
			h := startRecovery(t, store, lister, "3", func(o *testOptions, _ *reflectortest.ScriptedLW) { o.Recovery.Lister = cut })
			store.waitFor(t, "end@10")
			h.stop()
			reflectortest.Equal(t, "store calls", store.Calls(), want)
			for _, err := range h.errs.Errors() {
				if errors.Is(err, io.EOF) {
					t.Errorf("a cut page reported as an error wrapping io.EOF, which the default error handler drops as a normal close: %v", err)
				}
			}
			h.errs.CheckNone(t)
			if n := len(h.obs.Stats()); n != 1 {
				t.Errorf("recovered %d times, want once (the cut page asked for again)", n)
			}
		})
	}
}

// The same holds for a page of a full list (wirePage). A page that does not
// read as the layout, one cut short included, is asked for again. A body
// cut before or inside its 4-byte prefix must not be taken for JSON. Decoded
// as it is, it would fail the whole recovery on the decoder's error.
func TestRecoveryAsksAgainForAFullListPageCutInItsPrefix(t *testing.T) {
	stored := []*v1.Pod{upod("ns", "a", "ua", "1"), upod("ns", "b", "ub", "2"), upod("ns", "c", "uc", "3")}
	onServer := []*v1.Pod{upod("ns", "a", "ua", "1"), upod("ns", "b", "ub", "5"), upod("ns", "c", "uc", "3")}
	want := []string{"begin deleted=[] unchanged=[ns/a ns/c]", "update ns/b@5", "end@10"}
	for _, n := range []int{0, 2} {
		t.Run(fmt.Sprintf("cut after %d bytes", n), func(t *testing.T) {
			cut := &onceCut{}
			items := []pbuf{protoItem(t, onServer[0], false), protoItem(t, onServer[1], false), protoItem(t, onServer[2], false)}
			lister := &wireLister{
				fakeLister: &fakeLister{meta: notAcceptable, objects: func(context.Context, string, string, metav1.ListOptions) (runtime.Object, error) {
					return nil, fmt.Errorf("a fetch")
				}},
				wire: func(int, string, metav1.ListOptions) ([]byte, error) {
					body := protoPage("10", "", items...)
					if cut.first(&cut.wholeCut) {
						return body[:n], nil
					}
					return body, nil
				},
			}
			store := newFakeStore(stored...)
			h := startRecovery(t, store, nil, "3", func(o *testOptions, _ *reflectortest.ScriptedLW) { o.Recovery.Lister = lister })
			store.waitFor(t, "end@10")
			h.stop()
			reflectortest.Equal(t, "store calls", store.Calls(), want)
			h.errs.CheckNone(t)
			if n := len(h.obs.Stats()); n != 1 {
				t.Errorf("recovered %d times, want once (the cut page asked for again)", n)
			}
		})
	}
}

// lister is the Lister of prefixCutMetaLister's methods.
func (l *prefixCutMetaLister) lister() *Lister {
	lr := l.metaWireLister.lister()
	lr.ListMetadataWire = l.ListMetadataWire
	return lr
}
