package recovery

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/boltinformer/boltinformer/reflector"
)

// Fetching while the metadata list is read (recover.go). A metadata list of
// a large collection takes seconds, page after page; an object a page
// shows newer than the resourceVersion the store holds the collection at
// is new or changed whatever the rest of the list holds, so it can be
// fetched while the next pages are read instead of after the diff.
//
// That is as safe as fetching after the diff: a prefetch asks for the
// object at least as new as the list (NotOlderThan the first page's
// resourceVersion, which every page shares), and the watch starts from that
// resourceVersion, so whatever changes after the fetched state reaches the
// store through the watch, and the forward rule drops what the watch brings
// that is not newer. A prefetched object is applied only once the diff has
// found its key to fetch (fetched ignores other keys), the watch has
// opened (as every fetch), and only if the diff was made from the list it
// was fetched against: a list started again (an expired continue token)
// has another resourceVersion, and its prefetches are dropped.
//
// It is bounded so that it does no request the fetches after the diff
// would not make (planFetches): keys of the pages followed by more (a list
// of one page has nothing to overlap; the last page's keys are fetched
// after the diff, with the rest), only while fewer than fullListFraction of
// the items listed so far are changed (from there the plan may list the
// whole collection), and within the request budget of a rate-limited
// lister. A prefetch that fails leaves its key to the fetches
// after the diff.

// prefetch fetches, on Recovery.Workers goroutines, the changed keys a
// metadata list's pages show, while the list goes on. admit is called from
// the list's goroutine only; the workers' results are read once they are
// joined (collect).
type prefetch struct {
	r      *Recoverer
	ctx    context.Context
	cancel context.CancelFunc
	// storedN is the resourceVersion the store holds the collection at
	// (the one the list was asked for); listRV the list's.
	storedN uint64
	listRV  string

	work      chan string
	closeWork func()
	workers   sync.WaitGroup

	// The list goroutine's tally for the bounds: items listed, changed,
	// keys queued; off once a bound was passed.
	listed, changed, queued int
	budget                  int // 0: none
	off                     bool

	// results has one slot per worker, written by it alone and read once
	// the workers are joined (collect): no lock.
	results []prefetched
}

// prefetched is what one prefetch worker found.
type prefetched struct {
	found             map[string]runtime.Object // the object, nil if gone
	requests, decoded int
}

// newPrefetch starts prefetching the changes since storedRV of a list at
// listRV, or returns nil where it cannot: storedRV is not an integer (a
// consistent read at "", which has no version to compare with).
func (r *Recoverer) newPrefetch(ctx context.Context, storedRV, listRV string) *prefetch {
	storedN, ok := parseRV(storedRV)
	if !ok {
		return nil
	}
	p := &prefetch{
		r: r, storedN: storedN, listRV: listRV,
		// Room for a whole page: admit never waits for the workers.
		work:    make(chan string, recoveryStreamPageSize),
		budget:  r.maxFetchRequests(),
		results: make([]prefetched, r.cfg.Workers),
	}
	p.ctx, p.cancel = context.WithCancel(ctx)
	p.closeWork = sync.OnceFunc(func() { close(p.work) })
	for i := range p.results {
		p.workers.Go(func() { p.fetch(&p.results[i]) })
	}
	return p
}

// offer queues the keys of a page's items that admit lets through.
func (p *prefetch) offer(items []wireItem) {
	for _, key := range p.admit(items) {
		select {
		case p.work <- key:
		default:
			// Full: the workers are a page behind. The key is fetched after
			// the diff.
			p.off = true
			return
		}
	}
}

// admit returns the keys of a page's items to prefetch: the changed ones,
// within the bounds (see the comment at the top of the file).
func (p *prefetch) admit(items []wireItem) []string {
	if p.off {
		return nil
	}
	var changed []wireItem
	for _, it := range items {
		n, ok := parseRV(it.resourceVersion)
		if !ok {
			// Not comparable: the recovery lists in full.
			p.off = true
			return nil
		}
		if n > p.storedN {
			changed = append(changed, it)
		}
	}
	p.listed += len(items)
	p.changed += len(changed)
	cfg := p.r.cfg
	if float64(p.changed) >= cfg.fullListFraction*float64(p.listed) {
		p.off = true
		return nil
	}
	var keys []string
	for _, it := range changed {
		if p.budget > 0 && p.queued >= p.budget {
			p.off = true
			break
		}
		p.queued++
		keys = append(keys, it.key())
	}
	return keys
}

// fetch is a worker: it fetches queued keys into res until the queue is
// closed and drained, or the prefetch is stopped.
func (p *prefetch) fetch(res *prefetched) {
	res.found = map[string]runtime.Object{}
	for key := range p.work {
		if p.ctx.Err() != nil {
			continue
		}
		obj, fetched, decoded, err := p.r.fetchObject(p.ctx, key, p.listRV, func() { res.requests++ })
		if err != nil || !fetched {
			continue // fetched after the diff; the error was reported
		}
		res.found[key] = obj
		res.decoded += decoded
	}
}

// listEnded is called once the list is complete: what is queued is fetched,
// and nothing more.
func (p *prefetch) listEnded() { p.closeWork() }

// collect waits for the queued fetches and returns what they found, by
// key, and how many requests they made and objects they decoded.
func (p *prefetch) collect() (found map[string]runtime.Object, requests, decoded int) {
	p.closeWork()
	p.workers.Wait()
	found = map[string]runtime.Object{}
	for _, res := range p.results {
		maps.Copy(found, res.found)
		requests += res.requests
		decoded += res.decoded
	}
	return found, requests, decoded
}

// stop ends the fetches and waits for the workers. It may be called more
// than once, and after collect.
func (p *prefetch) stop() {
	p.cancel()
	p.closeWork()
	p.workers.Wait()
}

// applyPrefetched applies what the prefetch found of the keys still to be
// fetched, in key order, and drops the others from the keys to fetch; it
// returns how many requests the prefetch made and how many
// keys are left to fetch.
func (r *Recoverer) applyPrefetched(rec *recovery, p *prefetch) (requests, left int) {
	found, requests, decoded := p.collect()
	rec.requests.Add(int64(requests))
	rec.decoded.Add(int64(decoded))
	rec.run(func() {
		for _, key := range slices.Sorted(maps.Keys(found)) {
			if err := rec.fetched(key, found[key]); err != nil {
				r.l.Report(rec.ctx, fmt.Errorf("%w: fetched %s: %w", reflector.ErrStore, key, err))
			}
		}
		rec.fetchKeys = slices.DeleteFunc(rec.fetchKeys, func(k string) bool {
			_, pending := rec.pending[k]
			return !pending
		})
		left = len(rec.fetchKeys)
	})
	return requests, left
}
