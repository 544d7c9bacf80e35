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
