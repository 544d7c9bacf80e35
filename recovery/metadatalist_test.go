package recovery

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/iotest"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/boltinformer/boltinformer/internal/testing/reflectortest"
)

// aheadLister is a metaWireLister whose bodies hold back their last byte
// until the next page has been asked for. The pages of decides are the
// exception. It counts the bodies it handed out and those closed.
type aheadLister struct {
	*metaWireLister
	t *testing.T
	// decides are the continue tokens of pages read whole before the next
	// is asked for: the first page, where the recovery decides on it.
	decides  map[string]bool
	mu       sync.Mutex
	asked    map[string]chan struct{} // by continue token, closed once asked for
	open     int
	requests []string
}

// newAheadLister serves pages, by continue token, as an aheadLister, and
// onServer's objects, at resourceVersion 10, as fetches.
func newAheadLister(t *testing.T, pages map[string]*metav1.PartialObjectMetadataList, onServer ...*v1.Pod) (*fakeLister, *aheadLister) {
	lister := &fakeLister{
		meta: func(_ int, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
			return pages[opts.Continue].DeepCopy(), nil
		},
		objects: server("10", onServer...),
	}
	return lister, &aheadLister{metaWireLister: &metaWireLister{fakeLister: lister}, t: t, asked: map[string]chan struct{}{}}
}

// check fails t unless the pages asked for were want, in order, and every
// body handed out was closed.
func (l *aheadLister) check(t *testing.T, want []string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	reflectortest.Equal(t, "pages asked for", l.requests, want)
	if l.open != 0 {
		t.Errorf("%d bodies not closed", l.open)
	}
}

func (l *aheadLister) askedFor(token string) chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	ch, ok := l.asked[token]
	if !ok {
		ch = make(chan struct{})
		l.asked[token] = ch
	}
	return ch
}

func (l *aheadLister) ListMetadataWire(ctx context.Context, opts metav1.ListOptions) (io.ReadCloser, error) {
	close(l.askedFor(opts.Continue))
	l.mu.Lock()
	l.requests = append(l.requests, opts.Continue)
	l.mu.Unlock()
	list, err := l.ListMetadata(ctx, opts)
	if err != nil {
		return nil, err
	}
	body, err := l.body(ctx, opts)
	if err != nil {
		return nil, err
	}
	var r io.Reader = bytes.NewReader(body)
	if next := list.Continue; next != "" && !l.decides[opts.Continue] {
		// The page's ListMeta comes first: the next page can be asked for
		// before this one's last byte is read.
		t := l.t
		r = io.MultiReader(bytes.NewReader(body[:len(body)-1]), readerFunc(func(p []byte) (int, error) {
			await(t, l.askedFor(next), "the request of the page after "+opts.Continue+" before its last byte")
			return copy(p, body[len(body)-1:]), io.EOF
		}))
	}
	l.mu.Lock()
	l.open++
	l.mu.Unlock()
	return closer{Reader: r, close: func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.open--
	}}, nil
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

type closer struct {
	io.Reader
	close func()
}

func (c closer) Close() error {
	c.close()
	return nil
}

// A metadata list read from the wire asks for each next page as soon as
// the page before tells its continue token. That page is then still being
// read. The list closes every body it asked for.
func TestRecoveryAsksForTheNextPageAhead(t *testing.T) {
	store := newFakeStore(upod("ns", "a", "ua", "1"), upod("ns", "b", "ub", "2"), upod("ns", "c", "uc", "3"))
	pages := map[string]*metav1.PartialObjectMetadataList{
		"":   page("10", "p1", upod("ns", "a", "ua", "1")),
		"p1": page("10", "p2", upod("ns", "b", "ub", "5")),
		"p2": page("10", "", upod("ns", "c", "uc", "3")),
	}
	lister, wire := newAheadLister(t, pages, upod("ns", "b", "ub", "5"))
	h := startRecovery(t, store, lister, "3", func(o *testOptions, _ *reflectortest.ScriptedLW) {
		o.Recovery.Lister = wire
	})
	store.waitFor(t, "end@10")
	h.stop()
	reflectortest.Equal(t, "store calls after begin", store.callsAfterBegin(), []string{"update ns/b@5", "end@10"})
	wire.check(t, []string{"", "p1", "p2"})
}

// While the first page decides whether to list in full, the next page is
// not asked for. Here the first page shows so much changed that the
// recovery lists in full. A page asked ahead would be encoded, read and
// dropped.
func TestRecoveryAsksAheadOnlyOnceTheFirstPageDecided(t *testing.T) {
	store := newFakeStore(upod("ns", "a", "ua", "1"), upod("ns", "b", "ub", "2"))
	pages := map[string]*metav1.PartialObjectMetadataList{
		"":   page("10", "p1", upod("ns", "a", "ua", "6")),
		"p1": page("10", "", upod("ns", "b", "ub", "2")),
	}
	onServer := []*v1.Pod{upod("ns", "a", "ua", "6"), upod("ns", "b", "ub", "2")}
	lister, wire := newAheadLister(t, pages, onServer...)
	wire.decides = map[string]bool{"": true}
	both := &wireMetaLister{aheadLister: wire, wire: func(int, string, metav1.ListOptions) ([]byte, error) {
		return encodeProtobuf(t, reflectortest.PodList("10", onServer...)), nil
	}}
	h := startRecovery(t, store, lister, "2", func(o *testOptions, _ *reflectortest.ScriptedLW) {
		o.Recovery.Lister = both
	})
	store.waitFor(t, "end@10")
	h.stop()
	reflectortest.Equal(t, "store calls after begin", store.callsAfterBegin(), []string{"update ns/a@6", "end@10"})
	wire.check(t, []string{""})
}

