package recovery

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/pager"

	"github.com/boltinformer/boltinformer/reflector"
)

// The fetches of a recovery (recover.go): what changed, once the watch is
// open, one object, a namespace or the whole collection per request.

// fetchChanged fetches the keys a recovery found new or changed, once the
// watch is open: the whole collection if most of it changed, namespaces
// where many changed, and one object per request otherwise, up to
// Recovery.Workers requests at a time. A request that fails fetchAttempts
// times fails the recovery.
func (r *Recoverer) fetchChanged(rec *recovery) {
	ctx := rec.ctx
	select {
	case <-rec.opened:
	case <-ctx.Done():
		return
	}
	cfg := r.cfg
	budget, fetch := r.maxFetchRequests(), rec.toFetch
	if rec.prefetch != nil {
		var prefetched int
		prefetched, fetch = r.applyPrefetched(rec, rec.prefetch)
		if budget > 0 {
			budget = max(1, budget-prefetched)
		}
		if fetch == 0 {
			return
		}
	}
	full, lists, singles := planFetches(&cfg, budget, rec.fetchNS, rec.listedNS, fetch, rec.listedAll)
	if full {
		if err := r.fetchList(rec, ""); err != nil {
			rec.fail(err)
		}
		return
	}
	work := make(chan func() error)
	var workers sync.WaitGroup
	for range min(cfg.Workers, len(lists)+len(singles)) {
		workers.Go(func() {
			for fn := range work {
				if err := fn(); err != nil {
					rec.fail(err)
				}
			}
		})
	}
feed:
	for _, ns := range lists {
		select {
		case work <- func() error { return r.fetchList(rec, ns) }:
		case <-ctx.Done():
			break feed
		}
	}
	for _, key := range singles {
		if ctx.Err() != nil {
			break
		}
		if !rec.stillPending(key) {
			continue
		}
		select {
		case work <- func() error { return r.fetchOne(rec, key) }:
		case <-ctx.Done():
		}
	}
	close(work)
	workers.Wait()
}

// planFetches decides how to fetch the keys of fetchNS (by namespace; fetch
// in all, of total listed objects, listedNS by namespace): the whole
// collection (full) once fullListFraction of it changed; otherwise the
// namespaces where namespaceListAt and fullListFraction of their objects
// changed (lists), and the rest one by one (singles). With a request
// budget (maxRequests > 0), namespaces with the most changes are listed
// instead until the requests fit, and the whole collection if they still
// do not.
func planFetches(cfg *config, maxRequests int, fetchNS map[string][]string, listedNS map[string]int, fetch, total int) (full bool, lists, singles []string) {
	if float64(fetch) >= cfg.fullListFraction*float64(total) {
		return true, nil, nil
	}
	var rest []string // namespaces fetched one by one
	for ns, keys := range fetchNS {
		if ns != "" && cfg.namespaceListAt > 0 && len(keys) >= cfg.namespaceListAt &&
			float64(len(keys)) >= cfg.fullListFraction*float64(listedNS[ns]) {
			lists = append(lists, ns)
		} else {
			rest = append(rest, ns)
		}
	}
	n := 0
	for _, ns := range rest {
		n += len(fetchNS[ns])
	}
	if maxRequests > 0 && len(lists)+n > maxRequests {
		// Most changes first; ties by name, for a stable plan.
		slices.SortFunc(rest, func(a, b string) int {
			if d := len(fetchNS[b]) - len(fetchNS[a]); d != 0 {
				return d
			}
			return strings.Compare(a, b)
		})
		for len(rest) > 0 && rest[0] != "" && len(lists)+n > maxRequests {
			n -= len(fetchNS[rest[0]])
			lists = append(lists, rest[0])
			rest = rest[1:]
		}
		if len(lists)+n > maxRequests {
			return true, nil, nil
		}
	}
	for _, ns := range rest {
		singles = append(singles, fetchNS[ns]...)
	}
	slices.Sort(lists)
	slices.Sort(singles)
	return false, lists, singles
}

