package cache_test

import (
	"fmt"
	"testing"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/recovery"
)

// A warm start proved caught up by versions holds the collection as the
// proof's consistent list found it. An object created and deleted while
// the program was down is in neither the stored state nor that list, and
// the proof holds at once; the resumed watch then replays its creation
// and deletion. The store must not show it after the sync, and handlers
// must not be told of it: a client-go informer's list at that version
// never would. Here the watch is held until the informer synced.
func TestProofByVersionsHidesWhatCameAndWentBeforeIt(t *testing.T) {
	f := newTestFile(t)
	src := podSource("a", "b") // @1, @2
	populate(t, f, src, bcache.Persistence{}, nil, nil)
	src.Add(pod("ns", "x", "", nil))    // x@3
	src.Delete(pod("ns", "x", "", nil)) // @4
	held := newHeldWatch(src)
	lister := &sourceLister{src: src}
	r := startInformerOpts(t, f, held, bcache.InformerOptions{
		Recovery: &recovery.Options{Lister: lister.lister(), Workers: 1},
	}, nil)
	r.synced(t)
	if got := lister.Metas(); got != 1 {
		t.Fatalf("%d metadata lists, want the proof's one", got)
	}
	close(held.release)
	src.Add(pod("ns", "m", "", nil)) // m@5: applied after the replay
	r.ev.waitFor(t, 3, "the initial adds and m's add")
	if got, want := storeState(r.inf.GetStore()), sourceState(t, src); !eq(got, want) {
		t.Errorf("store %v, want %v", got, want)
	}
	r.stop()
	want := []string{"add ns/a@1 initial=true", "add ns/b@2 initial=true", "add ns/m@5 initial=false"}
	if got := warmOrder(t, r.ev.list()); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events\n got %v\nwant %v", got, want)
	}
}
