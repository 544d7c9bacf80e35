package cache

import (
	"context"
	"slices"
	"strings"
	"sync"
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
	src := fcache.NewFakeControllerSource()
	for _, name := range []string{"a", "b", "c"} {
		src.Add(setAsidePod(name))
	}
	f := newStoredFile(t, src)
	db := f.open()
	defer db.Close()
	inf := f.informer(db, nil)
	var ev setAsideEvents
	reg, err := inf.AddEventHandler(&ev)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	fired := false
	pagedListEnding = func() {
		once.Do(func() {
			fired = true
			if err := inf.keepOnly(context.Background(), func(key string) bool { return key != "ns/a" }); err != nil {
				t.Errorf("setting ns/a aside: %v", err)
			}
		})
	}
	defer func() { pagedListEnding = nil }()
	cancel, done := runInformer(inf)
	defer func() { cancel(); <-done }()
	poll.Until(t, 30*time.Second, "synced with three Pods", func() bool {
		return inf.HasSynced() && reg.HasSynced() && len(inf.GetStore().ListKeys()) == 3
	})
	if !fired {
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