// maxFetchRequests is the tuned bound (recoverytune), or derived from the
// lister's rate limit: at least minFetchBudget requests, and no more than
// the limit allows in fetchBudgetTime; 0 for no limit.
func (r *Recoverer) maxFetchRequests() int {
	if n := r.cfg.maxFetchRequests; n != 0 {
		return max(n, 0)
	}
	rl, ok := r.cfg.Lister.(RateLimitedLister)
	if !ok {
		return 0
	}
	qps := rl.QPS()
	if qps <= 0 {
		return 0
	}
	return max(minFetchBudget, int(float64(qps)*fetchBudgetTime.Seconds()))
}

// countDecoded adds n to the objects decoded (RecoveryStats.Decoded).
func (rec *recovery) countDecoded(n int) { rec.decoded.Add(int64(n)) }

// stillPending reports whether key is still to be fetched.
func (rec *recovery) stillPending(key string) bool {
	_, resolved := rec.resolved.Load(key)
	return !resolved && !rec.over.Load()
}

// fetchOptions asks for data at least as new as the list at listRV.
func fetchOptions(listRV string) metav1.ListOptions {
	return metav1.ListOptions{ResourceVersion: listRV, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}
}

// countRequest counts one fetch request (RecoveryStats.Requests).
func (rec *recovery) countRequest() { rec.requests.Add(1) }

// fetchOne fetches one changed object.
func (r *Recoverer) fetchOne(rec *recovery, key string) error {
	obj, fetched, decoded, err := r.fetchObject(rec.ctx, key, rec.listRV, rec.countRequest)
	if err != nil || !fetched {
		return err
	}
	rec.countDecoded(decoded)
	return r.applyFetched(rec, []string{key}, map[string]runtime.Object{key: obj})
}

// fetchObject fetches the object at key at least as new as the list at
// listRV: obj is nil if the server no longer has it (in the informer's
// selection); fetched is false if ctx ended first. decoded counts the
// objects decoded from the response; count is called for every request.
func (r *Recoverer) fetchObject(ctx context.Context, key, listRV string, count func()) (obj runtime.Object, fetched bool, decoded int, err error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil, false, 0, fmt.Errorf("%w: %s: key %q: %w", reflector.ErrList, r.l.TypeDescription(), key, err)
	}
	var list runtime.Object
	err = r.retryFetch(ctx, count, func() (err error) {
		list, err = r.cfg.Lister.ListObjects(ctx, ns, name, fetchOptions(listRV))
		return err
	})
	if err != nil || ctx.Err() != nil {
		return nil, false, 0, err
	}
	items, err := r.fetchedItems(list)
	if err != nil {
		return nil, false, 0, err
	}
	for _, it := range items {
		if k, _ := cache.MetaNamespaceKeyFunc(it); k == key {
			obj = it
		}
	}
	return obj, true, len(items), nil
}

