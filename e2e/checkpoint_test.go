package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/internal/testing/apiservertest"
	"github.com/boltinformer/boltinformer/internal/testing/poll"
	"github.com/boltinformer/boltinformer/persist"
	"github.com/boltinformer/boltinformer/reflector"
)

const (
	checkpointTest       = "checkpoint"
	checkpointCollection = "configmaps-checkpoint"
	checkpointName       = "reconciler"
	// Changes made while the informer is down, as a user meets them.
	checkpointCreates, checkpointUpdates, checkpointDeletes = 30, 40, 30
	// childExpectEnv tells TestCheckpointChild how many handler calls to
	// wait for before it flushes and acknowledges.
	childExpectEnv = "BOLTINFORMER_E2E_CHILD_EXPECT"
)

// ackingHandler records every call and acknowledges each object (and each
// deletion) it was given once it has "processed" it (recorded it), as a
// controller would once its work is done. With ack false it only records.
type ackingHandler struct {
	recorder
	t   testing.TB
	cp  *bcache.Checkpoint
	ack bool
}

func (h *ackingHandler) OnAdd(obj interface{}, isInInitialList bool) {
	h.recorder.OnAdd(obj, isInInitialList)
	h.acknowledge(obj)
}

func (h *ackingHandler) OnUpdate(oldObj, newObj interface{}) {
	h.recorder.OnUpdate(oldObj, newObj)
	h.acknowledge(newObj)
}

func (h *ackingHandler) OnDelete(obj interface{}) {
	h.recorder.OnDelete(obj)
	h.acknowledge(obj) // acknowledges the deletion
}

func (h *ackingHandler) acknowledge(obj interface{}) {
	if !h.ack {
		return
	}
	if err := h.cp.Ack(obj); err != nil {
		h.t.Errorf("Ack: %v", err)
	}
}

// checkpointRun is one start of the checkpointed informer on the cache file.
type checkpointRun struct {
	inf *bcache.Informer
	cp  *bcache.Checkpoint
	h   *ackingHandler
	reg cache.ResourceEventHandlerRegistration
	r   *running
}

func startCheckpointRun(t testing.TB, spec informerSpec, ack bool) *checkpointRun {
	t.Helper()
	inf := newInformer(t, spec)
	cp, err := inf.Checkpoint(checkpointName)
	if err != nil {
		t.Fatal(err)
	}
	h := &ackingHandler{t: t, cp: cp, ack: ack}
	reg, err := cp.AddEventHandler(h)
	if err != nil {
		t.Fatal(err)
	}
	return &checkpointRun{inf: inf, cp: cp, h: h, reg: reg, r: run(t, inf)}
}

// checkOnlyChanges fails t unless the handler saw exactly the changed keys,
// each once and as the kind of change it was: an update of an updated key,
// an add (not initial) of a created one, a delete of a deleted one.
func checkOnlyChanges(t testing.TB, what string, events []event, m mutations) {
	t.Helper()
	seen := map[string]int{}
	for _, e := range events {
		seen[e.key]++
		_, updated := m.updated[e.key]
		_, created := m.created[e.key]
		_, deleted := m.deleted[e.key]
		switch {
		case updated && e.kind == evUpdate && e.rv == m.updated[e.key]:
		case created && e.kind == evAdd && e.rv == m.created[e.key]:
		case deleted && e.kind == evDelete:
		default:
			t.Errorf("%s: unexpected %v", what, e)
		}
	}
	m.checkEachSeenOnce(t, seen)
	if len(events) != m.changedKeys() {
		t.Errorf("%s: handler got %d calls, want %d (one per change made while it was down)", what, len(events), m.changedKeys())
	}
}

