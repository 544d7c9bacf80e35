package cache_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/cache"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/internal/testing/poll"
)

// ackingHandler records calls and acknowledges what it is given.
type ackingHandler struct {
	recordingHandler
	t  *testing.T
	cp *bcache.Checkpoint
}

func (h ackingHandler) OnAdd(obj interface{}, initial bool) {
	h.recordingHandler.OnAdd(obj, initial)
	if err := h.cp.Ack(obj); err != nil {
		h.t.Error(err)
	}
}

func (h ackingHandler) OnUpdate(old, obj interface{}) {
	h.recordingHandler.OnUpdate(old, obj)
	if err := h.cp.Ack(obj); err != nil {
		h.t.Error(err)
	}
}

// A checkpoint's handler may join a running warm informer, as
// controller-runtime's do. It is given the store minus the objects it
// acknowledged at their stored version. It is also given tombstones, the
// deletions of objects it acknowledged and was not told about. A handler
// without a checkpoint joining at the same time is given the store, as in
// client-go. A second handler for one checkpoint is refused.
func TestCheckpointLateJoin(t *testing.T) {
	f := newTestFile(t)
	src := podSource("a", "b", "c")
	first := &events{}
	var cp *bcache.Checkpoint
	r := startInformer(t, f, noWatchList{src}, bcache.Persistence{}, nil, func(inf *bcache.Informer) {
		var err error
		if cp, err = inf.Checkpoint("late"); err != nil {
			t.Fatal(err)
		}
		if _, err := cp.AddEventHandler(ackingHandler{recordingHandler{first}, t, cp}); err != nil {
			t.Fatal(err)
		}
		if _, err := cp.AddEventHandler(first.handler()); err == nil {
			t.Error("a second handler for one checkpoint was accepted")
		}
	})
	r.synced(t)
	first.waitFor(t, 3, "cold start")
	poll.Until(t, 10*time.Second, "acknowledged", func() bool { return cp.Len() == 3 })
	r.stop()
	f.reopen()

	// While it is down: b deleted, c changed.
	b := pod("ns", "b", "", nil)
	src.Delete(b)
	c := pod("ns", "c", "", map[string]string{"changed": "yes"})
	src.Modify(c)

	reg := prometheus.NewRegistry()
	metrics, err := bcache.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	r = startInformerOpts(t, f, noWatchList{src}, bcache.InformerOptions{Metrics: metrics}, nil)
	r.synced(t)
	poll.Until(t, 10*time.Second, "changes applied", func() bool { return eq(storeState(r.inf.GetStore()), sourceState(t, src)) })
	cp, err = r.inf.Checkpoint("late")
	if err != nil {
		t.Fatal(err)
	}
	late, plain := &events{}, &events{}
	handle, err := cp.AddEventHandler(late.handler())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.inf.AddEventHandler(plain.handler()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-handle.HasSyncedChecker().Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the late checkpoint handler did not sync")
	}
	late.waitFor(t, 2, "late checkpoint handler")
	plain.waitFor(t, 2, "late plain handler")
	got := late.list()
	slices.Sort(got)
	stored := storeState(r.inf.GetStore())
	var cNow string
	for _, s := range stored {
		if strings.HasPrefix(s, "ns/c@") {
			cNow = s
		}
	}
	want := []string{"add " + cNow + " initial=true", "delete tombstone:ns/b"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("late checkpoint handler got %v, want %v", got, want)
	}
	gotPlain := plain.list()
	slices.Sort(gotPlain)
	if len(gotPlain) != 2 || !strings.HasPrefix(gotPlain[0], "add ns/a@") || !strings.HasPrefix(gotPlain[1], "add ns/c@") {
		t.Errorf("late plain handler got %v, want the initial adds of a and c", gotPlain)
	}
	if cp.Skipped() != 1 {
		t.Errorf("Skipped() = %d, want 1 (a)", cp.Skipped())
	}
	series := map[string]string{"collection": "pods", "checkpoint": "late"}
	for name, want := range map[string]float64{
		"boltinformer_checkpoint_acknowledged_keys":          2, // a, and c at its earlier version; b deleted
		"boltinformer_checkpoint_tombstones":                 1, // b
		"boltinformer_checkpoint_skipped_initial_adds_total": 1, // a
	} {
		if got := sample(t, reg, name, series); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	// Acknowledging the deletion settles it: the next late handler is not
	// told again.
	if err := cp.Ack(cache.DeletedFinalStateUnknown{Key: "ns/b"}); err != nil {
		t.Fatal(err)
	}
	if got := sample(t, reg, "boltinformer_checkpoint_tombstones", series); got != 0 {
		t.Errorf("tombstones after the deletion was acknowledged = %v, want 0", got)
	}
	cp.Close()
	if got := sample(t, reg, "boltinformer_checkpoint_tombstones", series); got != -1 {
		t.Errorf("a closed checkpoint is still exported (tombstones = %v)", got)
	}
	cp2, err := r.inf.Checkpoint("late")
	if err != nil {
		t.Fatal(err)
	}
	again := &events{}
	handle, err = cp2.AddEventHandler(again.handler())
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-handle.HasSyncedChecker().Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the second late handler did not sync")
	}
	again.waitFor(t, 1, "second late handler")
	if got := again.list(); len(got) != 1 || !strings.HasPrefix(got[0], "add ns/c@") {
		t.Errorf("after the deletion was acknowledged, a late handler got %v, want only c's add", got)
	}
}

