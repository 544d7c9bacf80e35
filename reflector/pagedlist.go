package reflector

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
)

// PagedList takes a reflector's cold list a page at a time instead of as
// one Store.Replace (see Options.PagedList), so the list is never held
// whole. A store that keeps its objects elsewhere, such as a bounded
// persistent store, then needs memory for a page, not for the collection.
// The reflector calls it from its own goroutine. Calls are never concurrent
// with each other or with the Store's methods.
type PagedList interface {
	// ListPage applies one page of the list, its items in the order the
	// server sent them. The PagedList takes ownership of the slice. An error
	// ends the list and is reported as ErrStore.
	ListPage(ctx context.Context, items []interface{}) error
	// ListDone is called with the list's resourceVersion once every page
	// has been applied. The watch starts from that version afterwards. An
	// error fails the list and is reported as ErrStore.
	ListDone(ctx context.Context, resourceVersion string) error
}

// DefaultPagedListPageSize is the Limit of a paged list's requests when
// Options.PageSize is zero. It is the pager's default.
const DefaultPagedListPageSize = 500

// pagedListUsable reports whether the next list is to be handed to the
// PagedList. Only a cold start's first list is, and only once. A cold start
// stores nothing that a list would have to be reconciled with. A paged list
// that failed is followed by an ordinary one at "" (see listFailed). The
// Store reconciles that list with the pages it applied.
func (r *Reflector) pagedListUsable(cause StartCause) bool {
	return r.pagedList != nil && !r.pagedListTried && cause == CauseCold && !r.catchingUp()
}

// listPaged lists the collection as a consistent read (resourceVersion "")
// in pages of Options.PageSize items, or DefaultPagedListPageSize if that
// is zero. Each request continues the last. Each page goes to the
// PagedList as it arrives, and ListDone follows the last. The reflector
// then records the list's resourceVersion as list does. The next page is
// asked for before the PagedList takes this one. So the server's work and
// the store's overlap, and at most two pages are held. An apiserver with
// the watch cache's consistent reads and snapshots serves every page from
// its cache, as Kubernetes 1.34 and later do by default. Older ones read
// the pages from etcd, as client-go's paged lists do. Any failure fails the
// list, be it a request, an expired continue token or the PagedList. The
// next list is an ordinary one, a consistent read too (see listFailed).
// When ctx ends, it returns nil, having applied what it got.
func (r *Reflector) listPaged(ctx context.Context) (err error) {
	r.pagedListTried = true
	defer func() {
		if err != nil {
			r.listFailed()
		}
	}()
	limit := r.pageSize
	if limit == 0 {
		limit = DefaultPagedListPageSize
	}
	// The request in flight ends with the list. It is cancelled, then
	// awaited, so that nothing the list started outlives it.
	ctx, cancel := context.WithCancel(ctx)
	var ahead chan pageResult
	defer func() {
		cancel()
		if ahead != nil {
			<-ahead
		}
	}()
	ahead = r.fetchPage(ctx, metav1.ListOptions{ResourceVersion: "", Limit: limit})
	var resourceVersion string
	items, pages := 0, 0
	for {
		got := <-ahead
		ahead = nil
		list, err := got.list, got.err
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			if unsupported, gvk := isUnsupportedTableListObject(list); unsupported {
				err = fmt.Errorf("unsupported list gvk: %v, type: %v", gvk, r.typeDescription)
			}
		}
		if err != nil {
			return fmt.Errorf("%w: %s: page %d: %w", ErrList, r.typeDescription, pages+1, err)
		}
		listMeta, err := meta.ListAccessor(list)
		if err != nil {
			return fmt.Errorf("%w: %s: unable to understand list result %T: %w", ErrList, r.typeDescription, list, err)
		}
		if pages == 0 {
			// Every page is of the snapshot the first one was read at.
			resourceVersion = listMeta.GetResourceVersion()
		}
		next := listMeta.GetContinue()
		if next != "" {
			ahead = r.fetchPage(ctx, metav1.ListOptions{Limit: limit, Continue: next})
		}
		objs, err := meta.ExtractListWithAlloc(list)
		if err != nil {
			return fmt.Errorf("%w: %s: unable to extract items of %T: %w", ErrList, r.typeDescription, list, err)
		}
		page := make([]interface{}, len(objs))
		for i, obj := range objs {
			page[i] = obj
		}
		pages++
		items += len(page)
		if err := r.pagedList.ListPage(ctx, page); err != nil {
			return fmt.Errorf("%w: page %d of the list: %w", ErrStore, pages, err)
		}
		if next == "" {
			break
		}
	}
	// Reported before ListDone syncs the store. list likewise reports a
	// list once it is queued, before the informer applies it.
	klog.FromContext(ctx).V(4).Info("Listed in pages", "reflector", r.name, "type", r.typeDescription,
		"cause", CauseCold, "resourceVersion", resourceVersion, "items", items, "pages", pages)
	r.observer.Listed(CauseCold, resourceVersion, items, pages)
	if err := r.pagedList.ListDone(ctx, resourceVersion); err != nil {
		return fmt.Errorf("%w: end of the list at resourceVersion %q: %w", ErrStore, resourceVersion, err)
	}

	r.mu.Lock()
	r.lastSyncRVUnavailable = false
	r.lastSyncRV = resourceVersion
	r.nextListCause = CauseRelistError
	r.mu.Unlock()
	r.watchFailures = 0

	return nil
}

// listFailed makes the list after a failed paged list a consistent read
// (resourceVersion ""), as client-go's list after an expired continue token
// is. The store may hold pages of a snapshot no older than the
// server's newest at the first request. A lagging watch cache may serve a
// list at "0" older than those pages. The store and its handlers would go
// back in time (see Options.ListFrom). With no page stored, the cold start
// still promised a consistent read, and a list at "0" would sync the
// informer on a lagging cache's past. A successful list clears the mark.
func (r *Reflector) listFailed() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastSyncRVUnavailable = true
}

// pageResult is one page request's outcome.
type pageResult struct {
	list runtime.Object
	err  error
}

// fetchPage asks for one page on its own goroutine. The channel receives
// exactly one result, even when ctx ends first.
func (r *Reflector) fetchPage(ctx context.Context, opts metav1.ListOptions) chan pageResult {
	ch := make(chan pageResult, 1)
	go func() {
		list, err := r.lw.ListWithContext(ctx, opts)
		ch <- pageResult{list, err}
	}()
	return ch
}
