package cache_test

import (
	"errors"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/persist"
)

// A stored record that cannot be read back is never served as absence.
// List panics, GetByKey and ByIndex return the error, and each failure is
// reported and counted (TestReadErrorIsNeverAbsence). Building an index
// over the stored records meets the record too. A bare Indexer has no
// list to fetch it again with. So AddIndexers must fail, or leave reads
// failing, never drop the record and report it absent.
func TestAddIndexersNeverTurnsAReadErrorIntoAbsence(t *testing.T) {
	for _, bound := range []int{0, 1} {
		t.Run(fmt.Sprintf("cache=%d", bound), func(t *testing.T) {
			f := newTestFile(t)
			opts := bcache.IndexerOptions{
				Indexers:     cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
				CacheObjects: bound,
			}
			i := f.indexer(opts)
			for _, name := range []string{"a", "b", "c"} {
				if err := i.Add(pod("ns", name, "1", map[string]string{"app": name})); err != nil {
					t.Fatal(err)
				}
			}
			f.flush()
			corruptStoredRecord(t, f, "test", "ns/b")
			i = f.indexer(opts)
			if v := panicOf(func() { i.List() }); v == nil {
				t.Fatal("List did not fail on the damaged record: the test damaged nothing")
			}
			errorsBefore := bcache.ReadErrorsForTest(i)

			addErr := i.AddIndexers(cache.Indexers{"app": byLabel("app")})
			var got []interface{}
			v := panicOf(func() { got = i.List() })
			_, exists, getErr := i.GetByKey("ns/b")
			if addErr == nil && v == nil {
				t.Fatalf("AddIndexers succeeded, then List returned %v and GetByKey(ns/b) = exists %v, err %v: "+
					"the record that does not decode became absence (read errors counted: %d before, %d after)",
					names(got), exists, getErr, errorsBefore, bcache.ReadErrorsForTest(i))
			}
			// A bare Indexer has no list to fetch the record again with: it
			// keeps the record, adds no index, and says which record failed.
			if !errors.Is(addErr, persist.ErrCorruptRecord) || !strings.Contains(addErr.Error(), `"ns/b"`) {
				t.Errorf("AddIndexers = %v; want the read error, naming ns/b", addErr)
			}
			if v == nil || getErr == nil {
				t.Errorf("after AddIndexers failed, List returned %v and GetByKey(ns/b) = exists %v, err %v; want both to fail as before", names(got), exists, getErr)
			}
			if _, ok := i.GetIndexers()["app"]; ok {
				t.Error("AddIndexers failed, yet its index was added")
			}
			if after := bcache.ReadErrorsForTest(i); after <= errorsBefore {
				t.Errorf("read errors counted: %d before AddIndexers, %d after; want the build's failure counted", errorsBefore, after)
			}
		})
	}
}

// An informer's AddIndexers may meet a stored record that no read has met
// yet. Nothing is decoded before the warm start's walk reaches it, and with
// a bounded cache (CacheBytes) nothing stays decoded after. The informer
// can list, so it sets the record aside and lists it again, whether
// AddIndexers runs before Run or during the walk. AddIndexers succeeds, the
// set-aside is reported, and no lister reads the store without the record
// as complete. Each object reaches the handler once.
func TestAddIndexersSetsAsideAndRelistsWhatItCannotRead(t *testing.T) {
	for _, tc := range []struct {
		when  string
		bound int64
	}{{"before Run", 1}, {"during the walk", 1}, {"during the walk", 0}} {
		when := tc.when
		t.Run(fmt.Sprintf("%s/CacheBytes=%d", when, tc.bound), func(t *testing.T) {
			f := newTestFile(t)
			src := podSource("a", "b", "c")
			populate(t, f, src, bcache.Persistence{}, nil, nil)
			if err := f.db.Close(); err != nil {
				t.Fatal(err)
			}
			corruptRecord(t, f.path, "pods", "ns/b")
			f.open()

			byNamespace := cache.Indexers{"byNamespace": cache.MetaNamespaceIndexFunc}
			var setup func(*bcache.Informer)
			walking, release := make(chan struct{}), make(chan struct{})
			releaseWalk := sync.OnceFunc(func() { close(release) })
			if when == "before Run" {
				setup = func(inf *bcache.Informer) {
					if err := inf.AddIndexers(byNamespace); err != nil {
						t.Fatalf("AddIndexers before Run: %v", err)
					}
				}
			} else {
				defer bcache.SetWalkHooks(func() { close(walking); <-release }, nil)()
			}
			r := startInformer(t, f, noWatchList{src}, bcache.Persistence{CacheBytes: tc.bound}, nil, setup)
			t.Cleanup(releaseWalk) // before r.stop, which waits for the walk
			if when == "during the walk" {
				select {
				case <-walking:
				case <-time.After(30 * time.Second):
					t.Fatal("the warm start's walk did not begin")
				}
				if err := r.inf.AddIndexers(byNamespace); err != nil {
					t.Fatalf("AddIndexers during the walk: %v", err)
				}
				releaseWalk()
			}

			// Listers read the stored state once the informer is synced.
			// List then waits for the list the store owes, if it owes one.
			r.synced(t)
			if got, want := storeState(r.inf.GetStore()), sourceState(t, src); !eq(got, want) {
				t.Fatalf("the store holds %v, want the source's %v: the record set aside was served as absent", got, want)
			}
			objs, err := r.inf.GetIndexer().ByIndex("byNamespace", "ns")
			if err != nil || len(objs) != 3 {
				t.Errorf("ByIndex(byNamespace, ns) = %v, %v; want all three pods", names(objs), err)
			}
			select {
			case err := <-r.errs:
				if !errors.Is(err, persist.ErrCorruptRecord) {
					t.Errorf("reported %v, want persist.ErrCorruptRecord", err)
				}
			case <-time.After(30 * time.Second):
				t.Error("the set-aside was not reported to the watch error handler")
			}
			r.ev.waitFor(t, 3, "every pod")
			if got := sorted(r.ev.list()); fmt.Sprint(got) != "[add ns/a@1 initial=true add ns/b@2 initial=false add ns/c@3 initial=true]" {
				t.Errorf("events = %v; want each pod once, the one set aside from the list", got)
			}
		})
	}
}

