package cache_test

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/internal/format"
	"github.com/boltinformer/boltinformer/internal/testing/poll"
	"github.com/boltinformer/boltinformer/recovery"
)

// corruptJournal overwrites the first entry of the collection's journal
// with bytes that are no journal entry.
func corruptJournal(t *testing.T, path, collection string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error {
		jb := tx.Bucket(format.CollectionsBucket).Bucket([]byte(collection)).Bucket(format.JournalBucket)
		if jb == nil {
			t.Fatal("the collection has no journal")
		}
		gen, _ := jb.Cursor().First()
		gb := jb.Bucket(gen)
		seq, _ := gb.Cursor().First()
		return gb.Put(seq, []byte{0xff, 0xff, 0xff})
	}); err != nil {
		t.Fatal(err)
	}
}

// withCheckpoint opens checkpoint "h" into *cp and registers h as its
// handler, or a handler acknowledging everything if h is nil; reg, if set,
// receives the registration.
func withCheckpoint(t *testing.T, cp **bcache.Checkpoint, h cache.ResourceEventHandler, reg *cache.ResourceEventHandlerRegistration) func(*bcache.Informer) {
	return func(inf *bcache.Informer) {
		c, err := inf.Checkpoint("h")
		if err != nil {
			t.Fatal(err)
		}
		*cp = c
		if h == nil {
			h = ackingHandler{recordingHandler{&events{}}, t, c}
		}
		r, err := c.AddEventHandler(h)
		if err != nil {
			t.Fatal(err)
		}
		if reg != nil {
			*reg = r
		}
	}
}

// A journal entry that cannot be read does not make the collection
// impossible to open. Otherwise an informer constructor would fail on every
// restart until a person deletes the file. The journal is set aside, and
// the collection keeps what its trees hold. The informer lists before it is
// synced. The set-aside is reported and counted as a read error.
func TestWarmStartCorruptJournalRelists(t *testing.T) {
	f := newTestFile(t)
	src := podSource("a", "b", "c")
	populate(t, f, src, bcache.Persistence{}, nil, nil) // the list: into the trees
	r := startInformer(t, f, noWatchList{src}, bcache.Persistence{}, nil, nil)
	r.synced(t)
	src.Modify(pod("ns", "a", "", map[string]string{"v": "2"}))
	src.Delete(pod("ns", "c", "", nil))
	poll.Until(t, 10*time.Second, "watch events", func() bool { return eq(storeState(r.inf.GetStore()), sourceState(t, src)) })
	r.stop()
	if err := f.db.Close(); err != nil { // the events: into the journal
		t.Fatal(err)
	}
	corruptJournal(t, f.path, "pods")
	f.open()

	r = startInformer(t, f, noWatchList{src}, bcache.Persistence{}, nil, nil)
	r.synced(t)
	if got, want := storeState(r.inf.GetStore()), sourceState(t, src); !eq(got, want) {
		t.Errorf("synced with %v, want the source's %v", got, want)
	}
	select {
	case err := <-r.errs:
		if !strings.Contains(err.Error(), "journal") {
			t.Errorf("reported %v, want the journal's damage", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the journal's damage was not reported")
	}
	if starts := r.starts(t); len(starts) == 0 || starts[0] == "resumed" {
		t.Errorf("reflector starts %v: the informer resumed instead of listing", starts)
	}
	// The next start finds a sound collection: the list cleared the mark.
	r.stop()
	f.reopen()
	r = startInformer(t, f, noWatchList{src}, bcache.Persistence{}, nil, nil)
	r.synced(t)
	if got, want := storeState(r.inf.GetStore()), sourceState(t, src); !eq(got, want) {
		t.Errorf("after another restart %v, want %v", got, want)
	}
}

// A pod was created and acknowledged while its collection's journal held
// it, and deleted while the program was down. Its deletion is not lost
// with the journal. The set-aside leaves a tombstone for the checkpoint.
// Its handler is told of the deletion after the list, which lacks the pod.
func TestJournalSetAsideTellsACheckpointOfDeletions(t *testing.T) {
	f := newTestFile(t)
	src := podSource("a", "b", "c")
	populate(t, f, src, bcache.Persistence{}, nil, nil) // the list: into the trees
	var cp *bcache.Checkpoint
	r := startInformer(t, f, noWatchList{src}, bcache.Persistence{}, nil, withCheckpoint(t, &cp, nil, nil))
	r.synced(t)
	poll.Until(t, 10*time.Second, "acknowledged", func() bool { return cp.Len() == 3 })
	src.Modify(pod("ns", "a", "", map[string]string{"v": "2"})) // the journal's first entry
	acked := func(key string, initial bool) func() bool {
		return func() bool {
			obj, ok, _ := r.inf.GetStore().GetByKey(key)
			return ok && obj.(*corev1.Pod).Labels["v"] == map[bool]string{true: "", false: "2"}[initial] && cp.Acknowledged(obj)
		}
	}
	poll.Until(t, 10*time.Second, "a's update acknowledged", acked("ns/a", false))
	src.Add(pod("ns", "aa", "", nil)) // only in the journal
	poll.Until(t, 10*time.Second, "aa acknowledged", acked("ns/aa", true))
	r.stop()
	if err := f.db.Close(); err != nil { // the events and acknowledgements: into the file
		t.Fatal(err)
	}
	corruptJournal(t, f.path, "pods")
	src.Delete(pod("ns", "aa", "", nil)) // while the program is down
	f.open()

	h := &events{}
	var reg cache.ResourceEventHandlerRegistration
	r = startInformer(t, f, noWatchList{src}, bcache.Persistence{}, nil, withCheckpoint(t, &cp, h.handler(), &reg))
	r.synced(t)
	select {
	case <-reg.HasSyncedChecker().Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the checkpoint handler did not sync")
	}
	if got := h.list(); !slices.Contains(got, "delete tombstone:ns/aa") {
		t.Errorf("after the journal was set aside, the checkpoint handler got %v, want aa's deletion", got)
	}
}

// removeJournal deletes the collection's journal bucket.
func removeJournal(t *testing.T, path, collection string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(format.CollectionsBucket).Bucket([]byte(collection)).DeleteBucket(format.JournalBucket)
	}); err != nil {
		t.Fatal(err)
	}
}