// A relist hands each listed object the store held to the handlers as an
// update. client-go gives those whose resourceVersion did not change to the
// handlers due for a resync. A handler with a resync period is due until
// its first resync check, which is ten hours for controller-runtime's.
// After a 410 that means every object. A checkpoint's handler is not given
// the ones it acknowledged at that version. It gets only the relist's
// changes, deletions and creations. A handler without a checkpoint gets
// them all, as in client-go.
func TestCheckpointRelistSkipsUnchangedAcknowledged(t *testing.T) {
	f := newTestFile(t)
	src := podSource("a", "b", "c", "d")
	checkpointed, plain := &events{}, &events{}
	var cp *bcache.Checkpoint
	reg := prometheus.NewRegistry()
	metrics, err := bcache.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	resync := time.Hour
	lw := newWatchedList(src)
	r := startInformerOpts(t, f, lw, bcache.InformerOptions{Metrics: metrics}, func(inf *bcache.Informer) {
		var err error
		if cp, err = inf.Checkpoint("relist"); err != nil {
			t.Fatal(err)
		}
		if _, err := cp.AddEventHandlerWithOptions(ackingHandler{recordingHandler{checkpointed}, t, cp}, cache.HandlerOptions{ResyncPeriod: &resync}); err != nil {
			t.Fatal(err)
		}
		if _, err := inf.AddEventHandlerWithOptions(plain.handler(), cache.HandlerOptions{ResyncPeriod: &resync}); err != nil {
			t.Fatal(err)
		}
	})
	r.synced(t)
	checkpointed.waitFor(t, 4, "cold start")
	poll.Until(t, 10*time.Second, "acknowledged", func() bool { return cp.Len() == 4 })
	before := len(checkpointed.list())
	lw.awaitWatch(t, "after the cold start")

	// Unseen by the watch: c changed, d deleted, e created. Then the watch
	// breaks and its resourceVersion is gone: the informer relists.
	src.ModifyDropWatch(pod("ns", "c", "", map[string]string{"changed": "yes"}))
	src.DeleteDropWatch(pod("ns", "d", "", nil))
	src.AddDropWatch(pod("ns", "e", "", nil))
	src.ResetWatch()
	poll.Until(t, 30*time.Second, "relist applied", func() bool { return eq(storeState(r.inf.GetStore()), sourceState(t, src)) })
	lw.awaitWatch(t, "after the relist")
	// A sentinel after the relist: once a handler has it, it has everything
	// the relist gave it.
	src.Add(pod("ns", "z", "", nil))
	for _, e := range []*events{checkpointed, plain} {
		poll.Until(t, 30*time.Second, "sentinel", func() bool {
			return slices.ContainsFunc(e.list(), func(s string) bool { return strings.HasPrefix(s, "add ns/z@") })
		})
	}

	kinds := func(evs []string) []string {
		var out []string
		for _, s := range evs {
			// "update ns/a@1 -> ns/a@1" → "update ns/a unchanged"
			verb, rest, _ := strings.Cut(s, " ")
			key, _, _ := strings.Cut(rest, "@")
			if verb == "update" {
				from, to, _ := strings.Cut(rest, " -> ")
				if from == to {
					key += " unchanged"
				}
			}
			out = append(out, verb+" "+key)
		}
		slices.Sort(out)
		return out
	}
	got := kinds(checkpointed.list()[before:])
	want := []string{"add ns/e", "add ns/z", "delete tombstone:ns/d", "update ns/c"}
	if !slices.Equal(got, want) {
		t.Errorf("checkpoint's handler after the relist: %v, want %v (not the unchanged a and b it acknowledged)", got, want)
	}
	gotPlain := kinds(plain.list()[4:])
	wantPlain := []string{"add ns/e", "add ns/z", "delete tombstone:ns/d", "update ns/a unchanged", "update ns/b unchanged", "update ns/c"}
	if !slices.Equal(gotPlain, wantPlain) {
		t.Errorf("plain handler after the relist: %v, want %v (client-go's)", gotPlain, wantPlain)
	}
	if n := cp.SkippedRelisted(); n != 2 {
		t.Errorf("SkippedRelisted() = %d, want 2 (a and b)", n)
	}
	series := map[string]string{"collection": "pods", "checkpoint": "relist"}
	if got := sample(t, reg, "boltinformer_checkpoint_skipped_relist_updates_total", series); got != 2 {
		t.Errorf("boltinformer_checkpoint_skipped_relist_updates_total = %v, want 2", got)
	}
}

