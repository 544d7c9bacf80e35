package cache

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boltinformer/boltinformer/internal/testing/poll"
	fcache "k8s.io/client-go/tools/cache/testing"
)

// A cold start's paged list hands each page to the handlers as initial
// adds. A set-aside before its end fails ListDone, and the reflector lists
// again through the queue. The handlers were given the whole list, so that
// list is not the initial list. Each key gets one initial add, as with
// client-go. A key set aside that the handlers held comes back as a second
// add, OnAdd(obj, false): its stored state is gone, so no update can be
// made of it (setaside.go).
func TestPagedListEndFailedGivesOneInitialAdd(t *testing.T) {
	inf := pagedInformer(t)
	var ev setAsideEvents
	reg, err := inf.AddEventHandler(&ev)
	if err != nil {
		t.Fatal(err)
	}
	fired := setAsideAtPagedEnd(t, inf)
	cancel, done := runInformer(inf)
	defer func() { cancel(); <-done }()
	poll.Until(t, 30*time.Second, "synced with three Pods", func() bool {
		return inf.HasSynced() && reg.HasSynced() && len(inf.GetStore().ListKeys()) == 3
	})
	if !fired.Load() {
		t.Fatal("the paged list's end was not reached")
	}
	got := ev.list()
	for _, key := range []string{"ns/a", "ns/b", "ns/c"} {
		adds := slices.DeleteFunc(slices.Clone(got), func(s string) bool { return !strings.HasPrefix(s, "add "+key+"@") })
		initial := slices.DeleteFunc(slices.Clone(adds), func(s string) bool { return !strings.HasSuffix(s, "initial=true") })
		if len(initial) != 1 {
			t.Errorf("%s: %d initial adds %v, client-go gives one; all calls: %v", key, len(initial), initial, got)
		}
		if key != "ns/a" && len(adds) != 1 {
			t.Errorf("%s, not set aside: %d adds %v, want one; all calls: %v", key, len(adds), adds, got)
		}
	}
}

// A cold start stores its list a page at a time, and its end stores the
// list's resourceVersion, clearing the must-list mark. A set-aside after
// the pages were stored drops keys the list brought. The end must not then
// pay the debt or clear the mark, or the store and the file would lack the
// keys with nothing owed. It fails instead, and the next list reconciles.
func TestPagedListEndDoesNotPayForASetAside(t *testing.T) {
	inf := pagedInformer(t)
	setAsideAtPagedEnd(t, inf)
	cancel, done := runInformer(inf)
	defer func() { cancel(); <-done }()
	poll.Until(t, 30*time.Second, "synced", inf.HasSynced)
	if got := inf.store.ListKeys(); len(got) != 3 {
		if !inf.gate.owes() {
			t.Errorf("synced after a set-aside during the paged list's end: the store owes no list, but holds %v of ns/a, ns/b and ns/c", got)
		}
		if !inf.persistent.coll.MustList() {
			t.Errorf("synced after a set-aside during the paged list's end: the file has no must-list mark, but holds %v", got)
		}
	}
	poll.Until(t, 30*time.Second, "the store to hold the source's three Pods", func() bool {
		return len(inf.GetStore().ListKeys()) == 3
	})
}

// pagedInformer makes a cold informer of three Pods, ns/a to ns/c, on a
// new file. Its first list is received in pages.
func pagedInformer(t *testing.T) *Informer {
	src := fcache.NewFakeControllerSource()
	for _, name := range []string{"a", "b", "c"} {
		src.Add(setAsidePod(name))
	}
	f := newStoredFile(t, src)
	db := f.open()
	t.Cleanup(func() { db.Close() })
	return f.informer(db, nil)
}

// setAsideAtPagedEnd sets ns/a aside once, as inf's paged list begins its
// end. The result says whether it did.
func setAsideAtPagedEnd(t *testing.T, inf *Informer) *atomic.Bool {
	var fired atomic.Bool
	var once sync.Once
	pagedListEnding = func() {
		once.Do(func() {
			fired.Store(true)
			if err := inf.keepOnly(context.Background(), func(key string) bool { return key != "ns/a" }); err != nil {
				t.Errorf("setting ns/a aside: %v", err)
			}
		})
	}
	t.Cleanup(func() { pagedListEnding = nil })
	return &fired
}