// A collection whose journal bucket is missing lost the changes only the
// journal held, though its resourceVersion is past them. Resumed as it
// stood, it lacked aa for good. A checkpoint's handler that had
// acknowledged such a key was then told of its deletion while it lived
// (the simulation's seed 176). The informer lists it instead, and the
// handler is told nothing of aa.
func TestMissingJournalIsListedNotToldAsDeletions(t *testing.T) {
	f := newTestFile(t)
	src := podSource("a", "b", "c")
	populate(t, f, src, bcache.Persistence{}, nil, nil) // the list: into the trees
	var cp *bcache.Checkpoint
	r := startInformer(t, f, noWatchList{src}, bcache.Persistence{}, nil, withCheckpoint(t, &cp, nil, nil))
	r.synced(t)
	poll.Until(t, 10*time.Second, "acknowledged", func() bool { return cp.Len() == 3 })
	src.Add(pod("ns", "aa", "", nil)) // only in the journal
	poll.Until(t, 10*time.Second, "aa acknowledged", func() bool {
		obj, ok, _ := r.inf.GetStore().GetByKey("ns/aa")
		return ok && cp.Acknowledged(obj)
	})
	r.stop()
	if err := f.db.Close(); err != nil { // the event and acknowledgement: into the file
		t.Fatal(err)
	}
	removeJournal(t, f.path, "pods")
	f.open()

	h := &events{}
	var reg cache.ResourceEventHandlerRegistration
	r = startInformer(t, f, noWatchList{src}, bcache.Persistence{}, nil, withCheckpoint(t, &cp, h.handler(), &reg))
	r.synced(t)
	select {
	case <-reg.HasSyncedChecker().Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the checkpoint handler did not sync")
	}
	if got, want := storeState(r.inf.GetStore()), sourceState(t, src); !eq(got, want) {
		t.Errorf("synced with %v, want the source's %v", got, want)
	}
	if got := h.list(); slices.Contains(got, "delete tombstone:ns/aa") {
		t.Errorf("the checkpoint handler got %v: told of the deletion of aa, which lives", got)
	}
}

