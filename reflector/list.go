// Copyright The Kubernetes Authors.
// Copyright The boltinformer Authors.
//
// Licensed under the Apache License, Version 2.0 (the "License");
// you may not use this file except in compliance with the License.
// You may obtain a copy of the License at
//
//     http://www.apache.org/licenses/LICENSE-2.0
//
// Unless required by applicable law or agreed to in writing, software
// distributed under the License is distributed on an "AS IS" BASIS,
// WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
// See the License for the specific language governing permissions and
// limitations under the License.
//
// Ported from k8s.io/client-go v0.37.2, modified:
//   - tools/cache/reflector.go
// The ports are listed in hack/upstream-versions.txt.

package reflector

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1beta1 "k8s.io/apimachinery/pkg/apis/meta/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/pager"
	"k8s.io/klog/v2"
)

// list lists the collection at relistResourceVersion() through a pager, as
// client-go's (*Reflector).list does. It retries once at "" if that version
// is expired or too large. It hands the items to Store.Replace and
// records the list's resourceVersion.
//
// Unlike client-go's, the pager runs on the calling goroutine with ctx. A
// cancelled context aborts the request instead of leaving it running in
// the background. So Run never outlives its list. It returns nil, without
// touching the Store, when ctx ends during the list.
func (r *Reflector) list(ctx context.Context) error {
	r.mu.RLock()
	cause := r.nextListCause
	paginatedBefore := r.paginatedResult
	options := metav1.ListOptions{ResourceVersion: r.relistResourceVersionLocked()}
	r.mu.RUnlock()
	if r.pagedListUsable(cause) {
		return r.listPaged(ctx)
	}

	// pages counts the responses that make up the current result. The
	// pager answers an expired continue token with one full list. That list
	// replaces the pages gathered so far.
	pages := 0
	p := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		obj, err := r.lw.ListWithContext(ctx, opts)
		switch {
		case err == nil:
			pages++
		case apierrors.IsResourceExpired(err) && opts.Continue != "":
			pages = 0
		}
		return obj, err
	})
	p.PageSize = r.listPageSize(options.ResourceVersion, paginatedBefore)
	options.ResourceVersionMatch = listMatch(options.ResourceVersion, p.PageSize)

	listedAt := options.ResourceVersion
	list, paginated, err := p.ListWithAlloc(ctx, options)
	if isResourceVersionUnavailable(err) || (options.ResourceVersion != "" && isInvalidResourceVersionError(err)) {
		// The pager only falls back on expired continue tokens. The first
		// page itself can be expired or too new. Retry at "", a consistent
		// read, as client-go does. A version the server cannot parse is
		// retried at "" too.
		r.markResourceVersionUnavailable(cause)
		pages = 0
		listedAt = r.relistResourceVersion()
		list, paginated, err = p.ListWithAlloc(ctx, metav1.ListOptions{ResourceVersion: listedAt})
	}
	if ctx.Err() != nil {
		return nil
	}
	if err == nil {
		if unsupported, gvk := isUnsupportedTableListObject(list); unsupported {
			err = fmt.Errorf("unsupported list gvk: %v, type: %v", gvk, r.typeDescription)
		}
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrList, r.typeDescription, err)
	}

	listMeta, err := meta.ListAccessor(list)
	if err != nil {
		return fmt.Errorf("%w: %s: unable to understand list result %T: %w", ErrList, r.typeDescription, list, err)
	}
	resourceVersion := listMeta.GetResourceVersion()
	items, err := meta.ExtractListWithAlloc(list)
	if err != nil {
		return fmt.Errorf("%w: %s: unable to extract items of %T: %w", ErrList, r.typeDescription, list, err)
	}
	if r.listAfter != nil {
		// Listed while the stored state went to the handlers, and applied
		// only after that delivery (see Options.ListAfter).
		select {
		case <-r.listAfter():
		case <-ctx.Done():
			return nil
		}
	}
	found := make([]interface{}, len(items))
	for i, item := range items {
		found[i] = item
	}
	if r.catchingUp() {
		// Before Replace, because the caller must know its target before
		// the store applies the list.
		r.catchUpListed(listedAt, resourceVersion, false)
	}
	if err := r.store.Replace(found, resourceVersion); err != nil {
		return fmt.Errorf("%w: Replace at resourceVersion %q: %w", ErrStore, resourceVersion, err)
	}

	r.mu.Lock()
	// Only a list at "0" says anything about the watch cache. Lists at ""
	// are paginated whenever Limit is set, watch cache or not.
	if options.ResourceVersion == "0" && paginated {
		r.paginatedResult = true
	}
	r.lastSyncRVUnavailable = false
	r.lastSyncRV = resourceVersion
	r.nextListCause = CauseRelistError
	r.mu.Unlock()
	r.watchFailures = 0 // watches failing in a row since this list

	klog.FromContext(ctx).V(4).Info("Listed", "reflector", r.name, "type", r.typeDescription,
		"cause", cause, "resourceVersion", resourceVersion, "items", len(items), "pages", pages)
	r.observer.Listed(cause, resourceVersion, len(items), pages)
	return nil
}

