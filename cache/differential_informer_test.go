package cache_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/boltinformer/boltinformer/internal/testing/poll"
)

var informerSeeds = flag.Int("informer.seeds", 24, "seeds TestInformerAgreesWithClientGo runs (-conformance.seed=N runs one)")

// TestInformerAgreesWithClientGo runs client-go's informer and ours on one
// source, driven by the same random stream. Both start cold; ours lists in
// pages of one to four objects. Adds, updates and deletes come by watch.
// Changes the watches miss end in a 410 and a relist, sometimes the first
// thing after the cold start. Handlers join before the start, during the
// initial list and later. Every handler must get, key by key, the same
// notifications from both, isInInitialList included. Keys are compared one by one
// because client-go itself leaves the order between keys to map iteration
// in a relist's deletions and a late joiner's adds.
//
// It uses the conformance harness (conformance_harness_test.go); failing
// seeds print their operations and the command that reruns them. Each of
// client-go's relists waits its reflector's backoff (0.8 s or more), so
// the seeds run side by side.
func TestInformerAgreesWithClientGo(t *testing.T) {
	confRunSeeds(t, "TestInformerAgreesWithClientGo", confSeedList(*informerSeeds), runInformerDifferential)
}

// diffHandler is one handler, registered on both informers.
type diffHandler struct {
	id            int
	cg, ours      *confRecorder
	cgReg, ourReg cache.ResourceEventHandlerRegistration
}

// informerDiff is one seed's run.
type informerDiff struct {
	rng  *rand.Rand
	logf func(string, ...any)
	src  *confSource
	cg   cache.SharedIndexInformer
	cgLW *confLW
	ours *confOurs
	// phase stays 0: the recorders' phases are not used here.
	phase    atomic.Int64
	handlers []*diffHandler
	// changed says the source changed since every handler last recorded a
	// fence, so events may still be in flight.
	changed bool
}

