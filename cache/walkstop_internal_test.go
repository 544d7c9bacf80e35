package cache

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"

	"github.com/boltinformer/boltinformer/internal/testing/poll"
)

// An informer that stops during a warm start's walk ends the walk short of
// the keys it has not reached. A watch event popped just before the stop is
// still applied, so its key must still be handed out first. Otherwise a
// start handler is told that an object was deleted before it was ever given
// the object.
//
// The events are held at the delivery lock while the informer stops and the
// walk ends; then they are let go. A stop that wins the race to the handler
// leaves nothing to check, and the scenario runs again.
func TestWarmStartStoppedMidWalkHandsOutBeforeAnEvent(t *testing.T) {
	sc := stopScenario{stored: 3, events: []stopEvent{{op: "delete", n: 2}}}
	for attempt := 0; attempt < 5; attempt++ {
		got := sc.run(t)
		if !slices.ContainsFunc(got, func(e string) bool { return strings.HasPrefix(e, "delete ns/p002") }) {
			continue // the processor stopped before the handler was told
		}
		want := []string{"add ns/p002@3 initial=true", "delete ns/p002@4"}
		if !slices.Equal(filterKey(got, "ns/p002"), want) {
			t.Fatalf("the start handler was told %q of ns/p002; want %q (all: %q)", filterKey(got, "ns/p002"), want, got)
		}
		return
	}
	t.Fatal("the deletion never reached the handler in 5 runs; the test checks nothing")
}

// Generated: stored collections of up to three walk chunks, a walk held at
// its start or after its first chunk, and adds, updates and deletions
// queued across the stop. Each handler's notifications must be a sequence
// client-go could give: no update or deletion of a key it does not hold, no
// second add.
func TestWarmStartStoppedMidWalkGenerated(t *testing.T) {
	for seed := int64(0); seed < 12; seed++ {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		sc := stopScenario{stored: 1 + rng.IntN(3*deliverChunk), afterChunk: rng.IntN(2) == 1}
		if sc.afterChunk && sc.stored <= deliverChunk {
			sc.stored += deliverChunk
		}
		next := sc.stored
		for range 1 + rng.IntN(6) {
			switch rng.IntN(3) {
			case 0:
				sc.events = append(sc.events, stopEvent{op: "add", n: next})
				next++
			case 1:
				sc.events = append(sc.events, stopEvent{op: "update", n: rng.IntN(sc.stored)})
			default:
				sc.events = append(sc.events, stopEvent{op: "delete", n: rng.IntN(sc.stored)})
			}
		}
		got := sc.run(t)
		if err := clientGoSequence(got, sc.stored); err != "" {
			t.Fatalf("seed %d (%d stored, held after a chunk: %v, events %v): %s", seed, sc.stored, sc.afterChunk, sc.events, err)
		}
	}
}

// stopScenario is a warm start of stored Pods ns/p000... that stops while
// events are queued. afterChunk holds the walk after its first chunk
// instead of at its start.
type stopScenario struct {
	stored     int
	afterChunk bool
	events     []stopEvent
}

// stopEvent changes Pod ns/p<n>; a key deleted earlier in the scenario is
// skipped.
type stopEvent struct {
	op string // add, update or delete
	n  int
}

func stopPod(n int, rv int) *corev1.Pod {
	p := setAsidePod(fmt.Sprintf("p%03d", n))
	p.ResourceVersion = strconv.Itoa(rv)
	return p
}

