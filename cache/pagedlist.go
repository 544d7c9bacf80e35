package cache

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/boltinformer/boltinformer/persist"
	"github.com/boltinformer/boltinformer/reflector"
)

// pagedList takes an informer's cold list a page at a time
// (reflector.PagedList), so that the list is never held whole. Each page is
// stored and handed to the handlers as initial adds. persist's ApplyPart
// stores it, and the group commits write it as it comes, without a
// resourceVersion. client-go's informer holds the whole list decoded, with
// its response, until it is in the store. A bounded informer's next page
// also waits until the handlers have taken most of this one (pacer). Its
// memory then follows the page and the cache's bound, not the collection.
//
// Handlers and listers see what a list through the queue gives them. They
// see it in the order the server sent the items. Every item comes as
// OnAdd(obj, true). Each registration is synced after its own initial adds
// and after the informer. The informer is synced once the last page is
// stored with the list's resourceVersion. A lister read before that sees
// the pages stored so far. client-go's store is empty until its list is
// applied. A store that owes a list (readgate.go) still makes reads that
// could show absence wait for it.
//
// The pages come from the reflector's goroutine, before it watches, while
// nothing is queued. Each is applied under blockDeltas, as a delta is. A
// handler joining meanwhile thus gets what is stored and then the pages
// after it. If the paged list fails part-way, the reflector's next list is
// an ordinary one, through the queue. It reconciles the store with the
// pages applied, as any relist does. It is a consistent read, so it is
// never older than the pages the handlers were given.
//
// Every pagedFlushEvery objects, the pages applied so far are flushed to
// the file. The flush runs on a goroutine, once the flush before has
// returned. The list's requests go on while a flush commits. At most two
// flushes' worth of records wait for the file, whatever the list's length.
// One commit's pages are in bbolt's hands at a time. The group commit alone
// would take whatever arrived while it wrote the last.
type pagedList struct {
	s *Informer
	// transform is the informer's transform, which the queue would apply.
	transform cache.TransformFunc
	pace      *pacer // Nil unless the cache is bounded.

	// Only the reflector's goroutine uses these, and wait once it is done.
	// sinceFlush counts the objects applied since the last flush started.
	// flushing, if not nil, is closed when that flush has returned.
	sinceFlush int
	flushing   chan struct{}

	doneOnce sync.Once
	done     chan struct{} // Closed once the last page is stored.

	// gen is the read gate's generation when the list began. A set-aside
	// since then makes another (setaside.go).
	gen uint64
	// handedOut is set once every page was handed out, under blockDeltas.
	handedOut bool
}

// pagedListEnding is a test hook, called as a paged list's end begins.
var pagedListEnding func()

// pagedFlushEvery is how many objects of a paged list are applied between
// flushes. That is about 6 MB of records for 6 KB Pods. Records wait in
// memory until flushed, so this bounds what a cold start holds beyond the
// objects.
const pagedFlushEvery = 1000

var _ reflector.PagedList = (*pagedList)(nil)

func newPagedList(s *Informer, transform cache.TransformFunc) *pagedList {
	p := &pagedList{s: s, transform: transform, done: make(chan struct{}), gen: s.gate.owedGen.Load()}
	if s.boundedCache() {
		p.pace = newPacer()
	}
	return p
}

// boundedCache reports whether the informer keeps a bounded number of
// decoded objects (Persistence.CacheObjects or CacheBytes). Its initial
// adds are then paced to its handlers, and its cold list is taken in pages.
func (s *Informer) boundedCache() bool {
	p := s.opts.Persistence
	return s.persistent != nil && (p.CacheObjects > 0 || p.CacheBytes > 0)
}

// ListPage implements reflector.PagedList.
func (p *pagedList) ListPage(ctx context.Context, items []interface{}) error {
	if err := p.apply(klog.FromContext(ctx), items); err != nil {
		return err
	}
	p.pace.wait(ctx, p.s.processor.Listeners())
	p.flushEvery(ctx, len(items))
	return nil
}

