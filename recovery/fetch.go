package recovery

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/pager"

	"github.com/boltinformer/boltinformer/reflector"
)

// The fetches of a recovery (attempt.go) bring what changed, once the watch
// is open. They are one object per request, or the whole collection in one
// list.

// fetchChanged fetches the keys a recovery found new or changed, once the
// watch is open. It fetches one object per request, up to Options.Workers
// at a time. Once listsInFull says so, it fetches the whole collection
// instead. A request that fails fetchAttempts times fails the recovery.
func (r *Relister) fetchChanged(rec *attempt) {
	ctx := rec.ctx
	select {
	case <-rec.opened:
	case <-ctx.Done():
		return
	}
	fetch := rec.toFetch
	if listsInFull(&r.cfg, r.maxFetchRequests(), fetch, rec.listedAll) {
		if err := r.fetchCollection(rec); err != nil {
			rec.fail(err)
		}
		return
	}
	work := make(chan string)
	var workers sync.WaitGroup
	for range min(r.cfg.Workers, fetch) {
		workers.Go(func() {
			for key := range work {
				if err := r.fetchOne(rec, key); err != nil {
					rec.fail(err)
				}
			}
		})
	}
	for _, key := range rec.fetchKeys {
		if !rec.stillPending(key) {
			continue
		}
		select {
		case work <- key:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(work)
	workers.Wait()
}

// listsInFull reports whether fetching fetch keys of total listed objects
// takes one list of the collection. It does once fullListFraction of it
// changed. It also does once the one-object requests would exceed a request
// budget (maxRequests > 0).
func listsInFull(cfg *config, maxRequests, fetch, total int) bool {
	return float64(fetch) >= cfg.fullListFraction*float64(total) || (maxRequests > 0 && fetch > maxRequests)
}

// maxFetchRequests is the bound Tuning.MaxFetchRequests sets, or else one
// derived from the lister's rate limit. A derived bound allows what the
// limit allows in fetchBudgetTime, and at least minFetchBudget requests. 0
// means no limit.
func (r *Relister) maxFetchRequests() int {
	if n := r.cfg.maxFetchRequests; n != 0 {
		return max(n, 0)
	}
	qps := r.cfg.lister.QPS
	if qps <= 0 {
		return 0
	}
	return max(minFetchBudget, int(float64(qps)*fetchBudgetTime.Seconds()))
}

// countDecoded adds n to the objects decoded (Stats.Decoded).
func (rec *attempt) countDecoded(n int) { rec.decoded.Add(int64(n)) }

// stillPending reports whether key is still to be fetched.
func (rec *attempt) stillPending(key string) bool {
	_, resolved := rec.resolved.Load(key)
	return !resolved && !rec.over.Load()
}

// fetchOptions asks for data at least as new as the list at listRV.
func fetchOptions(listRV string) metav1.ListOptions {
	return metav1.ListOptions{ResourceVersion: listRV, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}
}

// countRequest counts one fetch request (Stats.Requests).
func (rec *attempt) countRequest() { rec.requests.Add(1) }

// fetchOne fetches one changed object.
func (r *Relister) fetchOne(rec *attempt, key string) error {
	obj, fetched, decoded, err := r.fetchObject(rec.ctx, key, rec.listRV, rec.countRequest)
	if err != nil || !fetched {
		return err
	}
	rec.countDecoded(decoded)
	return r.applyFetched(rec, []string{key}, map[string]runtime.Object{key: obj})
}

// fetchObject fetches the object at key at least as new as the list at
// listRV. obj is nil if the server no longer has it in the informer's
// selection. fetched is false if ctx ended first. decoded counts the objects
// decoded from the response. count is called for every request.
func (r *Relister) fetchObject(ctx context.Context, key, listRV string, count func()) (obj runtime.Object, fetched bool, decoded int, err error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil, false, 0, fmt.Errorf("%w: %s: key %q: %w", reflector.ErrList, r.l.TypeDescription(), key, err)
	}
	var list runtime.Object
	err = r.retryFetch(ctx, count, func() (err error) {
		list, err = r.cfg.lister.ListObjects(ctx, ns, name, fetchOptions(listRV))
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

// fetchCollection lists the collection and applies what it returns for the
// keys still to be fetched. Through Lister.ListObjectsWire, only those
// objects are decoded.
func (r *Relister) fetchCollection(rec *attempt) error {
	keys := rec.fetchKeys
	var items []runtime.Object
	if listWire := r.cfg.lister.ListObjectsWire; listWire != nil {
		wanted := make(map[string]struct{}, len(keys))
		for _, k := range keys {
			wanted[k] = struct{}{}
		}
		// Keep the bytes of the keys to fetch only. The list's pages are
		// read as they arrive.
		keep := func(it *wireItem) bool {
			_, ok := wanted[it.key()]
			return ok
		}
		var listed []wireItem
		err := r.retryFetch(rec.ctx, rec.countRequest, func() (err error) {
			opts := fetchOptions(rec.listRV)
			opts.Limit = fetchPageSize
			listed, _, _, err = r.listWire(rec.ctx, listWire, "", opts, keep)
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
			return r.cfg.lister.ListObjects(ctx, "", "", opts)
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
func (r *Relister) retryFetch(ctx context.Context, count func(), fn func() error) error {
	var err error
	for try := range fetchAttempts {
		if try > 0 && !r.l.Backoff(ctx) {
			return nil
		}
		count()
		if err = fn(); err == nil || ctx.Err() != nil {
			return nil
		}
		r.l.Report(ctx, fmt.Errorf("%w: %s: fetching changed objects (attempt %d of %d): %w", reflector.ErrList, r.l.TypeDescription(), try+1, fetchAttempts, err))
	}
	return fmt.Errorf("%w: %s: fetching changed objects: %w", reflector.ErrList, r.l.TypeDescription(), err)
}

// fetchedItems extracts a fetch's items, checking each as a watch event's
// object is checked.
func (r *Relister) fetchedItems(list runtime.Object) ([]runtime.Object, error) {
	items, err := meta.ExtractListWithAlloc(list)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: unable to extract items of %T: %w", reflector.ErrList, r.l.TypeDescription(), list, err)
	}
	return r.checkedItems(items), nil
}

// checkedItems drops, and reports, the fetched objects a watch event's
// check would reject.
func (r *Relister) checkedItems(items []runtime.Object) []runtime.Object {
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

// applyFetched applies, for each of keys, what a fetch found. A key absent
// from found is gone. It runs on the reflector's goroutine.
func (r *Relister) applyFetched(rec *attempt, keys []string, found map[string]runtime.Object) error {
	rec.run(func() {
		for _, key := range keys {
			if err := rec.fetched(key, found[key]); err != nil {
				r.l.Report(rec.ctx, fmt.Errorf("%w: fetched %s: %w", reflector.ErrStore, key, err))
			}
		}
	})
	return nil
}
