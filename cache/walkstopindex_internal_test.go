package cache

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"

	"github.com/boltinformer/boltinformer/internal/testing/poll"
	"github.com/boltinformer/boltinformer/persist"
)

// reviewByLabel indexes Pods by one label's value. Both runs of a test
// make their index function here, so the functions share one Go name and
// the file cannot tell them apart.
func reviewByLabel(label string) cache.IndexFunc {
	return func(obj interface{}) ([]string, error) {
		m, err := meta.Accessor(obj)
		if err != nil {
			return nil, err
		}
		if v, ok := m.GetLabels()[label]; ok {
			return []string{v}, nil
		}
		return nil, nil
	}
}

// A warm start's walk verifies the stored index entries, and index lookups
// wait for it: an entry written by an older index function must never be
// served. A stop ends the walk short of that. The collection stays open
// until the delta loop lets go, and a worker may still read its listers
// meanwhile. Its lookups must then wait and fail as reads of the closed
// collection, not serve the older function's entries.
func TestWarmStartStoppedMidWalkServesNoUnverifiedIndexEntry(t *testing.T) {
	src := fcache.NewFakeControllerSource()
	a, b := setAsidePod("a"), setAsidePod("b")
	a.Labels = map[string]string{"app": "web", "team": "red"}
	b.Labels = map[string]string{"app": "db", "team": "web"}
	src.Add(a)
	src.Add(b)
	f := newStoredFile(t, src)
	f.coldStart(cache.Indexers{"by": reviewByLabel("app")}, 2)

	db := f.open()
	defer db.Close()
	inf := f.informer(db, cache.Indexers{"by": reviewByLabel("team")}) // same name, same Go function name
	held, release := make(chan struct{}), make(chan struct{})
	releaseWalk := sync.OnceFunc(func() { close(release) })
	defer releaseWalk()
	walkStarting = func() { close(held); <-release }
	defer func() { walkStarting = nil }()
	var events setAsideEvents
	if _, err := inf.AddEventHandler(&events); err != nil {
		t.Fatal(err)
	}
	cancel, done := runInformer(inf)
	defer func() { cancel(); <-done }()
	<-held
	d := inf.start.walk.Load()

	// An event held at the delivery lock keeps RunWithContext from closing
	// the collection: the window in which a worker still reads its listers.
	inf.blockDeltas.Lock()
	unlock := sync.OnceFunc(inf.blockDeltas.Unlock)
	defer unlock()
	before := inf.LastSyncResourceVersion()
	a = a.DeepCopy()
	a.Labels["other"] = "x"
	src.Modify(a)
	poll.Until(t, 30*time.Second, "the event queued", func() bool {
		return inf.LastSyncResourceVersion() != before
	})
	cancel()
	releaseWalk()
	<-d.done

	// The lookup waits while the collection is open, then fails as a
	// read of a closed collection does. Served at once, it is stale.
	waiting := make(chan struct{})
	indexLookupWaits = sync.OnceFunc(func() { close(waiting) })
	defer func() { indexLookupWaits = nil }()
	type result struct {
		objs []interface{}
		err  error
	}
	got := make(chan result, 1)
	go func() {
		objs, err := inf.GetIndexer().ByIndex("by", "web")
		got <- result{objs, err}
	}()
	var r result
	select {
	case r = <-got:
	case <-waiting:
		unlock()
		<-done
		r = <-got
	}
	if r.err != nil {
		if !errors.Is(r.err, persist.ErrClosed) {
			t.Fatalf("after a stop mid-walk, ByIndex failed with %v; want the closed collection's error", r.err)
		}
		return
	}
	var names []string
	for _, obj := range r.objs {
		names = append(names, obj.(*corev1.Pod).Name)
	}
	slices.Sort(names)
	if fmt.Sprint(names) != "[b]" {
		unlock()
		t.Fatalf("after a stop mid-walk, ByIndex(by, web) = %v; the index function gives [b] (team=web): the stored entries of the older function were served", names)
	}
}