// TestCheckpointSkipsAcknowledgedObjects runs a checkpointed handler that
// acknowledges every object it processes over 10,000 ConfigMaps, and
// restarts it three times on the same file after changing 40, deleting 30
// and creating 30 of them while it was down. Each time the handler must be
// given exactly those 100 changes and nothing else:
//   - on a warm restart (watch resumed);
//   - on a restart whose resourceVersion has expired (kube-apiserver
//     restarted: 410 Gone, relist); deletions then come as tombstones;
//   - after a process that had applied and flushed the changes and
//     acknowledged them was SIGKILLed before its acknowledgements were
//     committed: those objects are given again (at least once), as initial
//     adds of their current state, and nothing else is.
func TestCheckpointSkipsAcknowledgedObjects(t *testing.T) {
	srv := apiservertest.Start(t, apiservertest.Options{})
	admin := newClientset(t, srv.Config(), nil)
	const ns = "checkpoint"
	createNamespaces(t, admin, ns)
	n := *flagCheckpointObjects
	populateConfigMaps(t, admin, checkpointTest, []string{ns}, n)
	selector := e2eLabel + "=" + checkpointTest
	path := cachePath(t)
	// Handlers resync every ten hours, as controller-runtime's do: until
	// its first resync check such a handler is due for a relist's unchanged
	// objects, which the checkpoint must spare it (see the 410 subtests).
	spec := informerSpec{collection: checkpointCollection, resource: "configmaps", selector: selector,
		cs: newClientset(t, srv.Config(), nil), resync: 10 * time.Hour}
	sentinel := 0
	create := func(ctx context.Context) string {
		sentinel++
		name := fmt.Sprintf("sentinel-%d", sentinel)
		if _, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, name, checkpointTest, sentinel), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return ns + "/" + name
	}
	settle := func(c *checkpointRun) {
		t.Helper()
		waitSynced(t, c.inf, c.reg)
		key := create(t.Context())
		if err := poll.Wait(time.Minute, func() bool { return c.h.seen(key) }); err != nil {
			t.Fatalf("sentinel %s never reached the handler: %v", key, err)
		}
		c.h.mu.Lock()
		c.h.events = slices.DeleteFunc(c.h.events, func(e event) bool { return e.key == key })
		c.h.mu.Unlock()
	}
	start := func(ack bool) (*persist.DB, *checkpointRun) {
		t.Helper()
		db := openDB(t, path)
		spec.db = db
		return db, startCheckpointRun(t, spec, ack)
	}
	stop := func(db *persist.DB, c *checkpointRun) {
		t.Helper()
		c.r.stop()
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}

	// Cold: every object is given and acknowledged.
	db, c := start(true)
	settle(c)
	if got := c.h.len(); got < n {
		t.Fatalf("cold start: handler got %d calls, want at least %d", got, n)
	}
	stop(db, c)
	atStop := serverConfigMaps(t, admin, ns, selector)

	t.Run("warm restart", func(t *testing.T) {
		m := mutateConfigMapsCounts(t, admin, checkpointTest, atStop, "warm", checkpointCreates, checkpointUpdates, checkpointDeletes)
		db, c := start(true)
		settle(c)
		checkOnlyChanges(t, "warm restart", c.h.snapshot(), m)
		if stored := len(atStop); c.cp.Skipped() != int64(stored) {
			t.Errorf("initial adds skipped = %d, want %d (every stored object was acknowledged)", c.cp.Skipped(), stored)
		}
		stop(db, c)
		atStop = serverConfigMaps(t, admin, ns, selector)
	})

	// The handler, registered before the informer starts, is given the
	// relist's updates: each unchanged one it acknowledged must be skipped.
	// Once as by default (synced when caught up), once with SyncedAtOpen,
	// where a bench found the storm.
	for _, atOpen := range []bool{false, true} {
		name, prefix := "relist after 410", "relist"
		if atOpen {
			name, prefix = name+", synced at open", "relist-open"
		}
		t.Run(name, func(t *testing.T) {
			m := mutateConfigMapsCounts(t, admin, checkpointTest, atStop, prefix, checkpointCreates, checkpointUpdates, checkpointDeletes)
			srv.RestartAPIServer(t) // every stored resourceVersion expires
			obs := &observer{}
			spec.observer, spec.syncedAtOpen = obs, atOpen
			defer func() { spec.observer, spec.syncedAtOpen = nil, false }()
			db, c := start(true)
			settle(c)
			wantCauses := []reflector.StartCause{reflector.CauseResumed, reflector.CauseRelistExpired}
			if causes := obs.startCauses(); !slices.Equal(causes, wantCauses) {
				t.Errorf("reflector start causes = %v, want %v", causes, wantCauses)
			}
			checkOnlyChanges(t, "after a 410 relist", c.h.snapshot(), m)
			if unchanged := int64(len(atStop) - checkpointUpdates - checkpointDeletes); c.cp.SkippedRelisted() != unchanged {
				t.Errorf("relist updates skipped = %d, want %d (every unchanged object)", c.cp.SkippedRelisted(), unchanged)
			}
			stop(db, c)
			atStop = serverConfigMaps(t, admin, ns, selector)
		})
	}

	t.Run("SIGKILL before the acknowledgements were committed", func(t *testing.T) {
		m := mutateConfigMapsCounts(t, admin, checkpointTest, atStop, "killed", checkpointCreates, checkpointUpdates, checkpointDeletes)
		cfg := srv.Config()
		childLog := newChildLog(t)
		ch := startChild(t, "TestCheckpointChild", childEnvironment(cfg, path,
			childNSEnv+"="+ns, childExpectEnv+"="+strconv.Itoa(m.changedKeys())), childLog)
		select {
		case <-ch.out.synced:
		case <-ch.waited:
			t.Fatalf("child exited: %v; said %v\n%s", ch.err, ch.out.lines(), tail(childLog.Name()))
		case <-time.After(3 * time.Minute):
			t.Fatalf("child did not acknowledge; said %v\n%s", ch.out.lines(), tail(childLog.Name()))
		}
		ch.kill()
		t.Logf("child: %v", ch.out.lines())

		db, c := start(false)
		settle(c)
		// The changes were committed by the child (no watch event is given
		// again); its acknowledgements of them were not, so each created and
		// updated object is given again as an initial add of its current
		// state, and each deletion (which the child never acknowledged) as a
		// tombstone with the object's last state; nothing else.
		var events []event
		seen := map[string]int{}
		for _, e := range c.h.snapshot() {
			seen[e.key]++
			rv, updated := m.updated[e.key]
			if !updated {
				rv = m.created[e.key]
			}
			_, deleted := m.deleted[e.key]
			switch {
			case e.kind == evAdd && e.initial && e.rv == rv:
			case deleted && e.kind == evDelete && e.tombstone && e.tombstoneObj:
			default:
				t.Errorf("after the kill: unexpected %v", e)
			}
			events = append(events, e)
		}
		m.checkEachSeenOnce(t, seen)
		if len(events) != m.changedKeys() {
			t.Errorf("after the kill: handler got %d calls, want %d", len(events), m.changedKeys())
		}
		stop(db, c)
	})
}