// listPageSize is client-go's choice of the page size of a list at
// resourceVersion, verbatim. paginatedBefore says an earlier list at "0"
// came back paginated.
func (r *Reflector) listPageSize(resourceVersion string, paginatedBefore bool) int64 {
	switch {
	case r.pageSize != 0:
		return r.pageSize
	case paginatedBefore:
		// An earlier list at "0" was paginated, so the watch cache is off
		// and the server honours paging. Keep the default page size.
	case resourceVersion != "" && resourceVersion != "0":
		// Every server version serves a list at a specific
		// resourceVersion from the watch cache only without Limit. So it
		// is not paged, which avoids a thundering herd on etcd. "0" is left
		// paged, because the watch cache ignores Limit for it anyway.
		// Without a watch cache, paging is what we want. A paged list at a version
		// asks for NotOlderThan (see listMatch).
		return 0
	}
	return DefaultPagedListPageSize // the pager's default
}

// listMatch is the resourceVersionMatch of a list at resourceVersion in
// pages of limit items. It is NotOlderThan for a paged list at a version,
// and none otherwise. kube-apiserver serves a version with a limit and no
// match as an exact read from etcd, its delegator's legacy exact match.
// That returns the old data itself. A relist after a 410 would then watch
// again from where the watch expired. client-go's reflector sends no match
// there, and loops between such lists and expired watches until etcd
// compacts that version. With NotOlderThan the list is never older than
// the version, and as new as the server can serve it. A watch cache serves
// it from its position, paged where it keeps snapshots, and etcd at its
// newest revision. client-go drops paging here when it did not ask to
// page. This package keeps it, because a PageSize is a bound on each
// response's size that the user chose.
func listMatch(resourceVersion string, limit int64) metav1.ResourceVersionMatch {
	if limit == 0 || resourceVersion == "" || resourceVersion == "0" {
		return ""
	}
	return metav1.ResourceVersionMatchNotOlderThan
}

var unsupportedTableGVK = map[schema.GroupVersionKind]bool{
	metav1beta1.SchemeGroupVersion.WithKind("Table"): true,
	metav1.SchemeGroupVersion.WithKind("Table"):      true,
}

// isUnsupportedTableObject mirrors client-go, since Table responses cannot
// feed a cache.
func isUnsupportedTableObject(obj runtime.Object) bool {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || u.GetKind() != "Table" {
		return false
	}
	return unsupportedTableGVK[u.GetObjectKind().GroupVersionKind()]
}

func isUnsupportedTableListObject(obj runtime.Object) (bool, schema.GroupVersionKind) {
	u, ok := obj.(*unstructured.UnstructuredList)
	if !ok {
		return false, schema.GroupVersionKind{}
	}
	gvk := u.GetObjectKind().GroupVersionKind()
	return unsupportedTableGVK[gvk], gvk
}
