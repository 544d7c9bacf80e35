package cache

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/boltinformer/boltinformer/reflector"
)

// A read from the cache file can fail. A record may no longer decode, after
// a corrupt page or with a type the scheme no longer knows. A bucket may be
// missing, or the file closed under a lister. Such an error must never look
// like absence. A controller that lists and finds an object missing acts on
// it as deleted. doc.go states the rules for users.
//
//  1. While every object is in memory (unbounded cache, all decoded), reads
//     never touch the file and cannot fail.
//  2. Otherwise a failed read is reported and tried once more.
//     utilruntime.HandleError, the boltinformer_read_errors_total metric and
//     the informer's watch error handler hear of it. The retry waits until a
//     warm start's delivery under way has ended. The delivery sets aside
//     what it cannot read, so the retry reads what the handlers were given.
//  3. If it fails again, a method that can return an error returns it with
//     no result, never a partial one. List, ListKeys and ListIndexFuncValues
//     cannot, by their client-go signatures. They panic with the error, as
//     client-go's own indexer panics when it cannot keep its indexes.

// readErrorHandler is told about every failed read.
type readErrorHandler func(ctx context.Context, err error)

// setReadErrorHandler makes h hear about failed reads. The informer passes
// its watch error handler, called from another goroutine. The informer's
// own reads run under blockDeltas.
func (i *Indexer) setReadErrorHandler(h readErrorHandler) { i.onReadError.Store(&h) }

// retryAfter makes reads that fail wait, before their retry, until the
// channel end returns is closed. A warm start passes its delivery's end
// (warmDelivery.end). Listers may read the file from the moment the
// informer syncs. A record the delivery cannot read is set aside and
// relisted when the delivery ends.
func (i *Indexer) retryAfter(end func() <-chan struct{}) { i.retryWait.Store(&end) }

// waitRetry waits as retryAfter says.
func (i *Indexer) waitRetry() {
	if end := i.retryWait.Load(); end != nil {
		<-(*end)()
	}
}

// reportReadError reports one failed read.
func (i *Indexer) reportReadError(method string, err error) error {
	err = fmt.Errorf("collection %q: reading the cache file: %w", i.coll.Name(), err)
	i.readErrors.Add(1)
	handleReadError(method, err)
	err = fmt.Errorf("boltinformer: %s: %w", method, err)
	if h := i.onReadError.Load(); h != nil {
		(*h)(context.Background(), err)
	}
	return err
}

// readOrErr runs read, reporting a failure and trying once more. It returns
// the second failure's error, reported, and read's zero value.
func readOrErr[T any](i *Indexer, method string, read func() (T, error)) (T, error) {
	v, err := read()
	if err == nil {
		return v, nil
	}
	i.reportReadError(method, err)
	i.waitRetry()
	if v, err = read(); err == nil {
		return v, nil
	}
	var zero T
	return zero, i.reportReadError(method, err)
}

// mustRead is readOrErr for methods whose client-go signature has no error.
// A read that fails twice panics rather than return a partial result.
func mustRead[T any](i *Indexer, method string, read func() (T, error)) T {
	v, err := readOrErr(i, method, read)
	if err != nil {
		panic(fmt.Errorf("%w; refusing to return a partial result, which callers would read as deleted objects", err))
	}
	return v
}

// A warm start may set stored state aside (see Informer.keepOnly). Its
// store then lacks objects until its relist is applied. The informer may
// already have reported synced. A start that finds the collection marked
// (persist.Collection.MustList) is in the same state until its first list.
// Meanwhile the store owes its readers a list. What listers read through
// GetStore and GetIndexer (provenStore) then follows one rule. A read that
// could show an object as absent waits until the list is applied. A Get
// that finds its object returns at once. If the informer stops first,
// nothing will complete the store. Such reads then fail with ErrIncomplete
// instead of returning the partial set, as a read error does. List panics
// with it. The informer's own reads, applying deltas and late joins, use
// the store directly and never wait. They run under blockDeltas, which the
// list needs to be applied. A handler that joins meanwhile is given what
// the store holds. The rest reaches it with the list. Its sync and
// tombstones wait for the list (Informer.settleJoinsLocked).