// flushEvery starts a flush of what was applied once pagedFlushEvery
// objects were applied since the last. It waits for the last flush first.
// The commit loop retries and reports a flush that fails. The informer's
// commit observer hears of it, and the list goes on.
func (p *pagedList) flushEvery(ctx context.Context, applied int) {
	p.sinceFlush += applied
	if p.sinceFlush < pagedFlushEvery {
		return
	}
	p.sinceFlush = 0
	p.wait()
	done := make(chan struct{})
	p.flushing = done
	db := p.s.persistent.coll.DB()
	go func() {
		defer close(done)
		_ = db.Flush(ctx)
	}()
}

// wait waits for the flush in flight, if any. The reflector's goroutine
// calls it, and RunWithContext once that goroutine has ended.
func (p *pagedList) wait() {
	if p.flushing != nil {
		<-p.flushing
		p.flushing = nil
	}
}

// apply transforms, stores and hands out one page, under blockDeltas.
func (p *pagedList) apply(logger klog.Logger, items []interface{}) error {
	s := p.s
	s.blockDeltas.Lock()
	defer s.blockDeltas.Unlock()
	if p.transform != nil {
		for i, obj := range items {
			var err error
			if items[i], err = p.transform(obj); err != nil {
				return err
			}
		}
	}
	err := s.persistent.addPage(items)
	if s.moveToMemoryLocked(logger, err) {
		err = s.persistent.addPage(items)
	}
	if err != nil {
		return err
	}
	for _, obj := range items {
		s.OnAdd(obj, true)
	}
	return nil
}

// handedOutWhole reports whether every page of a whole list was handed
// to the handlers, ending the informer's initial list. A paged list that
// failed part-way never was. The ordinary list after it is then the initial
// list, as the queue takes it. One whose end a set-aside overtook was: the
// handlers got the whole list as initial adds, so the list after it is not.
// Called under blockDeltas. It is safe on a nil pagedList.
func (p *pagedList) handedOutWhole() bool {
	return p != nil && p.handedOut
}

// ListDone implements reflector.PagedList. It stores the list's
// resourceVersion and marks the informer loaded.
func (p *pagedList) ListDone(ctx context.Context, resourceVersion string) error {
	p.wait()
	s := p.s
	s.blockDeltas.Lock()
	defer s.blockDeltas.Unlock()
	p.handedOut = true
	if pagedListEnding != nil {
		pagedListEnding()
	}
	// The last page stores the list's resourceVersion, which clears the
	// must-list mark as any list does. A set-aside since the list began
	// dropped keys its pages stored. Then the list cannot end the debt,
	// and fails: the reflector's next list reconciles the store.
	current := func() bool { return s.gate.owedGen.Load() == p.gen }
	ended, err := s.persistent.endList(resourceVersion, current)
	if err != nil {
		return fmt.Errorf("storing the resourceVersion %q of a list received in pages: %w", resourceVersion, err)
	}
	if !ended {
		return errors.New("part of the store was set aside while the list was received in pages; listing again")
	}
	s.ready.caught.dropMatch() // A part of a list, not deltas.
	s.noteAppliedLocked(nil, nil)
	s.settleJoinsLocked()
	p.doneOnce.Do(func() { close(p.done) })
	return nil
}

// addPage stores a page of a list received in pages, leaving the
// resourceVersion as it is (see pagedList). An object that cannot be keyed,
// indexed or encoded fails the page, which applies nothing.
func (i *Indexer) addPage(objs []interface{}) error {
	if m := i.inMemory(); m != nil {
		for _, obj := range objs {
			if err := m.Add(obj); err != nil {
				return err
			}
		}
		return nil
	}
	i.writeMu.Lock()
	defer i.writeMu.Unlock()
	ops := make([]persist.Op, 0, len(objs))
	for _, obj := range objs {
		key, obj, err := i.keyAndTransform(obj)
		if err != nil {
			return err
		}
		op, err := i.op(key, obj)
		if err != nil {
			return err
		}
		ops = append(ops, op)
	}
	return i.coll.ApplyPart(ops)
}