// wireMetaLister is an aheadLister with ListObjectsWire.
type wireMetaLister struct {
	*aheadLister
	wire func(n int, namespace string, opts metav1.ListOptions) ([]byte, error)
}

func (l *wireMetaLister) ListObjectsWire(_ context.Context, namespace string, opts metav1.ListOptions) (io.ReadCloser, func([]byte) (runtime.Object, error), error) {
	body, err := l.wire(0, namespace, opts)
	return wireBody(body), decodeBody, err
}

// cutLister serves metadata pages and full lists from their bytes. Its
// first metadata page fails the read where the item cut begins. A recovery
// must not read that far.
type cutLister struct {
	*metaWireLister
	t    *testing.T
	full []byte
	cut  metav1.PartialObjectMetadata
}

func (l *cutLister) ListMetadataWire(ctx context.Context, opts metav1.ListOptions) (io.ReadCloser, error) {
	body, err := l.body(ctx, opts)
	if err != nil || opts.Continue != "" {
		return io.NopCloser(bytes.NewReader(body)), err
	}
	item, err := l.cut.Marshal()
	if err != nil {
		return nil, err
	}
	at := bytes.Index(body, item)
	if at < 0 {
		l.t.Fatalf("item %s not in the page's bytes", l.cut.Name)
	}
	return io.NopCloser(io.MultiReader(bytes.NewReader(body[:at]), iotest.ErrReader(errors.New("read the first page on after its changes were many")))), nil
}

func (l *cutLister) ListObjectsWire(context.Context, string, metav1.ListOptions) (io.ReadCloser, func([]byte) (runtime.Object, error), error) {
	return wireBody(l.full), decodeBody, nil
}

// A first metadata page read as it arrives stops being read once enough of
// its items changed. Whatever the rest holds, the recovery then lists in
// full. At 30% changed, the rest of a 10,000-item page would only delay the
// full list.
func TestRecoveryDecidesOnTheFirstPageAsItArrives(t *testing.T) {
	stored := []*v1.Pod{upod("ns", "a", "ua", "1"), upod("ns", "b", "ub", "2"), upod("ns", "c", "uc", "3"), upod("ns", "d", "ud", "4")}
	onServer := []*v1.Pod{upod("ns", "a", "ua", "7"), upod("ns", "b", "ub", "8"), upod("ns", "c", "uc", "3"), upod("ns", "d", "ud", "4")}
	pages := map[string]*metav1.PartialObjectMetadataList{
		"":   page("10", "p1", onServer[:3]...),
		"p1": page("10", "", onServer[3:]...),
	}
	lister := &fakeLister{
		meta: func(_ int, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
			return pages[opts.Continue].DeepCopy(), nil
		},
		objects: server("10", onServer...),
	}
	cut := &cutLister{metaWireLister: &metaWireLister{fakeLister: lister}, t: t,
		full: encodeProtobuf(t, reflectortest.PodList("10", onServer...)),
		cut:  metav1.PartialObjectMetadata{ObjectMeta: onServer[2].ObjectMeta},
	}
	store := newFakeStore(stored...)
	h := startRecovery(t, store, lister, "4", func(o *testOptions, _ *reflectortest.ScriptedLW) {
		o.Recovery.Lister = cut
		// Two changed items of a page of recoveryStreamPageSize are many.
		o.Recovery.FirstPageFraction = 2.0 / recoveryStreamPageSize
	})
	store.waitFor(t, "end@10")
	h.stop()
	reflectortest.Equal(t, "store calls after begin", store.callsAfterBegin(), []string{"update ns/a@7", "update ns/b@8", "end@10"})
	h.errs.CheckNone(t)
	if stats := h.obs.Stats(); len(stats) != 1 || !stats[0].FullList {
		t.Errorf("recovery stats %+v, want one recovery, from a full list", stats)
	}
}

