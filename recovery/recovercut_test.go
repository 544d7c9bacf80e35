package recovery

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// cutBetweenItems cuts body, a list with item among its items, just
// before that item's field: between two fields of the list message, where
// a reader that takes the stream's end for the message's would see a list
// without it.
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

// A page whose body ends early between two items — a connection that
// closed mid-response — is a failed page, which the recovery asks for
// again and reads whole: a metadata page, and a page of a full list. It
// is never read as a shorter list, nor as a stream that closed normally.
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
		store := newRecoveryStore(stored...)
		h := startRecovery(t, store, lister, "3", func(o *Options, _ *fakeLW) { o.Recovery.Lister = cut })
		store.waitFor(t, "end@10")
		h.stop()
		equal(t, "store calls", store.Calls(), want)
		equal(t, "metadata page requests", len(lister.MetaOpts()), 2)
		noErrors(t, &harness{errs: h.errs})
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
		store := newRecoveryStore(stored...)
		h := startRecovery(t, store, nil, "3", func(o *Options, _ *fakeLW) { o.Recovery.Lister = lister })
		store.waitFor(t, "end@10")
		h.stop()
		equal(t, "store calls", store.Calls(), want)
		equal(t, "full list page requests", len(lister.WireOpts()), 2)
		noErrors(t, &harness{errs: h.errs})
		if n := len(h.obs.Stats()); n != 1 {
			t.Errorf("recovered %d times, want once", n)
		}
	})
}
