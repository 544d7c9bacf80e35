package cache

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"

	"github.com/boltinformer/boltinformer/internal/testing/poll"
)

type setAsideNoWatchList struct{ *fcache.FakeControllerSource }

func (setAsideNoWatchList) IsWatchListSemanticsUnSupported() bool { return true }

// setAsideEvents records handler calls as "add ns/b@7 initial=false" etc.
type setAsideEvents struct {
	mu  sync.Mutex
	got []string
}

func (e *setAsideEvents) add(s string) { e.mu.Lock(); e.got = append(e.got, s); e.mu.Unlock() }
func (e *setAsideEvents) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.got...)
}

func setAsideEventKey(obj interface{}) string {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return "tombstone:" + d.Key
	}
	k, _ := cache.MetaNamespaceKeyFunc(obj)
	return k + "@" + obj.(metav1.Object).GetResourceVersion()
}

func (e *setAsideEvents) OnAdd(obj interface{}, initial bool) {
	e.add(fmt.Sprintf("add %s initial=%v", setAsideEventKey(obj), initial))
}
func (e *setAsideEvents) OnUpdate(old, obj interface{}) {
	e.add(fmt.Sprintf("update %s -> %s", setAsideEventKey(old), setAsideEventKey(obj)))
}
func (e *setAsideEvents) OnDelete(obj interface{}) { e.add("delete " + setAsideEventKey(obj)) }

func setAsidePod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
}

// AddIndexers' loop (setaside.go) sets aside the keys a failed build named,
// "and a record written since decodes, so the loop ends". Between the build
// and the set-aside nothing holds the delta loop back, so a watch event may
// replace the unreadable record with a readable one meanwhile. A set-aside
// that deleted that fresh record by key would make the informer relist an
// object it holds. The relist would bring it back as an add to handlers
// that were already given it, with no deletion between. client-go never
// hands a handler two adds of one key in a row.
//
// The interleaving is forced through the seam the informer itself uses
// (Indexer.onUnreadable): the wrapper lets the walk go on and the watch
// event land, then calls the informer's own setAsideUnreadable. Every step
// is one the informer's goroutines take freely in that order.
func TestAddIndexersSetAsideKeepsARecordWrittenAfterTheBuild(t *testing.T) {
	src := fcache.NewFakeControllerSource()
	for _, n := range []string{"a", "b", "c"} {
		src.Add(setAsidePod(n))
	}
	f := newStoredFile(t, src)
	f.coldStart(nil, 3)
	f.damage("ns/b")

	// The warm start's walk waits, so that AddIndexers meets ns/b first.
	walking, release := make(chan struct{}), make(chan struct{})
	releaseWalk := sync.OnceFunc(func() { close(release) })
	walkStarting = func() { close(walking); <-release }
	defer func() { walkStarting = nil }()
	defer releaseWalk()

	db := f.open()
	defer db.Close()
	inf := f.informer(db, nil)
	ev := &setAsideEvents{}
	reg, err := inf.AddEventHandler(ev)
	if err != nil {
		t.Fatal(err)
	}
	setAside := inf.setAsideUnreadable
	var b2 string
	inf.persistent.onUnreadable(func(keys []string, why error) error {
		if b2 == "" {
			// Between the failed build and the set-aside, a watch event
			// replaces ns/b with a readable record, and the walk goes on
			// (it meets ns/b and ends). The event is handed out ahead of
			// the walk first. A walk that met ns/b before would relist,
			// and the relist waits for life.mu, which AddIndexers
			// holds, so the event would never land. Applying it waits
			// for the walk's end (readerror.go), which is why the walk
			// goes on.
			p := setAsidePod("b")
			p.Labels = map[string]string{"v": "2"}
			src.Modify(p)
			poll.Until(t, 30*time.Second, "the update of ns/b handed out ahead of the walk", func() bool {
				return handedOutAhead(inf, "ns/b")
			})
			releaseWalk()
			poll.Until(t, 30*time.Second, "the update of ns/b applied", func() bool {
				obj, ok, err := inf.persistent.getOnce("ns/b")
				if err != nil || !ok {
					return false
				}
				b2 = obj.(*corev1.Pod).ResourceVersion
				return obj.(*corev1.Pod).Labels["v"] == "2"
			})
		}
		return setAside(keys, why)
	})
	cancel, done := runInformer(inf)
	stop := sync.OnceFunc(func() { cancel(); <-done })
	defer stop()
	select {
	case <-walking:
	case <-time.After(30 * time.Second):
		t.Fatal("the warm start's walk did not begin")
	}
	if err := inf.AddIndexers(cache.Indexers{"byNamespace": cache.MetaNamespaceIndexFunc}); err != nil {
		t.Fatalf("AddIndexers: %v", err)
	}
	releaseWalk()

	poll.Until(t, 30*time.Second, "the handler synced and the store holds ns/b again", func() bool {
		if !reg.HasSynced() {
			return false
		}
		obj, ok, err := inf.GetStore().GetByKey("ns/b")
		return err == nil && ok && obj.(*corev1.Pod).ResourceVersion == b2
	})
	// Each handler gets its calls in order, and the watch goes on from the
	// relist's resourceVersion: once a later object's add has reached the
	// handler, every call for ns/b has too.
	src.Add(setAsidePod("zz"))
	poll.Until(t, 30*time.Second, "the handler's add of a later object", func() bool {
		for _, e := range ev.list() {
			if strings.HasPrefix(e, "add ns/zz@") {
				return true
			}
		}
		return false
	})
	stop()

	var ofB []string
	for _, e := range ev.list() {
		if strings.Contains(e, " ns/b@") || strings.Contains(e, "tombstone:ns/b") {
			ofB = append(ofB, e)
		}
	}
	t.Logf("calls for ns/b: %v", ofB)
	adds := 0
	for _, e := range ofB {
		if strings.HasPrefix(e, "add ") {
			adds++
		}
	}
	if adds != 1 {
		t.Errorf("the handler's calls for ns/b: %v; want one add of ns/b@%s: the set-aside deleted the record the watch event "+
			"wrote after the failed build, and the relist added it again", ofB, b2)
	}
}