// Only the first page decides. Changes counted over several pages are not
// many for one page. Here the first page of 30 holds one change, under
// firstPageFraction. The next two pages hold 250 each, which would be many
// for the first page's limit. The recovery still fetches them after its
// metadata list.
func TestRecoveryDecidesOnTheFirstPageOnly(t *testing.T) {
	var stored, onServer []*v1.Pod
	for i := range 530 {
		name := fmt.Sprintf("p%03d", i)
		stored = append(stored, upod("ns", name, "u"+name, "5"))
		rv := "5"
		if i == 0 || i >= 30 {
			rv = "7"
		}
		onServer = append(onServer, upod("ns", name, "u"+name, rv))
	}
	pages := map[string]*metav1.PartialObjectMetadataList{
		"":   page("10", "p1", onServer[:30]...),
		"p1": page("10", "p2", onServer[30:280]...),
		"p2": page("10", "", onServer[280:]...),
	}
	lister := &fakeLister{
		meta: func(_ int, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
			return pages[opts.Continue].DeepCopy(), nil
		},
		objects: server("10", onServer...),
	}
	store := newFakeStore(stored...)
	h := startRecovery(t, store, lister, "5", func(o *testOptions, _ *reflectortest.ScriptedLW) {
		// Both wire forms: a full list is the recovery's to choose.
		o.Recovery.Lister = &bothWireLister{&metaWireLister{fakeLister: lister}, encodeProtobuf(t, reflectortest.PodList("10", onServer...))}
		o.Recovery.FullListFraction = 2
	})
	store.waitFor(t, "end@10")
	h.stop()
	h.errs.CheckNone(t)
	if stats := h.obs.Stats(); len(stats) != 1 || stats[0].FullList || stats[0].Pages != 3 || stats[0].Fetched != 501 {
		t.Errorf("recovery stats %+v, want one recovery from a metadata list of 3 pages, 501 fetched", stats)
	}
}

// bothWireLister hands over both lists' bytes: full is every full list's.
type bothWireLister struct {
	*metaWireLister
	full []byte
}

func (l *bothWireLister) ListObjectsWire(context.Context, string, metav1.ListOptions) (io.ReadCloser, func([]byte) (runtime.Object, error), error) {
	return wireBody(l.full), decodeBody, nil
}

// Seeded page layouts: whatever the later pages hold, only the first page
// decides whether the recovery lists in full. The fraction makes 3 changed
// items many for the page's limit while it is read, and any changed item
// many for a whole first page followed by more.
func TestRecoveryFirstPageDecidesAlone(t *testing.T) {
	const fraction = 3.0 / recoveryStreamPageSize
	for seed := range int64(40) {
		rng := rand.New(rand.NewPCG(uint64(seed), 0))
		pageCount := 1 + rng.IntN(4)
		pages := map[string]*metav1.PartialObjectMetadataList{}
		var stored, onServer []*v1.Pod
		firstChanged, changed := 0, 0
		for p := range pageCount {
			var items []*v1.Pod
			odds := rng.Float64()
			for range 1 + rng.IntN(8) {
				name := fmt.Sprintf("p%03d", len(onServer))
				rv := "5"
				if rng.Float64() < odds {
					rv = "7"
					changed++
					if p == 0 {
						firstChanged++
					}
				}
				stored = append(stored, upod("ns", name, "u"+name, "5"))
				pod := upod("ns", name, "u"+name, rv)
				onServer, items = append(onServer, pod), append(items, pod)
			}
			next := ""
			if p < pageCount-1 {
				next = fmt.Sprintf("c%d", p+1)
			}
			token := ""
			if p > 0 {
				token = fmt.Sprintf("c%d", p)
			}
			pages[token] = page("10", next, items...)
		}
		wantFull := firstChanged >= 3 || (pageCount > 1 && firstChanged > 0)
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			lister := &fakeLister{
				meta: func(_ int, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
					return pages[opts.Continue].DeepCopy(), nil
				},
				objects: server("10", onServer...),
			}
			store := newFakeStore(stored...)
			h := startRecovery(t, store, lister, "5", func(o *testOptions, _ *reflectortest.ScriptedLW) {
				o.Recovery.Lister = &bothWireLister{&metaWireLister{fakeLister: lister}, encodeProtobuf(t, reflectortest.PodList("10", onServer...))}
				o.Recovery.FirstPageFraction = fraction
				o.Recovery.FullListFraction = 2
			})
			store.waitFor(t, "end@10")
			h.stop()
			h.errs.CheckNone(t)
			stats := h.obs.Stats()
			if len(stats) != 1 || stats[0].FullList != wantFull || stats[0].Fetched != changed {
				t.Errorf("%d pages, %d of %d changed on the first: stats %+v, want a full list %v and %d fetched",
					pageCount, firstChanged, len(pages[""].Items), stats, wantFull, changed)
			}
		})
	}
}

// lister is the Lister of aheadLister's methods.
func (l *aheadLister) lister() *Lister {
	lr := l.metaWireLister.lister()
	lr.ListMetadataWire = l.ListMetadataWire
	return lr
}

// lister is the Lister of wireMetaLister's methods.
func (l *wireMetaLister) lister() *Lister {
	lr := l.aheadLister.lister()
	lr.ListObjectsWire = l.ListObjectsWire
	return lr
}

// lister is the Lister of cutLister's methods.
func (l *cutLister) lister() *Lister {
	lr := l.metaWireLister.lister()
	lr.ListMetadataWire = l.ListMetadataWire
	lr.ListObjectsWire = l.ListObjectsWire
	return lr
}

// lister is the Lister of bothWireLister's methods.
func (l *bothWireLister) lister() *Lister {
	lr := l.metaWireLister.lister()
	lr.ListObjectsWire = l.ListObjectsWire
	return lr
}
