package recovery

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// prefixCutMetaLister is a metaWireLister whose first metadata page
// arrives with only its first n bytes: a connection that closed right
// after the response's headers (n = 0), or inside the protobuf prefix.
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
// whole (recovermetadata.go: "A body that is cut short ... is asked for
// again and decoded"), and a stream cut short is never a bare io.EOF
// (internal/wire: "A stream cut short anywhere is ErrMalformed wrapping
// io.ErrUnexpectedEOF, never a bare io.EOF, which a reflector's error
// handler takes for a normal close"). That holds for a page cut between
// two items (TestRecoveryAsksAgainForACutPage), but not for one cut
// before or inside the 4-byte protobuf prefix: metadataPage then takes the
// body for JSON, and fails the whole recovery with a JSON error. For an
// empty body that error wraps io.EOF, which the reflector's default error
// handler (errors.Is(err, io.EOF): "watch closed normally") drops
// without a word.
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
			store := newRecoveryStore(stored...)
			h := startRecovery(t, store, lister, "3", func(o *Options, _ *fakeLW) { o.Recovery.Lister = cut })
			store.waitFor(t, "end@10")
			h.stop()
			equal(t, "store calls", store.Calls(), want)
			for _, err := range h.errs.Errors() {
				if errors.Is(err, io.EOF) {
					t.Errorf("a cut page reported as an error wrapping io.EOF, which the default error handler drops as a normal close: %v", err)
				}
			}
			noErrors(t, &harness{errs: h.errs})
			if n := len(h.obs.Stats()); n != 1 {
				t.Errorf("recovered %d times, want once (the cut page asked for again)", n)
			}
		})
	}
}

// The same for a page of a full list (wirePage: "A page that turns out
// not to be that list once partly read ... is asked for again and decoded
// whole"; f9caf6b: "A full list's page that does not read as the layout
// (ErrMalformed), including one cut short, is asked for again"): a body
// cut before or inside its 4-byte prefix is taken for JSON and decoded
// as it is, and the whole recovery fails on the decoder's error.
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
			store := newRecoveryStore(stored...)
			h := startRecovery(t, store, nil, "3", func(o *Options, _ *fakeLW) { o.Recovery.Lister = lister })
			store.waitFor(t, "end@10")
			h.stop()
			equal(t, "store calls", store.Calls(), want)
			noErrors(t, &harness{errs: h.errs})
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