// A handler still processing an object when it is deleted acknowledges
// what it was given after the store has dropped the key (controller-runtime's
// AckKey does the same when a deletion lands during a reconcile). That
// acknowledges the earlier state, not the deletion. So the tombstone stays,
// and a handler joining after a restart is told of the deletion.
func TestCheckpointLateAckKeepsTheDeletion(t *testing.T) {
	f := newTestFile(t)
	src := podSource("a", "b")
	h := &events{}
	var cp *bcache.Checkpoint
	r := startInformer(t, f, noWatchList{src}, bcache.Persistence{}, nil, func(inf *bcache.Informer) {
		var err error
		if cp, err = inf.Checkpoint("h"); err != nil {
			t.Fatal(err)
		}
		if _, err := cp.AddEventHandler(ackingHandler{recordingHandler{h}, t, cp}); err != nil {
			t.Fatal(err)
		}
	})
	r.synced(t)
	poll.Until(t, 10*time.Second, "acknowledged", func() bool { return cp.Len() == 2 })
	given, exists, err := r.inf.GetStore().GetByKey("ns/b")
	if err != nil || !exists {
		t.Fatalf("ns/b not in the store: %v", err)
	}
	src.Delete(pod("ns", "b", "", nil))
	poll.Until(t, 10*time.Second, "deletion applied", func() bool {
		_, exists, _ := r.inf.GetStore().GetByKey("ns/b")
		return !exists
	})
	// The late acknowledgement of what the handler was given.
	if err := cp.Ack(given); err != nil {
		t.Fatal(err)
	}
	if n := cp.Tombstones(); n != 1 {
		t.Errorf("after the late acknowledgement, %d tombstones, want b's", n)
	}
	r.stop()
	f.reopen()

	r = startInformer(t, f, noWatchList{src}, bcache.Persistence{}, nil, nil)
	r.synced(t)
	cp, err = r.inf.Checkpoint("h")
	if err != nil {
		t.Fatal(err)
	}
	late := &events{}
	handle, err := cp.AddEventHandler(late.handler())
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-handle.HasSyncedChecker().Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the late checkpoint handler did not sync")
	}
	late.waitFor(t, 1, "late checkpoint handler")
	if got := late.list(); !slices.Contains(got, "delete tombstone:ns/b") {
		t.Errorf("after a late acknowledgement of b's add, a handler joining after the restart got %v, want b's deletion", got)
	}
}

