package reflector

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/boltinformer/boltinformer/internal/testing/listrules"
	"github.com/boltinformer/boltinformer/internal/testing/reflectortest"
)

// expiredStatus is what a restarted kube-apiserver sends a watch from a
// version its new watch cache does not hold.
var expiredStatus = metav1.Status{Status: metav1.StatusFailure, Code: http.StatusGone,
	Reason: metav1.StatusReasonExpired, Message: "too old resource version"}

// servedAs answers a list as kube-apiserver serves it (listrules.Of),
// from a server whose newest revision is newest, whose watch cache is at
// cached, and whose etcd still holds every older revision. Exact reads
// are served at their version, continue tokens at the first page's; every
// answer pages items by Limit (continue: "revision/offset"). Each revision
// holds every item, whatever it is.
func servedAs(t *testing.T, newest, cached string, items []*v1.Pod) func(int, metav1.ListOptions) (runtime.Object, error) {
	return func(_ int, opts metav1.ListOptions) (runtime.Object, error) {
		s, err := listrules.Of(opts)
		if err != nil {
			t.Errorf("invalid list %+v: %v", opts, err)
			return nil, err
		}
		at, start := newest, 0
		switch s {
		case listrules.Any, listrules.NotOlderThan:
			at = cached
		case listrules.Exact:
			at = opts.ResourceVersion
		case listrules.Continue:
			rev, off, _ := strings.Cut(opts.Continue, "/")
			at, start = rev, atoi(off)
		}
		end := len(items)
		l := reflectortest.PodList(at)
		if opts.Limit > 0 && start+int(opts.Limit) < end {
			end = start + int(opts.Limit)
			l.Continue = at + "/" + strconv.Itoa(end)
		}
		for _, p := range items[start:end] {
			l.Items = append(l.Items, *p)
		}
		return l, nil
	}
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return n
}

// A relist at the last synced version asks for data no older than it
// (NotOlderThan) when it is paged: by Options.PageSize, or by the default
// page size after a list at "0" came back paginated. kube-apiserver serves
// a version with a limit and no match as an exact read from etcd, which
// returns that old version itself. The watch from it then expires again,
// and the reflector would relist and watch in a loop until compaction
// passes the version, its store stale meanwhile.
func TestPagedRelistAtAVersionIsNotOlderThan(t *testing.T) {
	pods := []*v1.Pod{reflectortest.Pod("a", "1"), reflectortest.Pod("b", "2"), reflectortest.Pod("c", "3"), reflectortest.Pod("d", "4"), reflectortest.Pod("e", "5")}
	for _, tc := range []struct {
		name     string
		pageSize int64
		// zeroPaged: the list at "0" is paginated (the watch cache is off,
		// or the server pages it), so later lists keep the default size.
		zeroPaged bool
		limit     int64
	}{
		{"PageSize", 2, false, 2},
		{"paginated list at 0", 0, true, DefaultPagedListPageSize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// The cold list at "0" is served at 10; the apiserver then
				// restarts, its watch cache at 30, and watches from 10
				// expire.
				list := servedAs(t, "30", "30", pods)
				lw := &reflectortest.ScriptedLW{T: t,
					List: func(n int, opts metav1.ListOptions) (runtime.Object, error) {
						if opts.ResourceVersion == "0" {
							limit := int64(0) // the watch cache ignores it
							if tc.zeroPaged {
								limit = 2
							}
							return servedAs(t, "10", "10", pods)(n, metav1.ListOptions{ResourceVersion: "0", Limit: limit})
						}
						return list(n, opts)
					},
					Watch: func(_ int, opts metav1.ListOptions) (watch.Interface, error) {
						w := watch.NewRaceFreeFake()
						if atoi(opts.ResourceVersion) < 30 {
							w.Error(&expiredStatus)
						}
						return w, nil
					},
				}
				h := newHarness(t, lw.ListWatch(), func(o *Options) { o.PageSize = tc.pageSize })
				stop := runInBubble(h.r)
				time.Sleep(time.Minute)
				synctest.Wait()
				stop()

				// The relist's first request, and the watch from its version.
				var relist []metav1.ListOptions
				for _, o := range lw.ListOpts() {
					if o.Continue == "" && o.ResourceVersion != "0" {
						relist = append(relist, o)
					}
				}
				reflectortest.Equal(t, "the relist's first request", head(relist, 1), []metav1.ListOptions{
					{ResourceVersion: "10", ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, Limit: tc.limit}})
				reflectortest.Equal(t, "relists", len(relist), 1)
				reflectortest.Equal(t, "first watch RVs", head(lw.WatchRVs(), 3), []string{"10", "30"})
				reflectortest.Equal(t, "LastSyncResourceVersion", h.r.LastSyncResourceVersion(), "30")
			})
		})
	}
}
