package e2e

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"

	"github.com/boltinformer/boltinformer/internal/testing/apiservertest"
	"github.com/boltinformer/boltinformer/internal/testing/poll"
	"github.com/boltinformer/boltinformer/persist"
	"github.com/boltinformer/boltinformer/recovery"
	"github.com/boltinformer/boltinformer/reflector"
)

var flagRecoveryObjects = flag.Int("e2e.recovery-objects", 2000,
	"realistic Pods TestRecoveryAfterChurn creates")

const (
	recoveryTest       = "recovery"
	recoveryCollection = "pods-recovery"
	// Changes made while the informer is down, besides the churn.
	recoveryUpdates, recoveryDeletes, recoveryRecreates, recoveryCreates = 120, 60, 40, 60
	// windowChurnEvery paces the patches of Pods outside the informer's
	// selection that roll the watch cache's history of Pods on: 20 a
	// second. The watch cache keeps at least 75 s of history, in a ring
	// that doubles while it is full of fresher events; from an empty ring
	// this rate evicts the first event after about 90 s.
	windowChurnEvery = 50 * time.Millisecond
	// selectedChurnEvery paces the patches of the informer's own Pods,
	// which go on through the recoveries: few enough that the recovery
	// fetches objects one by one.
	selectedChurnEvery = time.Second
	// childQPSEnv sets the child's client QPS (burst 1): its fetches are
	// slow enough for the kill to land in the middle of them.
	childQPSEnv = "BOLTINFORMER_E2E_CHILD_QPS"
	// childFetchedLine is what TestRecoveryChild prints once its handler
	// got a few changes of the recovery.
	childFetchedLine = "recovering"
)

