package recovery

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/boltinformer/boltinformer/internal/testing/reflectortest"
)

// page is a metadata list page at rv of pods, continued by next ("" for
// the last page).
func page(rv, next string, pods ...*v1.Pod) *metav1.PartialObjectMetadataList {
	l := metaList(rv, pods...)
	l.Continue = next
	return l
}

// await waits for ch, failing the test after 5 s.
func await(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Errorf("timed out waiting for %s", what)
	}
}

// A metadata list whose continue token expired is made again in one
// request, at a newer resourceVersion, as client-go's pager does. The diff
// is made against that list alone.
func TestRecoveryListsAgainWhenItsContinueTokenExpired(t *testing.T) {
	store := newFakeStore(upod("ns", "a", "ua", "1"), upod("ns", "b", "ub", "2"))
	lister := &fakeLister{
		meta: func(n int, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
			switch {
			case n == 0:
				return page("10", "p1", upod("ns", "a", "ua", "5")), nil
			case opts.Continue != "":
				return nil, apierrors.NewResourceExpired("continue token expired")
			}
			return metaList("11", upod("ns", "a", "ua", "8"), upod("ns", "b", "ub", "2")), nil
		},
		objects: server("11", upod("ns", "a", "ua", "8")),
	}
	h := startRecovery(t, store, lister, "2", nil)
	store.waitFor(t, "end@11")
	h.stop()
	reflectortest.Equal(t, "fetches", lister.Fetches(), []string{"ns/a@11"})
	reflectortest.Equal(t, "store calls after begin", store.callsAfterBegin(), []string{"update ns/a@8", "end@11"})
}