// The checkpoint metrics are checked after a warm start whose checkpoint
// handler was registered before Run, as most are. They show the initial
// adds it was spared. That is every stored object. The one changed and the
// one deleted while the program was down were stored at their acknowledged
// versions. The watch events that follow are what tell the handler of
// them. The metrics also show the acknowledged keys. The deletion not
// acknowledged yet shows as a pending tombstone, until it is acknowledged.
func TestCheckpointMetricsWarmStart(t *testing.T) {
	f := newTestFile(t)
	src := podSource("a", "b", "c", "d", "e")
	var cp *bcache.Checkpoint
	setup := func(e *events, reg *cache.ResourceEventHandlerRegistration) func(*bcache.Informer) {
		return func(inf *bcache.Informer) {
			var err error
			if cp, err = inf.Checkpoint("m"); err != nil {
				t.Fatal(err)
			}
			r, err := cp.AddEventHandler(ackingHandler{recordingHandler{e}, t, cp})
			if err != nil {
				t.Fatal(err)
			}
			if reg != nil {
				*reg = r
			}
		}
	}
	r := startInformer(t, f, noWatchList{src}, bcache.Persistence{}, nil, setup(&events{}, nil))
	r.synced(t)
	poll.Until(t, 10*time.Second, "acknowledged", func() bool { return cp.Len() == 5 })
	r.stop()
	f.reopen()

	// While it is down: b deleted, c changed.
	src.Delete(pod("ns", "b", "", nil))
	src.Modify(pod("ns", "c", "", map[string]string{"changed": "yes"}))

	reg := prometheus.NewRegistry()
	metrics, err := bcache.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	got := &events{}
	var handle cache.ResourceEventHandlerRegistration
	r = startInformerOpts(t, f, noWatchList{src}, bcache.InformerOptions{Metrics: metrics}, setup(got, &handle))
	r.synced(t)
	select {
	case <-handle.HasSyncedChecker().Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the checkpoint handler did not sync")
	}
	got.waitFor(t, 2, "c's update and b's deletion")
	evs := got.list()
	slices.Sort(evs)
	if len(evs) != 2 || !strings.HasPrefix(evs[0], "delete ns/b@") || !strings.HasPrefix(evs[1], "update ns/c@") {
		t.Errorf("checkpoint handler got %v, want only b's deletion and c's update", evs)
	}
	series := map[string]string{"collection": "pods", "checkpoint": "m"}
	for name, want := range map[string]float64{
		"boltinformer_checkpoint_skipped_initial_adds_total":   5,
		"boltinformer_checkpoint_skipped_relist_updates_total": 0,
		"boltinformer_checkpoint_acknowledged_keys":            4, // b's became its tombstone
		"boltinformer_checkpoint_tombstones":                   1, // ackingHandler does not acknowledge deletions
	} {
		if got := sample(t, reg, name, series); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if err := cp.AckDeleted("ns/b"); err != nil {
		t.Fatal(err)
	}
	if got := sample(t, reg, "boltinformer_checkpoint_tombstones", series); got != 0 {
		t.Errorf("tombstones after the deletion was acknowledged = %v, want 0", got)
	}
}

// A collection that starts cold drops its checkpoints: the handler is given
// every listed object again, and no deletion it had not acknowledged — as
// a cold-starting client-go informer tells none.
func TestCheckpointColdStartTellsNoDeletions(t *testing.T) {
	f := newTestFile(t)
	src := podSource("a", "b", "c")
	h := &events{}
	var cp *bcache.Checkpoint
	p := bcache.Persistence{ListIdentity: "pods"}
	r := startInformer(t, f, noWatchList{src}, p, nil, func(inf *bcache.Informer) {
		var err error
		if cp, err = inf.Checkpoint("h"); err != nil {
			t.Fatal(err)
		}
		if _, err := cp.AddEventHandler(ackingHandler{recordingHandler{h}, t, cp}); err != nil {
			t.Fatal(err)
		}
	})
	r.synced(t)
	poll.Until(t, 10*time.Second, "acknowledged", func() bool { return cp.Len() == 3 })
	src.Delete(pod("ns", "b", "", nil)) // not acknowledged: a tombstone
	poll.Until(t, 10*time.Second, "tombstone", func() bool { return cp.Tombstones() == 1 })
	r.stop()
	f.reopen()

	p.ListIdentity = "pods, another selector" // the stored collection is not this list's
	cold := &events{}
	r = startInformer(t, f, noWatchList{src}, p, nil, func(inf *bcache.Informer) {
		var err error
		if cp, err = inf.Checkpoint("h"); err != nil {
			t.Fatal(err)
		}
		if _, err := cp.AddEventHandler(cold.handler()); err != nil {
			t.Fatal(err)
		}
	})
	r.synced(t)
	r.handled(t)
	cold.waitFor(t, 2, "cold start")
	got := sorted(cold.list())
	if len(got) != 2 || !strings.HasPrefix(got[0], "add ns/a@") || !strings.HasPrefix(got[1], "add ns/c@") {
		t.Errorf("after a cold start the checkpoint's handler got %v, want the adds of a and c and no deletion", got)
	}
	if cp.Tombstones() != 0 || cp.Len() != 0 {
		t.Errorf("after a cold start the checkpoint holds %d tombstones, %d acknowledgements", cp.Tombstones(), cp.Len())
	}
}