func runInformerDifferential(seed int64, dir string, logf func(string, ...any)) (err error) {
	rng := rand.New(rand.NewSource(seed))
	d := &informerDiff{rng: rng, logf: logf, src: newConfSource()}
	for i := 1 + rng.Intn(10); i > 0; i-- {
		d.change(false)
	}
	d.changed = false // the cold start lists them
	if rng.Intn(3) == 0 {
		d.src.resetWatch() // history before the start is gone; irrelevant to a cold start
	}
	pageSize := int64(1 + rng.Intn(4))
	logf("seed %d: pages of %d, source %v", seed, pageSize, d.src.state())

	d.cgLW = newConfLW(d.src)
	d.cg = cache.NewSharedIndexInformer(d.cgLW, &corev1.Pod{}, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	_ = d.cg.SetWatchErrorHandler(func(*cache.Reflector, error) {})
	if d.ours, err = openConfOurs(d.src, confOursOptions{
		path:          filepath.Join(dir, "cache.db"),
		batchInterval: time.Duration(1+rng.Intn(5)) * time.Millisecond,
		cacheObjects:  []int{0, 0, 2}[rng.Intn(3)],
		pageSize:      pageSize,
	}); err != nil {
		return err
	}
	for i := 1 + rng.Intn(3); i > 0; i-- {
		if err := d.join("before the start"); err != nil {
			return errors.Join(err, d.ours.db.Close())
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cgDone := make(chan struct{})
	go func() {
		defer close(cgDone)
		d.cg.RunWithContext(ctx)
	}()
	d.ours.run()
	defer func() {
		cancel()
		<-cgDone
		if _, stopErr := d.ours.stop(); err == nil {
			err = stopErr
		}
		d.src.shutdown()
	}()
	if rng.Intn(3) == 0 {
		if err := d.join("during the initial list"); err != nil {
			return err
		}
	}
	if err := d.waitApplied("the cold start"); err != nil {
		return err
	}

	// In most seeds the first change after the cold start is a relist: the
	// queue then applies its first list after the paged one.
	relists := 0
	for step := 3 + rng.Intn(4); step > 0; step-- {
		switch p := rng.Intn(10); {
		case (!d.changed && relists == 0 && rng.Intn(2) == 0) || (p < 3 && relists < 2):
			relists++
			d.relist()
		case p < 8:
			d.stream()
		default:
			if err := d.join("late"); err != nil {
				return err
			}
		}
		if err := d.waitApplied("the step"); err != nil {
			return err
		}
	}
	if err := d.fence(); err != nil {
		return err
	}
	return d.compare()
}

// change makes one random change on the source, sent to the watches if
// broadcast, and logs it.
func (d *informerDiff) change(broadcast bool) {
	keys := d.src.state().keys()
	if op := d.rng.Intn(10); op < 4 || len(keys) == 0 {
		for range 20 {
			ns := confNamespaces[d.rng.Intn(len(confNamespaces))]
			name := fmt.Sprintf("p%02d", d.rng.Intn(confNamesPerNamespace))
			if _, ok := d.src.objs[ns+"/"+name]; !ok {
				p := &corev1.Pod{}
				p.Namespace, p.Name = ns, name
				p.Labels = map[string]string{"gen": strconv.Itoa(d.rng.Intn(1000))}
				d.note(d.src.change(watch.Added, p, broadcast))
				return
			}
		}
	} else if op < 7 {
		p := d.src.objs[keys[d.rng.Intn(len(keys))]].DeepCopy()
		p.Labels = map[string]string{"gen": strconv.Itoa(d.rng.Intn(1000))}
		d.note(d.src.change(watch.Modified, p, broadcast))
		return
	}
	if len(keys) > 0 {
		p := d.src.objs[keys[d.rng.Intn(len(keys))]].DeepCopy()
		d.note(d.src.change(watch.Deleted, p, broadcast))
	}
}

func (d *informerDiff) note(c confChange) {
	d.changed = true
	d.logf("  %s", c.watchEvent)
}

// stream makes one to four changes, sent to both watches.
func (d *informerDiff) stream() {
	d.logf("stream:")
	for i := 1 + d.rng.Intn(4); i > 0; i-- {
		d.change(true)
	}
}

// relist makes one to four changes the watches miss, then closes them and
// drops the history they would resume from: both informers get a 410 and
// relist.
func (d *informerDiff) relist() {
	d.logf("missed by the watches, then a 410 and a relist:")
	for i := 1 + d.rng.Intn(4); i > 0; i-- {
		d.change(false)
	}
	d.src.resetWatch()
}

// join registers a new handler on both informers. A running informer's
// store must not change while it joins, or the two would give it different
// initial states: the handlers first record a fence if anything changed.
func (d *informerDiff) join(when string) error {
	if d.changed {
		if err := d.fence(); err != nil {
			return err
		}
	}
	h := &diffHandler{id: len(d.handlers)}
	h.cg = newConfRecorder(fmt.Sprintf("client-go handler %d", h.id), &d.phase, false)
	h.ours = newConfRecorder(fmt.Sprintf("our handler %d", h.id), &d.phase, false)
	var err error
	if h.cgReg, err = d.cg.AddEventHandler(h.cg); err != nil {
		return err
	}
	if h.ourReg, err = d.ours.inf.AddEventHandler(h.ours); err != nil {
		return err
	}
	d.handlers = append(d.handlers, h)
	d.logf("handler %d joins %s", h.id, when)
	return nil
}

// waitApplied waits until both informers hold the source's state at its
// last resourceVersion. Both must watch the live broadcaster, so that the
// next change reaches both by watch. Every registration must have synced.
// Notifications may still be on their way to the handlers.
func (d *informerDiff) waitApplied(what string) error {
	want := d.src.state()
	wantRV := strconv.Itoa(d.src.lastRV)
	var why string
	err := poll.Wait(30*time.Second, func() bool {
		switch {
		case !confEqualState(confStateOf(d.cg.GetStore().List()), want):
			why = fmt.Sprintf("client-go's store %v", confStateOf(d.cg.GetStore().List()))
		case !confEqualState(confStateOf(d.ours.inf.GetStore().List()), want):
			why = fmt.Sprintf("our store %v", confStateOf(d.ours.inf.GetStore().List()))
		case d.cg.LastSyncResourceVersion() != wantRV || d.ours.inf.LastSyncResourceVersion() != wantRV:
			why = fmt.Sprintf("LastSyncResourceVersion client-go %s, ours %s", d.cg.LastSyncResourceVersion(), d.ours.inf.LastSyncResourceVersion())
		case d.cgLW.active() == nil || d.ours.lw.active() == nil:
			why = fmt.Sprintf("watching: client-go %t, ours %t", d.cgLW.active() != nil, d.ours.lw.active() != nil)
		default:
			for _, h := range d.handlers {
				if !h.cgReg.HasSynced() || !h.ourReg.HasSynced() {
					why = fmt.Sprintf("handler %d synced: client-go %t, ours %t", h.id, h.cgReg.HasSynced(), h.ourReg.HasSynced())
					return false
				}
			}
			return true
		}
		return false
	})
	if err != nil {
		return fmt.Errorf("after %s, the informers did not reach the source's %v at %s: %s", what, want, wantRV, why)
	}
	return nil
}

// fence makes one change by watch, once both informers watch, and waits
// until every handler has recorded it. Handlers get events in order. So
// each has then recorded everything before the fence.
func (d *informerDiff) fence() error {
	if err := d.waitApplied("the last step"); err != nil {
		return err
	}
	ev := confFence(d.src)
	d.logf("fence %s", ev)
	seen := func(r *confRecorder) bool {
		return slices.ContainsFunc(r.all(), func(e confRecorded) bool { return e.event == ev })
	}
	if err := poll.Wait(30*time.Second, func() bool {
		for _, h := range d.handlers {
			if !seen(h.cg) || !seen(h.ours) {
				return false
			}
		}
		return true
	}); err != nil {
		return fmt.Errorf("the handlers did not all record the fence %q", ev)
	}
	d.changed = false
	return d.waitApplied("the fence")
}

// compare checks that every handler got, key by key, the same
// notifications from both informers.
func (d *informerDiff) compare() error {
	var errs []error
	for _, h := range d.handlers {
		cg, ours := eventsByKey(h.cg.all()), eventsByKey(h.ours.all())
		keys := map[string]bool{}
		for k := range cg {
			keys[k] = true
		}
		for k := range ours {
			keys[k] = true
		}
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			if !slices.Equal(cg[k], ours[k]) {
				errs = append(errs, fmt.Errorf("handler %d, key %s:\n    client-go: %v\n    ours:      %v", h.id, k, cg[k], ours[k]))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("ours differs from client-go's informer:\n  %w", errors.Join(errs...))
	}
	return nil
}

// eventsByKey splits a handler's notifications by object key, keeping
// their order.
func eventsByKey(evs []confRecorded) map[string][]string {
	out := map[string][]string{}
	for _, e := range evs {
		out[e.key] = append(out[e.key], e.event)
	}
	return out
}
