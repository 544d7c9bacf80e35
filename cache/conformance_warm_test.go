package cache_test

import (
	"flag"
	"fmt"
	"math/rand"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/boltinformer/boltinformer/internal/testing/poll"
)

// Warm-start conformance checks that need control over time or timing,
// which the side-by-side run cannot have (client-go's informer does not
// take a clock).

var confWarmSeeds = flag.Int("conformance.warm-seeds", 60, "number of seeds TestConformanceWarmStartResync runs")

// confPopulate fills src with n objects through a cold start of our
// informer on path, so that the file holds them at the source's latest
// resourceVersion.
func confPopulate(src *confSource, rng *rand.Rand, path string, n int) error {
	for i := 0; i < n; i++ {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: confNamespaces[i%2], Name: fmt.Sprintf("p%02d", i/2), Labels: map[string]string{"gen": strconv.Itoa(rng.Intn(1000))}}}
		src.change(watch.Added, p, true)
	}
	o, err := openConfOurs(src, confOursOptions{path: path, batchInterval: 2 * time.Millisecond})
	if err != nil {
		return err
	}
	o.run()
	want := src.state()
	if err := poll.Wait(10*time.Second, func() bool {
		return o.inf.HasSynced() && confEqualState(confStateOf(o.inf.GetStore().List()), want) && o.lw.active() != nil
	}); err != nil {
		_, _ = o.stop()
		return fmt.Errorf("cold start to populate the file: %w", err)
	}
	rv, err := o.stop()
	if err != nil {
		return err
	}
	if rv != strconv.Itoa(src.lastRV) {
		return fmt.Errorf("file holds resourceVersion %q after the cold start, want %d", rv, src.lastRV)
	}
	return nil
}

