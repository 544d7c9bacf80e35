package recovery

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/boltinformer/boltinformer/internal/poll"
	"github.com/boltinformer/boltinformer/reflector"
)

// reflector.CatchUp (4b34af1): "Only a consistent list (at "") counts: it
// is a read made after the start, at or past any read Target got before."
// A recovery reports the list Hooks.Listed gave (the informer's proof
// list) as listed at "", so it settles the catch-up. But that list was
// taken when the informer started, possibly before the short watch's
// limit=1 read gave Target its version: it is not at or past that read.
//
// Here the first short watch's read gives Target 20, then the watch is
// answered 410 in its stream (an apiserver restart), and the recovery
// takes the given list, made at 9. The catch-up is settled on it: the
// watch from 9 is an ordinary one (minutes long), while the store, at 9,
// has not reached the target 20. Before 4b34af1 the given list did not
// settle anything and the short watches went on, so the bookmark brought
// the store to the target within a second; now the informer waits for an
// event or the apiserver's once-a-minute bookmark.
func TestGivenListOlderThanTheTargetDoesNotEndTheShortWatches(t *testing.T) {
	store := newRecoveryStore(upod("ns", "a", "ua", "1"))
	lister := &fakeLister{
		meta: func(int, metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
			return metaList("9", upod("ns", "a", "ua", "1")), nil
		},
		objects: server("9"),
	}
	targets := make(chan string, 1)
	watchers := make(chan *watch.RaceFreeFakeWatcher, 10)
	h := startRecovery(t, store, lister, "", func(o *Options, lw *fakeLW) {
		o.ResumeResourceVersion = "2"
		o.CatchUp = &reflector.CatchUp{Done: make(chan struct{}), Target: func(rv string) { targets <- rv }}
		// The informer's proof list, a consistent read taken at its start.
		o.Recovery.Listed = func(context.Context) *Listing {
			return &Listing{ResourceVersion: "9", Pages: 1, Versions: map[string]Version{"ns/a": {UID: "ua", ResourceVersion: "1"}}}
		}
		lw.list = func(_ int, opts metav1.ListOptions) (runtime.Object, error) {
			if opts.Limit == 1 && opts.ResourceVersion == "" {
				return podList("20"), nil // the short watch's consistent read
			}
			return nil, fmt.Errorf("unexpected list %+v", opts)
		}
		lw.watch = func(int, metav1.ListOptions) (watch.Interface, error) {
			w := watch.NewRaceFreeFake()
			watchers <- w
			return w, nil
		}
	})
	defer h.stop()

	next := func(what string) *watch.RaceFreeFakeWatcher {
		t.Helper()
		select {
		case w := <-watchers:
			return w
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s", what)
			return nil
		}
	}
	first := next("first watch")
	select {
	case rv := <-targets:
		if rv != "20" {
			t.Fatalf("target %q, want 20", rv)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the short watch's read gave no target")
	}
	first.Error(&metav1.Status{Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonExpired, Message: "too old resource version: 2 (15)"})
	next("watch after the recovery")
	store.waitFor(t, "end@9")

	opts := h.lw.WatchOpts()
	if len(opts) < 2 {
		t.Fatalf("watches %v", h.lw.WatchRVs())
	}
	got := opts[1]
	if got.ResourceVersion != "9" || got.TimeoutSeconds == nil {
		t.Fatalf("watch after the recovery: %+v", got)
	}
	if s := *got.TimeoutSeconds; s != int64(reflector.DefaultCatchUpWatchTimeout/time.Second) {
		t.Errorf("the watch from the given list's 9 has timeoutSeconds=%d: the catch-up was settled by a list older than its target 20, "+
			"and the store waits for an ordinary watch's event or bookmark; want a short watch (%d s) while the store is short of the target",
			s, int64(reflector.DefaultCatchUpWatchTimeout/time.Second))
	}
}

// CatchUp: "If MaxWatches short watches have ended and Done is still open
// (the server sends no bookmarks ...), the reflector relists with a
// consistent read at "" (cause CauseRelistCatchUp), which is at or after
// the read's version: catching up never waits on the server
// indefinitely." With a recovery, that relist is the recovery's, and its
// metadata list at "" is the list Hooks.Listed gives when there is one:
// the informer's proof list, taken at the start, before the reads. Here
// the reads give the target 20, two short watches close without a
// bookmark, and the relist at "" recovers from the given list at 9
// without asking the server: the store ends at 9, the catch-up is
// settled (the next watch is an ordinary one), and on a server that sends
// no bookmarks the informer waits for an event at 20 or later, which a
// quiet collection never sends.
func TestRelistAfterMaxWatchesIsAtOrAfterTheRead(t *testing.T) {
	store := newRecoveryStore(upod("ns", "a", "ua", "1"))
	lister := &fakeLister{
		meta: func(int, metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
			return metaList("25", upod("ns", "a", "ua", "1")), nil // a list made now
		},
		objects: server("25"),
	}
	targets := make(chan string, 1)
	watchers := make(chan *watch.RaceFreeFakeWatcher, 10)
	h := startRecovery(t, store, lister, "", func(o *Options, lw *fakeLW) {
		o.ResumeResourceVersion = "2"
		o.CatchUp = &reflector.CatchUp{Done: make(chan struct{}), MaxWatches: 2, Target: func(rv string) { targets <- rv }}
		o.Recovery.Listed = func(context.Context) *Listing {
			return &Listing{ResourceVersion: "9", Pages: 1, Versions: map[string]Version{"ns/a": {UID: "ua", ResourceVersion: "1"}}}
		}
		lw.list = func(_ int, opts metav1.ListOptions) (runtime.Object, error) {
			if opts.Limit == 1 && opts.ResourceVersion == "" {
				return podList("20"), nil
			}
			return nil, fmt.Errorf("unexpected list %+v", opts)
		}
		lw.watch = func(int, metav1.ListOptions) (watch.Interface, error) {
			w := watch.NewRaceFreeFake()
			watchers <- w
			return w, nil
		}
	})
	defer h.stop()
	next := func(what string) *watch.RaceFreeFakeWatcher {
		t.Helper()
		select {
		case w := <-watchers:
			return w
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s", what)
			return nil
		}
	}
	first := next("first watch")
	select {
	case <-targets:
	case <-time.After(10 * time.Second):
		t.Fatal("the short watch's read gave no target")
	}
	first.Stop() // the server's timeout, no bookmark
	next("second short watch").Stop()
	next("watch after the relist")
	var end string
	poll.Until(t, 10*time.Second, "the recovery's end", func() bool {
		for _, c := range store.Calls() {
			if strings.HasPrefix(c, "end@") {
				end = c
				return true
			}
		}
		return false
	})

	calls := store.Calls()
	if end != "end@25" {
		t.Errorf("the relist at \"\" after MaxWatches ended the recovery with %q (store calls %v), metadata lists %d: "+
			"it recovered from the given list at 9, older than the read's 20, and asked the server nothing; want a list at or after 20",
			end, calls, len(lister.MetaOpts()))
	}
	if opts := h.lw.WatchOpts(); len(opts) >= 3 && opts[2].TimeoutSeconds != nil && *opts[2].TimeoutSeconds != int64(reflector.DefaultCatchUpWatchTimeout/time.Second) {
		t.Logf("and the catch-up is settled: the watch from %s has timeoutSeconds=%d", opts[2].ResourceVersion, *opts[2].TimeoutSeconds)
	}
}