// TestIndexerReadsAreWholeOrFailGenerated draws small collections with
// damaged records, cache bounds, and sequences of AddIndexers, reads and
// writes on a bare Indexer. Every read must return exactly what was
// written, or fail (List panics). A read that returns part of it would hand
// a controller deleted objects. ListKeys needs no decoding and is always
// whole. The seed is logged, so a failure can be replayed.
func TestIndexerReadsAreWholeOrFailGenerated(t *testing.T) {
	seed := rand.Int63()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewSource(seed))
	for round := 0; round < 25; round++ {
		f := newTestFile(t)
		opts := bcache.IndexerOptions{Indexers: cache.Indexers{"app": byLabel("app")}, CacheObjects: r.Intn(3)}
		i := f.indexer(opts)
		want := map[string]string{} // key -> resourceVersion
		var keys []string
		for n := 0; n < 1+r.Intn(6); n++ {
			name := fmt.Sprintf("p%d", n)
			if err := i.Add(pod("ns", name, "1", map[string]string{"app": fmt.Sprint(n % 2)})); err != nil {
				t.Fatal(err)
			}
			keys = append(keys, "ns/"+name)
			want["ns/"+name] = "1"
		}
		f.flush()
		if err := f.db.Close(); err != nil {
			t.Fatal(err)
		}
		f.db = nil
		for _, key := range keys {
			if r.Intn(2) == 0 {
				corruptRecord(t, f.path, "test", key)
			}
		}
		f.open()
		i = f.indexer(opts)
		var steps []string
		check := func(what string, got map[string]string, err error) {
			t.Helper()
			if err == nil && !maps.Equal(got, want) {
				t.Fatalf("seed %d round %d: after %v, %s returned %v with no error; want %v or a read error", seed, round, steps, what, got, want)
			}
		}
		for step := 0; step < 8; step++ {
			key := keys[r.Intn(len(keys))]
			switch r.Intn(6) {
			case 0:
				name := fmt.Sprintf("i%d", step)
				steps = append(steps, "AddIndexers("+name+")")
				_ = i.AddIndexers(cache.Indexers{name: cache.MetaNamespaceIndexFunc})
			case 1:
				steps = append(steps, "Update("+key+")")
				rv := fmt.Sprint(step + 2)
				if err := i.Update(pod("ns", key[3:], rv, map[string]string{"app": "0"})); err != nil {
					t.Fatal(err)
				}
				want[key] = rv
			case 2:
				steps = append(steps, "Delete("+key+")")
				if err := i.Delete(pod("ns", key[3:], "", nil)); err != nil {
					t.Fatal(err)
				}
				delete(want, key)
			}
			var list []interface{}
			v := panicOf(func() { list = i.List() })
			check("List", keyedVersions(list), errorOf(v))
			for _, name := range slices.Sorted(maps.Keys(i.GetIndexers())) {
				values := map[string]bool{}
				for _, obj := range list {
					vs, _ := i.GetIndexers()[name](obj)
					for _, v := range vs {
						values[v] = true
					}
				}
				got := map[string]string{}
				var err error
				for value := range values {
					objs, berr := i.ByIndex(name, value)
					err = errors.Join(err, berr)
					maps.Copy(got, keyedVersions(objs))
				}
				if v == nil {
					check("ByIndex("+name+")", got, err)
				}
			}
			if got := sorted(i.ListKeys()); !slices.Equal(got, slices.Sorted(maps.Keys(want))) {
				t.Fatalf("seed %d round %d: after %v, ListKeys = %v; want %v", seed, round, steps, got, slices.Sorted(maps.Keys(want)))
			}
			obj, exists, err := i.GetByKey(key)
			rv, stored := want[key]
			if err == nil && (exists != stored || (exists && obj.(*corev1.Pod).ResourceVersion != rv)) {
				t.Fatalf("seed %d round %d: after %v, GetByKey(%s) = %v, %v with no error; want stored %v at %q, or a read error", seed, round, steps, key, obj, exists, stored, rv)
			}
		}
	}
}

// keyedVersions maps each pod of objs to its resourceVersion.
func keyedVersions(objs []interface{}) map[string]string {
	out := map[string]string{}
	for _, obj := range objs {
		p := obj.(*corev1.Pod)
		out[p.Namespace+"/"+p.Name] = p.ResourceVersion
	}
	return out
}

// errorOf returns what a recovered panic says as an error, or nil.
func errorOf(v any) error {
	if v == nil {
		return nil
	}
	return fmt.Errorf("panic: %v", v)
}
