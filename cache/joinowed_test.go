package cache_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/internal/testing/poll"
)

// joinOwedObjects is how many objects p000… the owed-list tests store. It is
// more than one chunk of the warm start's walk. The walk thus hands out a
// first chunk before it reaches the unreadable record.
const joinOwedObjects = 300

// ackingPrefix acknowledges what it is given, except objects whose name
// lacks prefix.
type ackingPrefix struct {
	t      *testing.T
	cp     *bcache.Checkpoint
	prefix string
}

func (h ackingPrefix) ack(obj interface{}) {
	if m, ok := obj.(metav1.Object); ok && !strings.HasPrefix(m.GetName(), h.prefix) {
		return
	}
	if err := h.cp.Ack(obj); err != nil {
		h.t.Error(err)
	}
}
func (h ackingPrefix) OnAdd(obj interface{}, _ bool) { h.ack(obj) }
func (h ackingPrefix) OnUpdate(_, obj interface{})   { h.ack(obj) }
func (h ackingPrefix) OnDelete(obj interface{})      { h.ack(obj) }

// joinOwedFile leaves on f a collection "pods" listed from src (returned):
// p000…p299 and q, every p acknowledged in checkpoints "cp" and "start" at
// its stored version, and q's record no longer decodes. q is not acknowledged: its
// set-aside would otherwise leave its undecodable record as a tombstone.
func joinOwedFile(t *testing.T, f *testFile) *fcache.FakeControllerSource {
	t.Helper()
	src := fcache.NewFakeControllerSource()
	for i := range joinOwedObjects {
		src.Add(pod("ns", fmt.Sprintf("p%03d", i), "", nil))
	}
	src.Add(pod("ns", "q", "", nil))
	var cps []*bcache.Checkpoint
	r := startInformer(t, f, noWatchList{src}, bcache.Persistence{}, nil, func(inf *bcache.Informer) {
		for _, name := range []string{"cp", "start"} {
			cp, err := inf.Checkpoint(name)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cp.AddEventHandler(ackingPrefix{t, cp, "p"}); err != nil {
				t.Fatal(err)
			}
			cps = append(cps, cp)
		}
	})
	r.synced(t)
	poll.Until(t, 30*time.Second, "every p acknowledged", func() bool {
		return cps[0].Len() == joinOwedObjects && cps[1].Len() == joinOwedObjects
	})
	r.stop()
	if err := f.db.Close(); err != nil {
		t.Fatal(err)
	}
	f.db = nil
	corruptRecord(t, f.path, "pods", "ns/q")
	f.open()
	return src
}

// boundedRun is an informer run whose stop fails the test, instead of
// hanging it, if RunWithContext does not return.
type boundedRun struct {
	inf     *bcache.Informer
	reg     *prometheus.Registry
	reports chan string // the watch error handler's messages
	cancel  context.CancelFunc
	done    chan struct{}
}

// startBounded runs an informer over f's collection "pods" with metrics,
// after setup (if set) has adjusted it. onSetAside, if set, is called from
// the watch error handler when the informer reports that it set stored
// state aside. That is before the informer stops its first watch, so that
// events can still be applied through it.
func startBounded(t *testing.T, f *testFile, lw cache.ListerWatcher, setup, onSetAside func(*bcache.Informer)) *boundedRun {
	t.Helper()
	var once sync.Once
	r := &boundedRun{reg: prometheus.NewRegistry(), reports: make(chan string, 1000), done: make(chan struct{})}
	metrics, err := bcache.NewMetrics(r.reg)
	if err != nil {
		t.Fatal(err)
	}
	r.inf, err = bcache.NewSharedIndexInformerWithOptions(lw, &corev1.Pod{}, bcache.InformerOptions{
		Persistence:    bcache.Persistence{DB: f.db, Collection: "pods"},
		Metrics:        metrics,
		InitialBackoff: time.Millisecond,
		MaxBackoff:     10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		if onSetAside != nil && strings.Contains(err.Error(), "set aside") {
			once.Do(func() { onSetAside(r.inf) })
		}
		select {
		case r.reports <- err.Error():
		default:
		}
	}); err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(r.inf)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.inf.RunWithContext(ctx); close(r.done) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop cancels the run and reports whether RunWithContext returned.
func (r *boundedRun) stop(t *testing.T) bool {
	t.Helper()
	r.cancel()
	select {
	case <-r.done:
		return true
	case <-time.After(30 * time.Second):
		t.Error("RunWithContext did not return after its context was cancelled")
		return false
	}
}

// awaitReport waits for a watch error report containing substr.
func (r *boundedRun) awaitReport(t *testing.T, substr string) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case msg := <-r.reports:
			if strings.Contains(msg, substr) {
				return
			}
		case <-timeout:
			t.Fatalf("no report containing %q", substr)
		}
	}
}