// run returns the notifications the start handler was given.
func (sc stopScenario) run(t *testing.T) []string {
	src := fcache.NewFakeControllerSource()
	live := map[int]int{} // n -> rv
	rv := 0
	for n := range sc.stored {
		rv++
		src.Add(stopPod(n, 0))
		live[n] = rv
	}
	f := newStoredFile(t, src)
	f.coldStart(nil, sc.stored)

	db := f.open()
	defer db.Close()
	inf := f.informer(db, nil)
	held, release := make(chan struct{}), make(chan struct{})
	releaseWalk := sync.OnceFunc(func() { close(release) })
	defer releaseWalk()
	if sc.afterChunk {
		var yielded func()
		walkStarting = func() { yielded = inf.start.walk.Load().yield.hold() }
		walkHeld = func() { close(held); <-release; yielded() }
	} else {
		walkStarting = func() { close(held); <-release }
	}
	defer func() { walkStarting, walkHeld = nil, nil }()
	var events setAsideEvents
	if _, err := inf.AddEventHandler(&events); err != nil {
		t.Fatal(err)
	}
	cancel, done := runInformer(inf)
	defer func() { cancel(); <-done }()
	<-held
	d := inf.start.walk.Load()

	inf.blockDeltas.Lock()
	unlock := sync.OnceFunc(inf.blockDeltas.Unlock)
	defer unlock()
	for _, e := range sc.events {
		old, ok := live[e.n]
		if ok == (e.op == "add") {
			continue
		}
		rv++
		switch e.op {
		case "add":
			src.Add(stopPod(e.n, 0))
			live[e.n] = rv
		case "update":
			p := stopPod(e.n, old)
			p.Labels = map[string]string{"rv": strconv.Itoa(rv)}
			src.Modify(p)
			live[e.n] = rv
		case "delete":
			src.Delete(stopPod(e.n, old))
			delete(live, e.n)
		}
	}
	// Once the reflector has queued them, the delta loop, idle in Pop, takes
	// the first and waits for the lock; a closed queue still hands it out.
	want := strconv.Itoa(rv)
	poll.Until(t, 30*time.Second, "the events queued", func() bool {
		return inf.LastSyncResourceVersion() == want
	})
	cancel()
	releaseWalk()
	<-d.done
	unlock()
	<-done
	return events.list()
}

// filterKey returns the notifications about key.
func filterKey(events []string, key string) []string {
	var out []string
	for _, e := range events {
		if strings.Contains(e, key+"@") {
			out = append(out, e)
		}
	}
	return out
}

// clientGoSequence checks notifications as setAsideEvents records them:
// initial adds only of the stored Pods, no add of a key held, no update or
// deletion of a key not held. It returns the first violation, or "".
func clientGoSequence(events []string, stored int) string {
	held := map[string]bool{}
	key := func(s string) string { return s[:strings.Index(s, "@")] }
	for _, e := range events {
		f := strings.Fields(e)
		switch f[0] {
		case "add":
			k := key(f[1])
			if held[k] {
				return "a second add: " + e
			}
			var n int
			fmt.Sscanf(k, "ns/p%d", &n)
			if initial := f[2] == "initial=true"; initial != (n < stored) {
				return "an add with the wrong initial flag: " + e
			}
			held[k] = true
		case "update":
			if !held[key(f[1])] {
				return "an update of a key not held: " + e
			}
		case "delete":
			if !held[key(f[1])] {
				return "a deletion of a key not held: " + e
			}
			delete(held, key(f[1]))
		}
	}
	return ""
}

// A delta about every key (a relist, a resync) after a walk that ended
// unfinished is not applied: the walk cannot hand the rest out any more.
func TestHandOutBeforeAStoppedWalkRefusesAReplace(t *testing.T) {
	d := &warmDelivery{done: make(chan struct{})}
	close(d.done)
	ctx := context.Background()
	if d.handOutBefore(ctx, []cache.Delta{{Type: cache.ReplacedAll}}) {
		t.Error("a relist after an unfinished walk is applied")
	}
	if d.handOutBefore(ctx, []cache.Delta{{Type: cache.SyncAll}}) {
		t.Error("a resync after an unfinished walk is applied")
	}
	d.finished.Store(true)
	if !d.handOutBefore(ctx, []cache.Delta{{Type: cache.ReplacedAll}}) {
		t.Error("a relist after a finished walk is refused")
	}
}

// A store error joined with errStopping in one batch is still reported.
func TestWithoutStoppingKeepsOtherErrors(t *testing.T) {
	other := errors.New("disk full")
	if err := withoutStopping(errors.Join(other, errStopping)); !errors.Is(err, other) || errors.Is(err, errStopping) {
		t.Errorf("withoutStopping(join(other, stopping)) = %v; want other alone", err)
	}
	if err := withoutStopping(errStopping); err != nil {
		t.Errorf("withoutStopping(stopping) = %v; want nil", err)
	}
	if err := withoutStopping(errors.Join(errStopping)); err != nil {
		t.Errorf("withoutStopping(join(stopping)) = %v; want nil", err)
	}
}