// TestCheckpointChild is the child half of TestCheckpointSkipsAcknowledgedObjects:
// it starts the checkpointed informer warm on the file, with commits only on
// request, waits for the given number of handler calls, flushes the store
// (the changes are committed), then acknowledges every object it was given
// (in memory: no commit follows), reports, and waits to be killed.
func TestCheckpointChild(t *testing.T) {
	cfg := childConfig(t, "TestCheckpointSkipsAcknowledgedObjects")
	expect, err := strconv.Atoi(os.Getenv(childExpectEnv))
	if err != nil {
		t.Fatal(err)
	}
	db, err := persist.Open(os.Getenv(childDBEnv), persist.Options{Scheme: scheme.Scheme, BatchInterval: time.Hour, BatchLimit: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	spec := informerSpec{collection: checkpointCollection, resource: "configmaps", db: db,
		selector: e2eLabel + "=" + checkpointTest, cs: newClientset(t, cfg, nil)}
	c := startCheckpointRun(t, spec, false)
	waitSynced(t, c.inf, c.reg)
	if err := poll.Wait(time.Minute, func() bool { return c.h.len() >= expect }); err != nil {
		t.Fatalf("handler got %d of %d calls", c.h.len(), expect)
	}
	if err := db.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	acked := 0
	for _, e := range c.h.snapshot() {
		if e.kind == evDelete {
			continue
		}
		obj, ok, err := c.inf.GetStore().GetByKey(e.key)
		if err != nil || !ok {
			t.Fatalf("%s: %v %v", e.key, ok, err)
		}
		if err := c.cp.Ack(obj); err != nil {
			t.Fatal(err)
		}
		acked++
	}
	fmt.Printf("%ssynced events=%d acked=%d\n", childLinePrefix, c.h.len(), acked)
	<-t.Context().Done() // Killed long before the test times out.
}