// handedOutAhead reports whether the running walk handed key out ahead of
// itself, for a watch event.
func handedOutAhead(inf *Informer, key string) bool {
	d := inf.start.walk.Load()
	if d == nil {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.ahead[key]
	return ok
}

// TestAddIndexersSetAsideGenerated draws which stored records do not
// decode, and what watch event each gets between AddIndexers' failed build
// and its set-aside. The event is none, an update or a deletion. The
// informer sets the records aside after the walk's read error or in
// AddIndexers. Either way the handler must see what client-go shows. It
// gets no add of a key it holds, and no update or deletion of a key it
// does not. In the end it holds the source's objects at their
// resourceVersions. The seed is logged, so a failure can be replayed.
func TestAddIndexersSetAsideGenerated(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	names := []string{"a", "b", "c", "d", "e", "f"}
	for n := range 8 {
		events := map[string]string{}
		for _, name := range names {
			if r.IntN(3) == 0 {
				events["ns/"+name] = []string{"none", "update", "delete"}[r.IntN(3)]
			}
		}
		if len(events) == 0 {
			events["ns/"+names[r.IntN(len(names))]] = "update"
		}
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Logf("damaged records and their events: %v", events)
			checkSetAsideScenario(t, names, events)
		})
	}
}

// checkSetAsideScenario stores a pod of each name, damages the records of
// the keys events names, and starts warm with the walk held. AddIndexers
// meets the damage first. Between its failed build and its set-aside, each
// damaged key gets its event. It then checks the handler's calls.
func checkSetAsideScenario(t *testing.T, names []string, events map[string]string) {
	src := fcache.NewFakeControllerSource()
	for _, n := range names {
		src.Add(setAsidePod(n))
	}
	f := newStoredFile(t, src)
	f.coldStart(nil, len(names))
	f.damage(slices.Collect(maps.Keys(events))...)

	walking, release := make(chan struct{}), make(chan struct{})
	releaseWalk := sync.OnceFunc(func() { close(release) })
	walkStarting = func() { close(walking); <-release }
	defer func() { walkStarting = nil }()
	defer releaseWalk()

	db := f.open()
	defer db.Close()
	inf := f.informer(db, nil)
	ev := &setAsideEvents{}
	reg, err := inf.AddEventHandler(ev)
	if err != nil {
		t.Fatal(err)
	}
	setAside := inf.setAsideUnreadable
	var once sync.Once
	inf.persistent.onUnreadable(func(keys []string, why error) error {
		once.Do(func() {
			releaseWalk()
			for key, event := range events {
				name := strings.TrimPrefix(key, "ns/")
				switch event {
				case "update":
					p := setAsidePod(name)
					p.Labels = map[string]string{"v": "2"}
					src.Modify(p)
				case "delete":
					src.Delete(setAsidePod(name))
				}
			}
			for key, event := range events {
				poll.Until(t, 30*time.Second, fmt.Sprintf("the %s of %s applied", event, key), func() bool {
					obj, ok, err := inf.persistent.getOnce(key)
					switch event {
					case "update":
						return err == nil && ok && obj.(*corev1.Pod).Labels["v"] == "2"
					case "delete":
						return err == nil && !ok
					}
					return true
				})
			}
		})
		return setAside(keys, why)
	})
	cancel, done := runInformer(inf)
	stop := sync.OnceFunc(func() { cancel(); <-done })
	defer stop()
	<-walking
	// Through GetIndexer, as client-go's users may call it: Informer's own
	// AddIndexers holds life.mu, which a relist after the walk's read
	// error needs, so no event could land while the hook waits for it.
	if err := inf.GetIndexer().AddIndexers(cache.Indexers{"byNamespace": cache.MetaNamespaceIndexFunc}); err != nil {
		t.Fatalf("AddIndexers: %v", err)
	}
	releaseWalk()

	want := map[string]string{}
	listed, err := src.List(metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	items, err := meta.ExtractList(listed)
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range items {
		p := obj.(*corev1.Pod)
		want[p.Namespace+"/"+p.Name] = p.ResourceVersion
	}
	poll.Until(t, 30*time.Second, "the handler synced and the store holds the source's objects", func() bool {
		if !reg.HasSynced() {
			return false
		}
		got := map[string]string{}
		for _, obj := range inf.GetStore().List() {
			p := obj.(*corev1.Pod)
			got[p.Namespace+"/"+p.Name] = p.ResourceVersion
		}
		return maps.Equal(got, want)
	})
	// Each handler gets its calls in order: once a later object's add has
	// reached the handler, every earlier call has too.
	src.Add(setAsidePod("zz"))
	poll.Until(t, 30*time.Second, "the handler's add of a later object", func() bool {
		return slices.ContainsFunc(ev.list(), func(e string) bool { return strings.HasPrefix(e, "add ns/zz@") })
	})
	stop()

	calls := ev.list()
	held := map[string]string{}
	for _, e := range calls {
		fields := strings.Fields(e)
		switch fields[0] {
		case "add":
			key, rv, _ := strings.Cut(fields[1], "@")
			if _, ok := held[key]; ok {
				t.Errorf("the handler got %q while it held %s: calls %v", e, key, calls)
			}
			held[key] = rv
		case "update":
			key, _, _ := strings.Cut(fields[1], "@")
			if _, ok := held[key]; !ok {
				t.Errorf("the handler got %q for a key it did not hold: calls %v", e, calls)
			}
			_, rv, _ := strings.Cut(fields[3], "@")
			held[key] = rv
		case "delete":
			key, _, _ := strings.Cut(strings.TrimPrefix(fields[1], "tombstone:"), "@")
			if _, ok := held[key]; !ok {
				t.Errorf("the handler got %q for a key it did not hold: calls %v", e, calls)
			}
			delete(held, key)
		}
	}
	delete(held, "ns/zz")
	if !maps.Equal(held, want) {
		t.Errorf("the handler holds %v; want the source's %v: calls %v", held, want, calls)
	}
}