// TestRecoveryAfterChurn proves the recovery after a 410 against the real
// apiserver, with realistic Pods:
//
//  1. An informer with a metadata lister syncs cold; a checkpointed handler
//     acknowledges every Pod. It stops.
//  2. While it is down, Pods are updated, deleted, deleted and recreated
//     under the same name (a new UID) and created, and a churn of patches
//     runs until the watch cache no longer holds the stored
//     resourceVersion (a watch from it answers 410): the downtime is beyond
//     the window because of churn, not an apiserver restart. The churn goes
//     on until the end.
//  3. A child process starts on the file, gets the 410 and recovers, its
//     fetches slowed by a client rate limit; it is SIGKILLed once its
//     handler has seen changes of the recovery: mid-recovery. The file
//     must carry the must-list mark.
//  4. An informer in this process starts on the file. It must recover (no
//     full list) and:
//     - end with exactly the server's state;
//     - never give a handler a key at an older resourceVersion than one
//     given before (initial adds included);
//     - give the checkpointed handler exactly the keys that changed since it
//     acknowledged them, ending at their final state, and nothing else;
//     - read far fewer bytes fetching objects than a full list, and fewer in
//     all (metadata list included) than a full list. The bytes are logged.
func TestRecoveryAfterChurn(t *testing.T) {
	n := *flagRecoveryObjects
	srv := apiservertest.Start(t, apiservertest.Options{})
	cfg := srv.Config()
	admin := newClientset(t, cfg, nil)
	namespaces := []string{"recovery-0", "recovery-1", "recovery-2", "recovery-3"}
	createNamespaces(t, admin, namespaces...)
	populateRealisticPods(t, admin, recoveryTest, namespaces, n)
	// The churn that expires the stored resourceVersion patches these.
	createNamespaces(t, admin, "recovery-churn")
	var windowPods []string
	for i := range 20 {
		p, err := admin.CoreV1().Pods("recovery-churn").Create(t.Context(), pod("recovery-churn", fmt.Sprintf("churn-%02d", i), "churn"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		windowPods = append(windowPods, "recovery-churn/"+p.Name)
	}
	// A fresh watch cache: its history holds only what happens from here
	// on, so that the churn alone decides when the stored resourceVersion
	// leaves it (the population would otherwise have grown the ring).
	srv.RestartAPIServer(t)
	selector := e2eLabel + "=" + recoveryTest
	path := cachePath(t)
	spec := informerSpec{collection: recoveryCollection, resource: "pods", selector: selector, recovery: true, warmListBelow: -1}

	// 1. Cold, every object acknowledged.
	db := openDB(t, path)
	spec.db, spec.cs = db, newClientset(t, cfg, nil)
	first := startCheckpointRun(t, spec, true)
	waitSynced(t, first.inf, first.reg)
	poll.Until(t, time.Minute, "every Pod acknowledged", func() bool { return first.cp.Len() == n })
	first.r.stop()
	acked := storeState(t, first.inf.GetStore())
	storedRV := first.inf.Indexer().Collection().ResourceVersion()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// 2. Down: changes, then churn until the stored resourceVersion expired.
	changes := changePods(t, admin, acked)
	churn := startPodChurn(admin, liveKeys(acked, changes), selectedChurnEvery)
	defer churn.stop()
	window := startPodChurn(admin, windowPods, windowChurnEvery)
	defer window.stop()
	start := time.Now()
	waitExpired(t, admin, selector, storedRV)
	window.stop()
	t.Logf("the stored resourceVersion %s expired %v after the changes (%d patches outside the selection, %d of selected Pods so far)",
		storedRV, time.Since(start).Round(time.Second), window.patches.Load(), churn.patches.Load())

	// 3. A child recovers and is killed in the middle.
	childLog := newChildLog(t)
	env := childEnvironment(cfg, path, childQPSEnv+"=20",
		childBatchIntervalEnv+"="+stormShortCommit.String())
	c := startChild(t, "TestRecoveryChild", env, childLog)
	poll.Until(t, 3*time.Minute, "the child in the middle of its recovery", func() bool {
		select {
		case <-c.waited:
			t.Fatalf("child exited: %v\n%s", c.err, tail(childLog.Name()))
		default:
		}
		return slices.ContainsFunc(c.out.lines(), func(l string) bool { return strings.HasPrefix(l, childFetchedLine) })
	})
	c.kill()
	t.Logf("child reported: %s", summarizeChildLines(c.out.lines()))

	// 4. The final informer.
	db = openDB(t, path)
	counter := newByteCounter("pods")
	counted := srv.Config()
	counted.Wrap(counter.wrap)
	obs := &recoveryObserver{}
	spec.db, spec.cs, spec.observer = db, newClientset(t, counted, nil), obs
	inf := newInformer(t, spec)
	coll := inf.Indexer().Collection()
	if !coll.MustList() {
		t.Fatalf("the cache file carries no must-list mark after the kill: the kill did not land in the recovery (child: %v)", c.out.lines())
	}
	cp, err := inf.Checkpoint(checkpointName)
	if err != nil {
		t.Fatal(err)
	}
	h := &ackingHandler{t: t, cp: cp, ack: true}
	reg, err := cp.AddEventHandler(h)
	if err != nil {
		t.Fatal(err)
	}
	mono := &monotonic{last: map[string]uint64{}}
	if _, err := inf.AddEventHandler(mono); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	r := run(t, inf)
	waitSynced(t, inf, reg)
	synced := time.Since(began)
	poll.Until(t, time.Minute, "the recovery's end", func() bool { return obs.recovered() != nil })
	recoveryBytes, recoveryRequests := counter.snapshot()

	churn.stop()
	server := serverPods(t, admin, "", selector)
	waitServerState(t, time.Minute, "the informer converging to the server's state", server,
		func() state { return serverPods(t, admin, "", selector) }, inf, obs)
	// A sentinel, created last, is the last event: once the checkpointed
	// handler has it, it has everything before it.
	sentinel, err := admin.CoreV1().Pods(namespaces[0]).Create(t.Context(), realisticPod(namespaces[0], recoveryTest, n+1), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sentinelKey := namespaces[0] + "/" + sentinel.Name
	server[sentinelKey] = sentinel.ResourceVersion
	poll.Until(t, time.Minute, "the checkpointed handler seeing the sentinel", func() bool { return h.seen(sentinelKey) })
	requireSameState(t, "store after the recovery", server, storeState(t, inf.GetStore()))
	r.stop()

	if coll.MustList() {
		t.Error("the collection is still marked must-list")
	}
	if causes := obs.startCauses(); fmt.Sprint(causes) != fmt.Sprint([]reflector.StartCause{reflector.CauseRelistError}) {
		t.Errorf("start causes %v, want one recovery at once (the collection owed a list)", causes)
	}
	if v := mono.violations(); len(v) > 0 {
		t.Errorf("a handler saw resourceVersions go backwards:\n  %s", strings.Join(v, "\n  "))
	}
	checkExactlyTheChanges(t, h.snapshot(), acked, server)

	// Bytes: what the recovery read, beside a full list of the same Pods.
	fullCounter := newByteCounter("pods")
	fullCfg := srv.Config()
	fullCfg.Wrap(fullCounter.wrap)
	fullClient := newClientset(t, fullCfg, nil)
	if _, err := fullClient.CoreV1().Pods("").List(t.Context(), metav1.ListOptions{LabelSelector: selector, ResourceVersion: "0"}); err != nil {
		t.Fatal(err)
	}
	fullBytes, _ := fullCounter.snapshot()
	full := fullBytes["list"]
	objects := recoveryBytes["fetch"] + recoveryBytes["list"]
	total := objects + recoveryBytes["metadata"]
	stats := obs.recovered()
	t.Logf("recovery: synced %v after start; %+v", synced.Round(time.Millisecond), *stats)
	t.Logf("recovery read %s: metadata list %s (%d requests), objects %s (%d fetches, %d lists); a full list reads %s (%d Pods): %.0f%% in all, %.1f%% for objects",
		mib(total), mib(recoveryBytes["metadata"]), recoveryRequests["metadata"], mib(objects), recoveryRequests["fetch"], recoveryRequests["list"],
		mib(full), len(server), 100*float64(total)/float64(full), 100*float64(objects)/float64(full))
	if recoveryRequests["list"] != 0 {
		t.Errorf("%d full lists, want none (%d of %d Pods changed)", recoveryRequests["list"], stats.Fetch, len(server))
	}
	if objects*5 > full {
		t.Errorf("the recovery read %s of objects, over a fifth of a full list (%s)", mib(objects), mib(full))
	}
	if total >= full {
		t.Errorf("the recovery read %s in all, no less than a full list (%s)", mib(total), mib(full))
	}
}

// TestRecoveryChild is the child half of TestRecoveryAfterChurn: it runs
// the recovering informer on the cache file with a rate-limited client and
// prints childFetchedLine once its handler got five adds or updates after
// its initial adds (the recovery's deletions come before them, with its
// must-list mark, so by then these are committed: a commit every 20 ms),
// then waits to be killed.
func TestRecoveryChild(t *testing.T) {
	cfg := childConfig(t, "TestRecoveryAfterChurn")
	qps, err := strconv.Atoi(os.Getenv(childQPSEnv))
	if err != nil {
		t.Fatalf("%s: %v", childQPSEnv, err)
	}
	cfg.QPS, cfg.Burst = float32(qps), 1
	opts := persist.Options{Scheme: scheme.Scheme}
	if opts.BatchInterval, err = time.ParseDuration(os.Getenv(childBatchIntervalEnv)); err != nil {
		t.Fatalf("%s: %v", childBatchIntervalEnv, err)
	}
	db, err := persist.Open(os.Getenv(childDBEnv), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	inf := newInformer(t, informerSpec{cs: newClientset(t, cfg, nil), db: db, collection: recoveryCollection,
		resource: "pods", selector: e2eLabel + "=" + recoveryTest, observer: childObserver{}, recovery: true, warmListBelow: -1,
		// One by one at 20 requests a second, the fetches last long enough
		// for the kill to land among them whatever the churn changed; a
		// namespace or full list would bring every change at once, and
		// could end the recovery before its must-list mark's commit.
		fetchOneByOne: true})
	var changes atomic.Int64
	var once sync.Once
	note := func() {
		if changes.Add(1) >= 5 {
			once.Do(func() { fmt.Printf("%s%s\n", childLinePrefix, childFetchedLine) })
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(_ interface{}, initial bool) {
			if !initial {
				note()
			}
		},
		UpdateFunc: func(_, _ interface{}) { note() },
	}); err != nil {
		t.Fatal(err)
	}
	run(t, inf)
	<-t.Context().Done() // killed long before the test times out
}

// podChanges are the changes changePods made.
type podChanges struct {
	updated, deleted, recreated, created []string
}

// changePods updates, deletes, deletes and recreates (same name, new UID)
// and creates Pods, distinct keys chosen evenly over base.
func changePods(t *testing.T, cs kubernetes.Interface, base state) podChanges {
	t.Helper()
	ctx := t.Context()
	keys := sortedKeys(base)
	var ch podChanges
	pick := func(i int) string { return keys[(i*7919)%len(keys)] } // 7919 is prime: distinct for i < len(keys)
	i := 0
	for range recoveryUpdates {
		key := pick(i)
		i++
		ns, name := splitKey(key)
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"changed":"%d"}}}`, i)
		if _, err := cs.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatalf("patch %s: %v", key, err)
		}
		ch.updated = append(ch.updated, key)
	}
	for range recoveryDeletes + recoveryRecreates {
		key := pick(i)
		i++
		ns, name := splitKey(key)
		if err := cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Fatalf("delete %s: %v", key, err)
		}
		if len(ch.deleted) < recoveryDeletes {
			ch.deleted = append(ch.deleted, key)
			continue
		}
		p := realisticPod(ns, recoveryTest, i)
		p.Name = name
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("recreate %s: %v", key, err)
		}
		ch.recreated = append(ch.recreated, key)
	}
	for j := range recoveryCreates {
		ns := splitNamespace(keys[j%len(keys)])
		p := realisticPod(ns, recoveryTest, len(keys)+10+j)
		p.Name = fmt.Sprintf("created-%04d", j)
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create: %v", err)
		}
		ch.created = append(ch.created, ns+"/"+p.Name)
	}
	return ch
}

func splitNamespace(key string) string {
	ns, _ := splitKey(key)
	return ns
}

// liveKeys returns the keys of base that ch did not delete.
func liveKeys(base state, ch podChanges) []string {
	gone := map[string]bool{}
	for _, k := range ch.deleted {
		gone[k] = true
	}
	var keys []string
	for _, k := range sortedKeys(base) {
		if !gone[k] {
			keys = append(keys, k)
		}
	}
	return keys
}

// podChurn patches random Pods of a set, one every so often, until
// stopped.
// stop is checked only between patches: a patch cancelled in flight has no
// known outcome, and could land after the test listed the server's state.
type podChurn struct {
	stopped chan struct{}
	done    chan struct{}
	once    sync.Once
	patches atomic.Int64
}

func startPodChurn(cs kubernetes.Interface, keys []string, every time.Duration) *podChurn {
	c := &podChurn{stopped: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		rng := rand.New(rand.NewPCG(1, 2))
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-c.stopped:
				return
			case <-tick.C:
			}
			key := keys[rng.IntN(len(keys))]
			ns, name := splitKey(key)
			patch := fmt.Sprintf(`{"metadata":{"annotations":{"churn":"%d"}}}`, c.patches.Load())
			// A patch that hangs is given up after a minute, so stop
			// cannot wait for ever.
			reqCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
			if _, err := cs.CoreV1().Pods(ns).Patch(reqCtx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err == nil {
				c.patches.Add(1)
			}
			cancel()
		}
	}()
	return c
}

// stop ends the churn and waits for its last patch.
func (c *podChurn) stop() {
	c.once.Do(func() { close(c.stopped) })
	<-c.done
}

// waitExpired waits until a watch of the selected Pods from rv is answered
// 410 Expired: the watch cache no longer holds that resourceVersion.
func waitExpired(t *testing.T, cs kubernetes.Interface, selector, rv string) {
	t.Helper()
	poll.Until(t, 5*time.Minute, "resourceVersion "+rv+" to expire", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		w, err := cs.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{ResourceVersion: rv, LabelSelector: selector})
		if err != nil {
			return apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
		}
		defer w.Stop()
		select {
		case e := <-w.ResultChan():
			if e.Type != watch.Error {
				return false
			}
			err := apierrors.FromObject(e.Object)
			return apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
		case <-ctx.Done():
			return false
		}
	})
}

// monotonic is a handler that records every key's resourceVersion as it is
// given and reports any call that gives a key at an older one.
type monotonic struct {
	mu   sync.Mutex
	last map[string]uint64
	bad  []string
}

func (m *monotonic) see(what string, obj interface{}, allowEqual bool) {
	key, rv := objectKeyRV(obj)
	n, err := strconv.ParseUint(rv, 10, 64)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		m.bad = append(m.bad, fmt.Sprintf("%s %s: resourceVersion %q", what, key, rv))
		return
	}
	if last, ok := m.last[key]; ok && (n < last || n == last && !allowEqual) {
		m.bad = append(m.bad, fmt.Sprintf("%s %s at %d after %d", what, key, n, last))
	}
	m.last[key] = max(m.last[key], n)
}

func (m *monotonic) OnAdd(obj interface{}, _ bool) { m.see("add", obj, false) }
func (m *monotonic) OnUpdate(_, obj interface{})   { m.see("update", obj, false) }
func (m *monotonic) OnDelete(obj interface{}) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		if d.Obj != nil {
			m.see("tombstone", d.Obj, true) // the last state given
		}
		return
	}
	m.see("delete", obj, false)
}

func (m *monotonic) violations() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.bad)
}

// checkExactlyTheChanges fails t unless events, a checkpointed handler's
// calls after a restart, name exactly the keys whose state differs between
// acked (what it acknowledged) and final, the last call of each giving its
// final state (a deletion if it is gone).
func checkExactlyTheChanges(t *testing.T, events []event, acked, final state) {
	t.Helper()
	last := map[string]event{}
	for _, e := range events {
		last[e.key] = e
	}
	keys := map[string]bool{}
	for k := range acked {
		keys[k] = true
	}
	for k := range final {
		keys[k] = true
	}
	var wrong []string
	changed := 0
	for key := range keys {
		a, hadA := acked[key]
		f, hasF := final[key]
		e, got := last[key]
		switch {
		case hadA && hasF && a == f:
			if got {
				wrong = append(wrong, fmt.Sprintf("unchanged %s (rv %s) was given: %v", key, a, e))
			}
			continue
		case !got:
			wrong = append(wrong, fmt.Sprintf("changed %s (rv %q → %q) was not given", key, a, f))
		case hasF && (e.kind == evDelete || e.rv != f):
			wrong = append(wrong, fmt.Sprintf("%s: last call %v, want its state at rv %s", key, e, f))
		case !hasF && e.kind != evDelete:
			wrong = append(wrong, fmt.Sprintf("%s: last call %v, want a deletion", key, e))
		}
		changed++
	}
	slices.Sort(wrong)
	if len(wrong) > 10 {
		wrong = append(wrong[:10], fmt.Sprintf("... and %d more", len(wrong)-10))
	}
	if len(wrong) > 0 {
		t.Errorf("checkpointed handler (%d calls, %d keys changed):\n  %s", len(events), changed, strings.Join(wrong, "\n  "))
	}
	t.Logf("checkpointed handler: %d calls for %d changed keys of %d", len(events), changed, len(keys))
}

// recoveryObserver is an observer that also records the recovery's stats.
type recoveryObserver struct {
	observer
	stats atomic.Pointer[recovery.Stats]
}

var _ recovery.Observer = (*recoveryObserver)(nil)

func (o *recoveryObserver) Recovered(_ reflector.StartCause, _ string, stats recovery.Stats) {
	o.stats.Store(&stats)
}

func (o *recoveryObserver) recovered() *recovery.Stats { return o.stats.Load() }