// A key set aside after a read error is owed to a checkpoint's handler as a
// tombstone, unless the handler hears of the key again before the relist is
// applied. Here c is set aside, then recreated and deleted through the first
// watch. The handler was told of c's deletion at its newest state. The
// set-aside's tombstone, with c's older state, is not given after it.
func TestSetAsideTombstoneIsNotRetoldAfterANewerDeletion(t *testing.T) {
	f := newTestFile(t)
	src := podSource("a", "b", "c")
	var cp *bcache.Checkpoint
	r := startInformer(t, f, noWatchList{src}, bcache.Persistence{}, nil, withCheckpoint(t, &cp, nil, nil))
	r.synced(t)
	poll.Until(t, 10*time.Second, "acknowledged", func() bool { return cp.Len() == 3 })
	r.stop()
	if err := f.db.Close(); err != nil {
		t.Fatal(err)
	}
	corruptRecord(t, f.path, "pods", "ns/b") // the walk stops at b: c is set aside
	f.open()

	h := &events{}
	deleted := func() bool {
		return slices.ContainsFunc(h.list(), func(e string) bool { return strings.HasPrefix(e, "delete ns/c@") })
	}
	setup := func(inf *bcache.Informer) {
		withCheckpoint(t, &cp, h.handler(), nil)(inf)
		onSetAside(func(*bcache.Informer) {
			src.Modify(pod("ns", "c", "", map[string]string{"v": "2"}))
			src.Delete(pod("ns", "c", "", nil))
			poll.Until(t, 10*time.Second, "c's deletion through the first watch", deleted)
		})(inf)
	}
	r = startInformer(t, f, noWatchList{src}, bcache.Persistence{}, nil, setup)
	r.synced(t)
	poll.Until(t, 30*time.Second, "the relist applied", func() bool { return eq(storeState(r.inf.GetStore()), sourceState(t, src)) })
	src.Add(pod("ns", "d", "", nil)) // applied after any retelling
	poll.Until(t, 10*time.Second, "d's add", func() bool {
		return slices.ContainsFunc(h.list(), func(e string) bool { return strings.HasPrefix(e, "add ns/d@") })
	})
	got := h.list()
	i := slices.IndexFunc(got, func(e string) bool { return strings.HasPrefix(e, "delete ns/c@") })
	if slices.Contains(got[i+1:], "delete tombstone:ns/c") {
		t.Errorf("the checkpoint handler got %v: c's set-aside tombstone after its newer deletion", got)
	}
}

// A checkpoint's handler that joins while a warm start's walk runs is
// given the unacknowledged stored objects, read without waiting for the
// walk. If the walk then fails and sets keys aside, a key the handler was
// given and the relist lacks must still reach it as a deletion. Here c,
// never acknowledged, is deleted while the program is down and set aside
// after b's record cannot be read.
func TestCheckpointJoiningDuringAFailingWalkIsToldOfSetAsideDeletions(t *testing.T) {
	f := newTestFile(t)
	src := podSource("a", "b", "c")
	var cp *bcache.Checkpoint
	openCheckpoint := func(inf *bcache.Informer) {
		var err error
		if cp, err = inf.Checkpoint("h"); err != nil {
			t.Fatal(err)
		}
	}
	notC := func(obj interface{}) {
		if k, _ := cache.MetaNamespaceKeyFunc(obj); k != "ns/c" {
			if err := cp.Ack(obj); err != nil {
				t.Error(err)
			}
		}
	}
	r := startInformer(t, f, noWatchList{src}, bcache.Persistence{}, nil, withCheckpoint(t, &cp, cache.ResourceEventHandlerFuncs{AddFunc: notC}, nil))
	r.synced(t)
	poll.Until(t, 10*time.Second, "a and b acknowledged", func() bool { return cp.Len() == 2 })
	r.stop()
	if err := f.db.Close(); err != nil {
		t.Fatal(err)
	}
	corruptRecord(t, f.path, "pods", "ns/b")
	f.open()
	src.Delete(pod("ns", "c", "", nil)) // while the program is down, beyond the watch window

	h := &events{}
	t.Cleanup(bcache.SetWalkHooks(func() {
		joined := make(chan struct{})
		go func() { // the walk's own goroutine must not join
			defer close(joined)
			if _, err := cp.AddEventHandler(h.handler()); err != nil {
				t.Error(err)
			}
		}()
		<-joined
	}, nil))
	r = startInformer(t, f, &goneOnce{noWatchList: noWatchList{src}}, bcache.Persistence{}, nil, openCheckpoint)
	r.synced(t)
	poll.Until(t, 30*time.Second, "the relist applied", func() bool { return eq(storeState(r.inf.GetStore()), sourceState(t, src)) })
	src.Add(pod("ns", "d", "", nil)) // applied after any retelling
	poll.Until(t, 10*time.Second, "d's add", func() bool {
		return slices.ContainsFunc(h.list(), func(e string) bool { return strings.HasPrefix(e, "add ns/d@") })
	})
	got := h.list()
	if !slices.ContainsFunc(got, func(e string) bool { return strings.HasPrefix(e, "add ns/c@") }) {
		t.Fatalf("the checkpoint handler got %v, not c: the join did not come before the set-aside", got)
	}
	if !slices.Contains(got, "delete tombstone:ns/c") {
		t.Errorf("the checkpoint handler got %v: given c, never told of its deletion", got)
	}
}