// owedList is one list the store owes.
type owedList struct {
	done chan struct{} // Closed once the list is applied or the informer stopped.
	err  error         // Set before done closes, if the informer stopped first.
}

// owe records that the store lacks part of its state until a list is
// applied. It is called before the state is dropped, so that a read that
// ran across the drop sees the generation change and waits. Every drop is a
// new generation, even while a list is owed already. A recovery that took
// its diff before the drop cannot pay for it (applyRecoveryStepLocked).
func (g *readGate) owe() {
	g.owedMu.Lock()
	defer g.owedMu.Unlock()
	g.owedGen.Add(1)
	if g.owed.Load() != nil {
		return
	}
	o := &owedList{done: make(chan struct{})}
	if g.stopped {
		// A set-aside raced the informer's stop, so no list will come.
		o.err = ErrIncomplete
		close(o.done)
	}
	g.owed.Store(o)
}

// owes reports whether a list is owed.
func (g *readGate) owes() bool { return g.owed.Load() != nil }

// paid records that a list was applied, so waiting reads go on.
func (g *readGate) paid() {
	g.owedMu.Lock()
	defer g.owedMu.Unlock()
	o := g.owed.Load()
	if o == nil {
		return
	}
	g.owed.Store(nil) // Before done closes, so woken readers find nothing owed.
	if o.err == nil {
		close(o.done)
	}
}

// stopOwing is called when the informer stops. A list still owed will not
// come, and reads waiting for it fail with ErrIncomplete.
func (g *readGate) stopOwing() {
	g.owedMu.Lock()
	defer g.owedMu.Unlock()
	g.stopped = true
	if o := g.owed.Load(); o != nil && o.err == nil {
		o.err = ErrIncomplete
		close(o.done)
	}
}

// awaitComplete waits until no list is owed and returns the generation
// that read. It returns ErrIncomplete if the informer stopped first.
func (g *readGate) awaitComplete() (uint64, error) {
	for {
		gen := g.owedGen.Load()
		o := g.owed.Load()
		if o == nil {
			return gen, nil
		}
		g.waiters.Add(1)
		<-o.done
		g.waiters.Add(-1)
		if o.err != nil {
			return 0, o.err
		}
	}
}

// whole runs read once no list is owed. It runs read again if a list
// became owed while it ran, since its result may then lack what was set
// aside.
func whole[T any](g *readGate, read func() T) (T, error) {
	for {
		gen, err := g.awaitComplete()
		if err != nil {
			var zero T
			return zero, err
		}
		v := read()
		if g.owedGen.Load() == gen {
			return v, nil
		}
	}
}

// mustWhole is whole for methods whose client-go signature has no error.
func mustWhole[T any](g *readGate, method string, read func() T) T {
	v, err := whole(g, read)
	if err != nil {
		handleReadError(method, err)
		panic(fmt.Errorf("boltinformer: %s: %w; refusing to return a partial result, which callers would read as deleted objects", method, err))
	}
	return v
}

// loadedOnceListed closes s.ready.loaded, the warm start's "initial state
// handed out". It closes it at once, unless the store owes a list because
// the collection was marked at start. Then it closes it once that list is
// applied. Until then the store is not the complete state HasSynced
// promises.
func (s *Informer) loadedOnceListed(ctx context.Context, wg *wait.Group) {
	o := s.gate.owed.Load()
	if o == nil {
		close(s.ready.loaded)
		return
	}
	wg.Start(func() {
		select {
		case <-ctx.Done():
		case <-o.done:
			if o.err == nil { // Else the informer stopped first.
				close(s.ready.loaded)
			}
		}
	})
}

// listIfOwed turns a resumed start into a list from the stored
// resourceVersion when the collection owes one. The collection then holds
// only part of the list the resourceVersion belongs to.
func (s *Informer) listIfOwed(opts reflector.Options) reflector.Options {
	if s.gate.owes() && opts.ResumeResourceVersion != "" {
		opts.ListFrom, opts.ResumeResourceVersion = opts.ResumeResourceVersion, ""
	}
	return opts
}