// TestConformanceWarmStartConcurrentJoin adds a handler while a warm start
// is under way, right after Run has marked the informer started. As with
// client-go's informer joining during its initial list, the handler must
// get every object exactly once. It gets it either through the warm start's
// initial adds or through the synthetic adds of a late join, never both.
func TestConformanceWarmStartConcurrentJoin(t *testing.T) {
	src := newConfSource()
	defer src.shutdown()
	path := filepath.Join(t.TempDir(), "cache.db")
	const objects = 20
	if err := confPopulate(src, rand.New(rand.NewSource(1)), path, objects); err != nil {
		t.Fatal(err)
	}
	stored := src.state()
	iterations := 500
	if confRaceEnabled {
		iterations = 150
	}
	var phase atomic.Int64
	failures := 0
	for i := 0; i < iterations && failures < 3; i++ {
		o, err := openConfOurs(src, confOursOptions{path: path, batchInterval: 2 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		early := newConfRecorder("registered before Run", &phase, false)
		earlyReg, err := o.inf.AddEventHandler(early)
		if err != nil {
			t.Fatal(err)
		}
		// Several joiners, each adding itself as soon as Run has marked the
		// informer started, widen the window the test probes.
		const joiners = 4
		recs := []*confRecorder{early}
		regs := make([]cache.ResourceEventHandlerRegistration, joiners)
		errs := make([]error, joiners)
		var wg sync.WaitGroup
		for j := 0; j < joiners; j++ {
			rec := newConfRecorder(fmt.Sprintf("joiner %d (joined during the warm start)", j), &phase, false)
			recs = append(recs, rec)
			wg.Go(func() {
				for !o.inf.HasStarted() {
					runtime.Gosched()
				}
				regs[j], errs[j] = o.inf.AddEventHandler(rec)
			})
		}
		o.run()
		wg.Wait()
		for j := range regs {
			if errs[j] != nil {
				t.Fatal(errs[j])
			}
		}
		// Every registration, the early one included: the warm delivery
		// holds no lock a joiner waits for, so the early handler may still be
		// working through its initial adds when the joiners have synced.
		if err := poll.Wait(10*time.Second, func() bool {
			for _, reg := range append(regs, earlyReg) {
				if !reg.HasSynced() {
					return false
				}
			}
			return o.lw.active() != nil
		}); err != nil {
			t.Fatalf("iteration %d: handlers did not sync: %v", i, err)
		}
		// A fence: one change by watch. A handler that has recorded it has
		// recorded everything the informer sent it before, so a duplicate
		// add still in flight cannot be missed.
		fence := confFence(src)
		if err := poll.Wait(10*time.Second, func() bool {
			for _, rec := range recs {
				if !slices.ContainsFunc(rec.all(), func(e confRecorded) bool { return strings.HasPrefix(e.event, fence) }) {
					return false
				}
			}
			return true
		}); err != nil {
			t.Fatalf("iteration %d: handlers did not get the fence %q: %v", i, fence, err)
		}
		for _, rec := range recs {
			evs := rec.all()
			at := slices.IndexFunc(evs, func(e confRecorded) bool { return strings.HasPrefix(e.event, fence) })
			if at != len(evs)-1 {
				failures++
				t.Errorf("iteration %d: handler %s: events after the fence: %v", i, rec.name, confEventStrings(evs[at+1:]))
			}
			evs = evs[:at]
			st, err := confReplay(evs)
			switch {
			case err != nil:
				failures++
				t.Errorf("iteration %d: handler %s: %v\n  events: %v", i, rec.name, err, confEventStrings(evs))
			case !confEqualState(st, stored) || len(evs) != len(stored):
				failures++
				t.Errorf("iteration %d: handler %s got %d events for %d stored objects, ending with %v\n  events: %v", i, rec.name, len(evs), len(stored), st, confEventStrings(evs))
			}
			for _, e := range evs {
				if !e.isInInitialList {
					failures++
					t.Errorf("iteration %d: handler %s: %q is not marked as part of the initial list", i, rec.name, e.event)
					break
				}
			}
		}
		rv, err := o.stop()
		if err != nil {
			t.Fatal(err)
		}
		// The next warm start resumes from the fence.
		if rv != strconv.Itoa(src.lastRV) {
			t.Fatalf("iteration %d: file holds resourceVersion %q after stop, want %d", i, rv, src.lastRV)
		}
		stored = src.state()
	}
}

// TestConformanceWarmStartFromResourceVersionZero: a collection listed at
// resourceVersion "0" (a fake that never changed; "0" names no point in
// history) cannot be resumed: the reflector treats "0" as a cold start and
// lists. The informer must then behave as a cold start too: report synced
// only after that list, and deliver the listed objects as initial adds.
func TestConformanceWarmStartFromResourceVersionZero(t *testing.T) {
	src := newConfSource()
	defer src.shutdown()
	path := filepath.Join(t.TempDir(), "cache.db")

	// Cold start on an empty, never-changed source: the list says "0".
	o, err := openConfOurs(src, confOursOptions{path: path, batchInterval: 2 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	o.run()
	if err := poll.Wait(10*time.Second, func() bool { return o.inf.HasSynced() && o.lw.active() != nil }); err != nil {
		t.Fatal(err)
	}
	rv, err := o.stop()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("file holds resourceVersion %q after listing a never-changed source", rv)

	for i := 0; i < 3; i++ {
		src.change(watch.Added, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns0", Name: fmt.Sprintf("p%02d", i)}}, true)
	}
	want := confInitialEvents(src.state())

	o, err = openConfOurs(src, confOursOptions{path: path, batchInterval: 2 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if _, err := o.stop(); err != nil {
			t.Error(err)
		}
	}()
	var phase atomic.Int64
	rec := newConfRecorder("handler", &phase, false)
	if _, err := o.inf.AddEventHandler(rec); err != nil {
		t.Fatal(err)
	}
	release := o.lw.setListGate()
	defer release()
	o.run()
	// Until the list is answered, the informer has nothing to be synced
	// with. Check once the list request is held at the gate: by then the
	// informer has decided it cannot resume.
	poll.Until(t, 10*time.Second, "the list request", func() bool { return o.lw.listsHeld() == 1 })
	if lists, _, _ := o.lw.counts(); lists != 0 {
		t.Fatalf("list gate did not hold (%d lists)", lists)
	}
	if o.inf.HasSynced() {
		t.Errorf("informer reported synced before its list was answered, with a file at resourceVersion %q, which cannot be resumed (the reflector lists)", rv)
	}
	release()
	if err := poll.Wait(10*time.Second, func() bool { return rec.phaseCount(0) >= len(want) }); err != nil {
		t.Fatalf("handler got %v, want %v: %v", rec.phaseEvents(0), want, err)
	}
	if got := confCanon(rec.phaseEvents(0), false); !slices.Equal(got, confCanon(want, false)) {
		t.Errorf("after a start that had to list, handler got\n  %v\nwant (initial adds, as on a cold start)\n  %v", got, want)
	}
}

// TestConformanceWarmStartResync checks a warm start of an informer with
// resync against client-go's resync rules, on a fake clock: handler A
// resyncs every R (the informer's check period), B never, C every 2R. The
// first watch after the restart is held so the test decides whether the
// informer's first resync check happens before the relist or not.
//
// client-go's rule sends an update whose resourceVersion did not change to
// the listeners marked "syncing". A resync and a relisted object that did
// not change give such updates. client-go marks every new listener. The
// resync check, every check period, marks exactly those due. A warm start
// instead marks exactly the listeners with a resync period
// (processor.SelectResyncingListeners). That keeps the design's promise
// that unchanged objects of the relist reach only resyncing handlers. So a
// relist before the first check sends unchanged objects to A and C. After
// the check it sends them only to the handlers the check found due, A but
// not B or C. B never gets them.
func TestConformanceWarmStartResync(t *testing.T) {
	confRunSeeds(t, "TestConformanceWarmStartResync", confSeedList(*confWarmSeeds), runWarmResyncSeed)
}

const confResync = time.Minute

func runWarmResyncSeed(seed int64, dir string, logf func(string, ...any)) (err error) {
	rng := rand.New(rand.NewSource(seed))
	src := newConfSource()
	defer src.shutdown()
	path := filepath.Join(dir, "cache.db")
	if err := confPopulate(src, rng, path, 3+rng.Intn(12)); err != nil {
		return err
	}
	stored := src.state()
	storedRV := src.lastRV
	stepFirst := rng.Intn(2) == 0
	force410 := rng.Intn(3) != 0
	if force410 {
		src.resetWatch()
	}
	r := &confRun{rng: rng, src: src}
	var missed []string
	for i := rng.Intn(8); i > 0; i-- {
		missed = append(missed, r.randomChange(true).watchEvent)
	}
	final := src.state()
	expired := src.resumeExpires(storedRV)
	logf("stored %v at %d; force410=%t stepFirst=%t; while down %v → final %v (410: %t)", stored, storedRV, force410, stepFirst, missed, final, expired)

	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	// Synced at open: the first watch is held (see above), so a caught-up
	// sync would wait for it; what is compared here is the resync rule.
	o, err := openConfOurs(src, confOursOptions{path: path, batchInterval: 2 * time.Millisecond, resync: confResync, clock: clk, backoff: time.Millisecond, syncedAtOpen: true})
	if err != nil {
		return err
	}
	defer func() {
		if _, stopErr := o.stop(); err == nil {
			err = stopErr
		}
	}()
	var phase atomic.Int64
	type handler struct {
		name   string
		period time.Duration
		rec    *confRecorder
		next   time.Time // client-go's nextResync for this listener
		want   []string
	}
	hs := []*handler{{name: "A", period: confResync}, {name: "B", period: 0}, {name: "C", period: 2 * confResync}}
	for _, h := range hs {
		h.rec = newConfRecorder(h.name, &phase, false)
		if _, err := o.inf.AddEventHandlerWithResyncPeriod(h.rec, h.period); err != nil {
			return err
		}
		h.next = clk.Now().Add(h.period)
	}
	// syncing mirrors the processor's marks for sync notifications. client-go
	// marks every new listener until a resync check says otherwise. A warm
	// start marks exactly the listeners with a resync period
	// (processor.SelectResyncingListeners). Unchanged objects of the relist
	// after a 410 thus reach only those.
	syncing := map[*handler]bool{}
	for _, h := range hs {
		syncing[h] = h.period > 0
	}
	check := func(now time.Time) {
		for _, h := range hs {
			due := h.period > 0 && !now.Before(h.next)
			syncing[h] = due
			if due {
				h.next = now.Add(h.period)
			}
		}
	}
	expectResync := func(st confState) {
		for _, h := range hs {
			if syncing[h] {
				for _, k := range st.keys() {
					h.want = append(h.want, confUpdateEvent(k, st[k], st[k]))
				}
			}
		}
	}
	// end waits for the expected events of this step, compares, and starts
	// the next step. Poke, if set, is called while waiting (to move the fake
	// clock past backoff timers).
	end := func(step string, syncs bool, poke func()) error {
		if err := poll.Wait(20*time.Second, func() bool {
			if poke != nil {
				poke()
			}
			for _, h := range hs {
				if h.rec.phaseCount(phase.Load()) < len(h.want) {
					return false
				}
			}
			return true
		}); err != nil {
			var b strings.Builder
			for _, h := range hs {
				fmt.Fprintf(&b, "\n  %s got %v\n    want %v", h.name, h.rec.phaseEvents(phase.Load()), h.want)
			}
			return fmt.Errorf("step %q: handlers did not get the expected events: %v%s", step, err, b.String())
		}
		// With the watch open, a fence (see confFence) makes sure nothing
		// of this step is still in flight. Without one (the watch is held,
		// or not yet reopened), an event still in flight is recorded in the
		// next step, whose comparison fails on it.
		if o.lw.active() != nil {
			fence := confFence(src)
			for _, h := range hs {
				h.want = append(h.want, fence)
			}
			if err := poll.Wait(10*time.Second, func() bool {
				for _, h := range hs {
					if !slices.ContainsFunc(h.rec.phaseEvents(phase.Load()), func(e string) bool { return strings.HasPrefix(e, fence) }) {
						return false
					}
				}
				return true
			}); err != nil {
				return fmt.Errorf("step %q: handlers did not get the fence %s: %v", step, fence, err)
			}
		}
		for _, h := range hs {
			got := confCanon(h.rec.phaseEvents(phase.Load()), syncs)
			if d := confDiff(got, confCanon(h.want, syncs)); d != "" {
				return fmt.Errorf("step %q: handler %s (resync %v): %s", step, h.name, h.period, d)
			}
			h.want = nil
		}
		logf("step %q ok", step)
		phase.Add(1)
		return nil
	}

	release := o.lw.setGate()
	defer release()
	o.run()
	for _, h := range hs {
		h.want = confInitialEvents(stored)
	}
	if err := end("warm start: initial adds of the stored state", false, nil); err != nil {
		return err
	}
	// HasSynced turns true on the informer's own goroutines, not before the
	// handlers' calls: wait for it, as a caller of WaitForCacheSync would.
	if err := poll.Wait(10*time.Second, o.inf.HasSynced); err != nil {
		return fmt.Errorf("informer not synced after handing out the stored state: %w", err)
	}

	// waitTimer waits until the resync timer (the only timer while the
	// watch is held or open) is armed.
	waitTimer := func() error {
		return poll.Wait(10*time.Second, func() bool { return clk.HasWaiters() })
	}
	if stepFirst {
		if err := waitTimer(); err != nil {
			return fmt.Errorf("resync timer not armed: %w", err)
		}
		clk.Step(confResync)
		check(clk.Now())
		expectResync(stored)
		if err := end("first resync check, before the watch", true, nil); err != nil {
			return err
		}
	}

	release()
	if expired {
		for _, e := range confRelistEvents(stored, final) {
			for _, h := range hs {
				if !e.unchanged || syncing[h] {
					h.want = append(h.want, e.event)
				}
			}
		}
	} else {
		for _, h := range hs {
			h.want = append(h.want, missed...)
		}
	}
	// After a 410 (but one answering the start's own resumed watch) the
	// reflector waits one backoff interval (1–2ms here) on the fake clock
	// before relisting: keep stepping while a timer waits.
	// The steps are far below the resync period.
	var stepped time.Duration
	poke := func() {
		if expired && clk.HasWaiters() && stepped < time.Second {
			clk.Step(2 * time.Millisecond)
			stepped += 2 * time.Millisecond
		}
	}
	what := "resumed watch delivers the missed changes"
	if expired {
		what = "410, relist reconciles against the stored state"
	}
	if err := end(what, false, poke); err != nil {
		return err
	}
	// The source holds final and, from here on, the fence object. The
	// reflector records an event's resourceVersion after queueing the event,
	// so the store (and handlers) may have it first: wait for both.
	lastRV := strconv.Itoa(src.lastRV)
	if err := poll.Wait(10*time.Second, func() bool {
		return confEqualState(confStateOf(o.inf.GetStore().List()), src.state()) && o.lw.active() != nil &&
			o.inf.LastSyncResourceVersion() == lastRV
	}); err != nil {
		return fmt.Errorf("store %v, source %v, watching=%t, LastSyncResourceVersion %q (want %s): %w",
			confStateOf(o.inf.GetStore().List()), src.state(), o.lw.active() != nil, o.inf.LastSyncResourceVersion(), lastRV, err)
	}

	// Two more resync checks on the live watch: A resyncs each time, C
	// when its 2R are up, B never.
	for i := 1; i <= 2; i++ {
		if err := waitTimer(); err != nil {
			return fmt.Errorf("resync timer not armed after the restart: %w", err)
		}
		clk.Step(confResync)
		check(clk.Now())
		expectResync(src.state())
		if err := end(fmt.Sprintf("resync check %d after the watch started", i), true, nil); err != nil {
			return err
		}
	}
	return nil
}