// fetchList lists namespace ("" the whole collection) and applies what it
// returns for the keys still to be fetched there. Through a WireLister,
// only those objects are decoded.
func (r *Recoverer) fetchList(rec *recovery, namespace string) error {
	var keys []string
	if namespace == "" {
		for _, ks := range rec.fetchNS {
			keys = append(keys, ks...)
		}
		slices.Sort(keys)
	} else {
		keys = rec.fetchNS[namespace]
	}
	var items []runtime.Object
	if wl, ok := r.cfg.Lister.(WireLister); ok {
		wanted := make(map[string]struct{}, len(keys))
		for _, k := range keys {
			wanted[k] = struct{}{}
		}
		// The bytes of the keys to fetch only; the list's pages are read
		// as they arrive.
		keep := func(it *wireItem) bool {
			_, ok := wanted[it.key()]
			return ok
		}
		var listed []wireItem
		err := r.retryFetch(rec.ctx, rec.countRequest, func() (err error) {
			opts := fetchOptions(rec.listRV)
			opts.Limit = fetchPageSize
			listed, _, _, err = r.listWire(rec.ctx, wl, namespace, opts, keep)
			return err
		})
		if err != nil || rec.ctx.Err() != nil {
			return err
		}
		decoded := 0
		for i := range listed {
			if listed[i].obj != nil {
				decoded++ // a page decoded whole
			}
			key := listed[i].key()
			if _, ok := wanted[key]; !ok || !rec.stillPending(key) {
				continue
			}
			obj, err := listed[i].object()
			if err != nil {
				return fmt.Errorf("%w: %s: decoding %s of a fetched list: %w", reflector.ErrList, r.l.TypeDescription(), key, err)
			}
			if listed[i].obj == nil {
				decoded++
			}
			items = append(items, obj)
		}
		rec.countDecoded(decoded)
	} else {
		p := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return r.cfg.Lister.ListObjects(ctx, namespace, "", opts)
		})
		var list runtime.Object
		err := r.retryFetch(rec.ctx, rec.countRequest, func() (err error) {
			list, _, err = p.ListWithAlloc(rec.ctx, fetchOptions(rec.listRV))
			return err
		})
		if err != nil || rec.ctx.Err() != nil {
			return err
		}
		if items, err = meta.ExtractListWithAlloc(list); err != nil {
			return fmt.Errorf("%w: %s: unable to extract items of %T: %w", reflector.ErrList, r.l.TypeDescription(), list, err)
		}
		rec.countDecoded(len(items))
	}
	found := make(map[string]runtime.Object, len(items))
	for _, it := range r.checkedItems(items) {
		if k, err := cache.MetaNamespaceKeyFunc(it); err == nil {
			found[k] = it
		}
	}
	return r.applyFetched(rec, keys, found)
}

// retryFetch runs one fetch request, trying fetchAttempts times with
// backoff, and calls count for each attempt. It returns nil if ctx ends.
func (r *Recoverer) retryFetch(ctx context.Context, count func(), fn func() error) error {
	var err error
	for attempt := range fetchAttempts {
		if attempt > 0 && !r.l.Backoff(ctx) {
			return nil
		}
		count()
		if err = fn(); err == nil || ctx.Err() != nil {
			return nil
		}
		r.l.Report(ctx, fmt.Errorf("%w: %s: fetching changed objects (attempt %d of %d): %w", reflector.ErrList, r.l.TypeDescription(), attempt+1, fetchAttempts, err))
	}
	return fmt.Errorf("%w: %s: fetching changed objects: %w", reflector.ErrList, r.l.TypeDescription(), err)
}

// fetchedItems extracts a fetch's items, checking each as a watch event's
// object is checked.
func (r *Recoverer) fetchedItems(list runtime.Object) ([]runtime.Object, error) {
	items, err := meta.ExtractListWithAlloc(list)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: unable to extract items of %T: %w", reflector.ErrList, r.l.TypeDescription(), list, err)
	}
	return r.checkedItems(items), nil
}

// checkedItems drops, and reports, the fetched objects a watch event's
// check would reject.
func (r *Recoverer) checkedItems(items []runtime.Object) []runtime.Object {
	out := items[:0]
	for _, it := range items {
		if err := r.l.Check(it); err != nil {
			r.l.Report(context.Background(), err)
			continue
		}
		out = append(out, it)
	}
	return out
}

// applyFetched applies, for each of keys, what a fetch found (absent from
// found: gone), on the reflector's goroutine.
func (r *Recoverer) applyFetched(rec *recovery, keys []string, found map[string]runtime.Object) error {
	rec.run(func() {
		for _, key := range keys {
			if err := rec.fetched(key, found[key]); err != nil {
				r.l.Report(rec.ctx, fmt.Errorf("%w: fetched %s: %w", reflector.ErrStore, key, err))
			}
		}
	})
	return nil
}