// goneOnce answers the first watch with 410 Gone, as an apiserver does
// once the resumed resourceVersion left its watch window.
type goneOnce struct {
	noWatchList
	once sync.Once
}

func (g *goneOnce) Watch(options metav1.ListOptions) (watch.Interface, error) {
	gone := false
	g.once.Do(func() { gone = true })
	if gone {
		return nil, apierrors.NewResourceExpired("too old resource version")
	}
	return g.noWatchList.Watch(options)
}

// A checkpoint's tombstone left by a journal set-aside is stale once its
// handler has been given a newer state of the key and that state's
// deletion. It is not given after them. Here aa's acknowledgement at 4
// becomes a tombstone when the journal is set aside. A recovery that does
// not finish stores aa@5, the same object, not acknowledged. The next
// start owes a list. It hands out aa@5 and then aa's deletion, which its
// list finds. The handler must not then be told of aa's deletion at 4.
func TestCheckpointTombstoneIsNotRetoldAfterANewerDeletion(t *testing.T) {
	f := newTestFile(t)
	src := podSource("a", "b") // @1, @2
	populate(t, f, src, bcache.Persistence{}, nil, nil)
	var cp *bcache.Checkpoint
	r := startInformer(t, f, noWatchList{src}, bcache.Persistence{}, nil, withCheckpoint(t, &cp, nil, nil))
	r.synced(t)
	src.Modify(pod("ns", "a", "", map[string]string{"v": "2"})) // a@3: the journal's first entry
	acked := func(key, rv string) func() bool {
		return func() bool { return cp.Acknowledged(pod("ns", key, rv, nil)) }
	}
	poll.Until(t, 10*time.Second, "a@3 acknowledged", acked("a", "3"))
	src.Add(pod("ns", "aa", "", nil)) // aa@4: only in the journal
	poll.Until(t, 10*time.Second, "aa@4 acknowledged", acked("aa", "4"))
	r.stop()
	if err := f.db.Close(); err != nil {
		t.Fatal(err)
	}
	corruptJournal(t, f.path, "pods")                            // aa's acknowledgement becomes a tombstone
	src.Modify(pod("ns", "aa", "", map[string]string{"v": "2"})) // aa@5
	src.Modify(pod("ns", "b", "", map[string]string{"v": "2"}))  // b@6
	f.open()

	// A recovery fetches a@3 and aa@5, and is stopped while b's fetch
	// hangs: the collection still owes a list, and holds aa@5.
	lister := &laggingLister{sourceLister: &sourceLister{src: src}, stuck: "b"}
	first := &events{}
	r = startInformerOpts(t, f, noWatchList{src}, bcache.InformerOptions{
		Recovery: &recovery.Options{Lister: lister.lister(), Workers: 1, Tuning: oneByOne},
	}, withCheckpoint(t, &cp, first.handler(), nil))
	poll.Until(t, 30*time.Second, "aa@5 applied", func() bool {
		return slices.Contains(first.list(), "add ns/aa@5 initial=false")
	})
	r.stop()
	src.Delete(pod("ns", "aa", "", nil)) // @7, while the program is down
	f.reopen()

	lister.stuck = ""
	h := &tombstoneRecorder{}
	var reg cache.ResourceEventHandlerRegistration
	r = startInformerOpts(t, f, noWatchList{src}, bcache.InformerOptions{
		Recovery: &recovery.Options{Lister: lister.lister(), Workers: 1, Tuning: oneByOne},
	}, withCheckpoint(t, &cp, h, &reg))
	r.synced(t)
	select {
	case <-reg.HasSyncedChecker().Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the checkpoint handler did not sync")
	}
	src.Add(pod("ns", "c", "", nil)) // applied after any tombstone
	poll.Until(t, 10*time.Second, "c's add", func() bool {
		return slices.ContainsFunc(h.list(), func(e string) bool { return strings.HasPrefix(e, "add ns/c@") })
	})
	r.stop()
	got := h.list()
	i := slices.Index(got, "delete tombstone:ns/aa (stored ns/aa@5)")
	if i < 0 || slices.ContainsFunc(got[i+1:], func(e string) bool { return strings.HasPrefix(e, "delete tombstone:ns/aa") }) {
		t.Errorf("the checkpoint handler got %v: want aa's deletion at 5, and no older tombstone after it", got)
	}
}