// storedNow reports whether the store itself (not a lister, which waits
// for an owed list) holds p000 changed and no p010.
func storedNow(inf *bcache.Informer) bool {
	obj, exists, err := inf.Indexer().GetByKey("ns/p000")
	if err != nil || !exists || obj.(metav1.Object).GetLabels()["changed"] != "yes" {
		return false
	}
	_, exists, err = inf.Indexer().GetByKey("ns/p010")
	return err == nil && !exists
}

// A checkpoint handler may join a running informer while its store owes a
// list. A warm start that set part of the stored state aside after a read
// error owes one. So does a start from a collection marked must-list. The
// handler is registered at once, as client-go's AddEventHandler never
// waits for the server. Waiting for the list under the informer's locks
// would deadlock, since the list needs those locks to be applied.
//
// The handler's initial adds come from what the store holds, minus what it
// acknowledged. What was set aside reaches it through the list, as it
// reaches every handler. Tombstones are given once the list says which keys
// are gone, since a key set aside is not a deletion. Its registration syncs
// only after all of that.
func TestCheckpointJoinWhileListOwed(t *testing.T) {
	for _, mustList := range []bool{false, true} {
		name := "unreadable record"
		if mustList {
			name = "must-list mark"
		}
		t.Run(name, func(t *testing.T) {
			f := newTestFile(t)
			src := joinOwedFile(t, f)
			lw := &heldLists{noWatchList: noWatchList{src}}
			applied := make(chan struct{})
			startEvents := &events{} // must-list: a checkpoint handler registered before the start
			var startReg cache.ResourceEventHandlerRegistration
			// The walk hands out p000…p255 and fails on the next chunk,
			// which has q: p256…p299 and q are set aside, and a list is
			// owed. Then, through the watch, p000 changes and p010 (handed
			// out, acknowledged) is deleted.
			r := startBounded(t, f, lw, nil, func(inf *bcache.Informer) {
				defer close(applied)
				src.Modify(pod("ns", "p000", "", map[string]string{"changed": "yes"}))
				src.Delete(pod("ns", "p010", "", nil))
				if err := poll.Wait(30*time.Second, func() bool { return storedNow(inf) }); err != nil {
					t.Errorf("the watch events after the set-aside were not applied: %v", err)
				}
			})
			select {
			case <-applied:
			case <-time.After(30 * time.Second):
				t.Fatal("the unreadable record was not reported")
			}
			if mustList {
				// Stop before the list: the next start finds the mark.
				if !r.stop(t) {
					t.FailNow()
				}
				f.reopen()
				// A checkpoint handler registered before this start gets its
				// tombstones once the list is applied too: p256…p299 are
				// not deleted.
				lw = &heldLists{noWatchList: noWatchList{src}}
				r = startBounded(t, f, lw, func(inf *bcache.Informer) {
					cp, err := inf.Checkpoint("start")
					if err != nil {
						t.Fatal(err)
					}
					if startReg, err = cp.AddEventHandler(startEvents.handler()); err != nil {
						t.Fatal(err)
					}
				}, nil)
				r.awaitReport(t, "held back") // started, and its list is held
				if !storedNow(r.inf) {
					t.Fatal("the restarted store lacks the events applied before the stop")
				}
			}

			cp, err := r.inf.Checkpoint("cp")
			if err != nil {
				t.Fatal(err)
			}
			late := &events{}
			type joined struct {
				reg cache.ResourceEventHandlerRegistration
				err error
			}
			joinedCh := make(chan joined, 1)
			go func() {
				reg, err := cp.AddEventHandler(ackingHandler{recordingHandler{late}, t, cp})
				joinedCh <- joined{reg, err}
			}()
			var j joined
			select {
			case j = <-joinedCh:
			case <-time.After(30 * time.Second):
				t.Fatal("Checkpoint.AddEventHandler did not return while the store owes a list: the join waits for the list")
			}
			if j.err != nil {
				t.Fatal(j.err)
			}
			if j.reg.HasSynced() {
				t.Error("the joined handler reports synced while the list that completes its initial state is held back")
			}

			lw.release()
			select {
			case <-j.reg.HasSyncedChecker().Done():
			case <-time.After(30 * time.Second):
				t.Fatalf("the joined handler did not sync after the list was released; events %v", late.list())
			}
			if !r.inf.HasSynced() {
				t.Error("the handler synced before its informer")
			}
			if startReg != nil {
				select {
				case <-startReg.HasSyncedChecker().Done():
				case <-time.After(30 * time.Second):
					t.Fatalf("the start checkpoint handler did not sync; events %v", startEvents.list())
				}
			}
			if got, want := storeState(r.inf.GetStore()), sourceState(t, src); !slices.Equal(got, want) {
				t.Errorf("store after the list has %d objects, want %d: %v", len(got), len(want), got)
			}

			// Synced: the handler has handled everything queued before its
			// initial state was complete.
			rv := map[string]string{}
			for _, s := range sourceState(t, src) {
				k, v, _ := strings.Cut(s, "@")
				rv[k] = v
			}
			want := []string{
				"add ns/p000@" + rv["ns/p000"] + " initial=true", // changed since acknowledged
				"add ns/q@" + rv["ns/q"] + " initial=false",      // set aside, listed
				"delete tombstone:ns/p010",                       // deleted while down
			}
			for i := 256; i < joinOwedObjects; i++ { // set aside, listed
				k := fmt.Sprintf("ns/p%03d", i)
				want = append(want, "add "+k+"@"+rv[k]+" initial=false")
			}
			slices.Sort(want)
			diffEvents(t, "joined checkpoint handler", late.list(), want)
			if startReg != nil {
				// The same: the stored p000 changed, the rest acknowledged.
				diffEvents(t, "start checkpoint handler", startEvents.list(), want)
			}
			// p001…p255 but p010: stored, acknowledged at their version.
			if n := cp.Skipped(); n != 254 {
				t.Errorf("Skipped() = %d, want 254", n)
			}
			series := map[string]string{"collection": "pods", "checkpoint": "cp"}
			for metric, want := range map[string]float64{
				"boltinformer_checkpoint_skipped_initial_adds_total": 254,
				// The handler acknowledges the adds it is given: every
				// stored key is acknowledged. Not deletions: p010's is
				// pending. (p256…p299, set aside, had tombstones until their
				// listed adds were acknowledged.)
				"boltinformer_checkpoint_acknowledged_keys": joinOwedObjects,
				"boltinformer_checkpoint_tombstones":        1,
			} {
				if got := sample(t, r.reg, metric, series); got != want {
					t.Errorf("%s = %v, want %v", metric, got, want)
				}
			}
			if !r.stop(t) {
				t.FailNow()
			}
		})
	}
}

// diffEvents fails t with what got lacks and has in excess of want.
func diffEvents(t *testing.T, who string, got, want []string) {
	t.Helper()
	count := map[string]int{}
	for _, s := range want {
		count[s]++
	}
	for _, s := range got {
		count[s]--
	}
	var missing, extra []string
	for s, n := range count {
		for ; n > 0; n-- {
			missing = append(missing, s)
		}
		for ; n < 0; n++ {
			extra = append(extra, s)
		}
	}
	if len(missing) > 0 || len(extra) > 0 {
		slices.Sort(missing)
		slices.Sort(extra)
		t.Errorf("%s: missing %v, unexpected %v", who, missing, extra)
	}
}
