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
// one Store.Replace (see Options.PagedList), so that the list is never
// held whole: a store that keeps its objects elsewhere (a bounded
// persistent store) then needs memory for a page, not for the collection.
// The reflector calls it from its own goroutine, never concurrently with
// itself or with the Store's methods.
type PagedList interface {
	// ListPage applies one page of the list, its items in the order the
	// server sent them; the PagedList takes ownership of the slice. An
	// error ends the list (reported as ErrStore).
	ListPage(ctx context.Context, items []interface{}) error
	// ListDone is called once every page has been applied, with the
	// list's resourceVersion, before the watch starts from it. An error
	// fails the list (reported as ErrStore).
	ListDone(ctx context.Context, resourceVersion string) error
}

// DefaultPagedListPageSize is the Limit of a paged list's requests when
// Options.PageSize is zero: the pager's default.
const DefaultPagedListPageSize = 500

// pagedListUsable reports whether the next list is to be handed to the
// PagedList: only the first list of a cold start (nothing stored that a
// list would have to be reconciled with), and only once. A paged list that
// failed is followed by an ordinary one at "" (see listFailed), which the
// Store reconciles with the pages it applied.
func (r *Reflector) pagedListUsable(cause StartCause) bool {
	return r.pagedList != nil && !r.pagedListTried && cause == CauseCold && !r.catchingUp()
}

// listPaged lists the collection as a consistent read (resourceVersion "")
// in pages of Options.PageSize items (DefaultPagedListPageSize by default),
// each request continuing the last, and hands each page to the PagedList
// as it arrives; then ListDone, and the reflector records the list's
// resourceVersion as list does. The next page is asked for before the
// PagedList takes this one, so the server's work and the store's overlap;
// at most two pages are held. An apiserver with the watch cache's
// consistent reads and snapshots (Kubernetes 1.34 and later by default)
// serves every page from its cache; older ones read the pages from etcd,
// as client-go's paged lists do. Any failure — a request, an expired
// continue token, the PagedList — fails the list; the next one is an
// ordinary list, a consistent read too (see listFailed). It returns nil,
// having applied what it got, when ctx ends.
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
	// The request in flight ends with the list: cancelled, then awaited,
	// so that nothing the list started outlives it.
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
	// Reported before ListDone syncs the store, as list reports a list
	// once it is queued, before the informer applies it.
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
// is. The store may hold pages of a snapshot no older than the server's
// newest at the first request. A lagging watch cache may serve a list at
// "0" older than those pages: the store and its handlers would go back in
// time (see Options.ListFrom). With no page stored, the cold start still
// promised a consistent read, and a list at "0" would sync the informer on
// a lagging cache's past. A successful list clears the mark.
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
// exactly one result, also when ctx ends first.
func (r *Reflector) fetchPage(ctx context.Context, opts metav1.ListOptions) chan pageResult {
	ch := make(chan pageResult, 1)
	go func() {
		list, err := r.lw.ListWithContext(ctx, opts)
		ch <- pageResult{list, err}
	}()
	return ch
}
