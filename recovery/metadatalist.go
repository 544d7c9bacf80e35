package recovery

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// A recovery's metadata list (attempt.go) is paged. Each page is read as it
// arrives where the lister hands over its bytes (Lister.ListMetadataWire).
// Each page is asked for while the one before is still being read
// (pageAhead).

// listMetadata lists the collection's metadata, paged, at resourceVersion
// with NotOlderThan. An empty resourceVersion makes a consistent read.
//
// The list Hooks.Listed gives is a consistent read, at least as new as the
// store (givenListing). So it serves for a list at resourceVersion. It never
// serves for a consistent read at "", which is asked for now. That read must
// get past the reads a catch-up took (reflector.CatchUp). The given list may
// predate them.
func (r *Relister) listMetadata(ctx context.Context, resourceVersion string) (*diffList, error) {
	pageSize := int64(recoveryPageSize)
	if r.cfg.lister.ListMetadataWire != nil {
		pageSize = recoveryStreamPageSize
	}
	opts := listOptions(resourceVersion, pageSize)
	first := opts
	l := &diffList{listed: map[string]listedItem{}}
	if r.listed != nil && resourceVersion != "" {
		if given := r.givenListing(ctx); given != nil {
			l.pages, l.rv, l.given = given.Pages, given.ResourceVersion, true
			for key, v := range given.Versions {
				l.listed[key] = listedItem{uid: v.UID, rv: v.ResourceVersion}
			}
			return l, nil
		}
	}
	// ahead is the next page, asked for while this one is read. It is
	// dropped on every way out.
	var ahead *pageAhead
	defer func() { ahead.drop() }()
	// changes counts the first page's changed items. It is nil after the
	// first page, since only the first page decides.
	var changes *changeCount
	// askAhead asks for the page after one whose ListMeta says it is
	// continued by next. It asks nothing while the first page decides. A
	// first page that chooses a full list would drop the page asked ahead,
	// encoded and read for nothing.
	askAhead := func(next string) {
		if next != "" && opts.Limit != 0 && changes == nil && !r.cfg.noPageAhead {
			o := opts
			o.Continue = next
			o.ResourceVersion, o.ResourceVersionMatch = "", ""
			ahead = r.askAhead(ctx, o)
		}
	}
	for {
		this := ahead
		ahead = nil
		changes = nil
		if l.pages == 0 {
			changes = r.countChanges(resourceVersion)
		}
		page, err := r.metadataPage(ctx, opts, this, askAhead, changes)
		if apierrors.IsResourceExpired(err) && opts.Continue != "" {
			// The continue token expired. List in one go, as the pager does.
			opts = first
			opts.Limit = 0
			l = &diffList{listed: map[string]listedItem{}}
			ahead.drop()
			ahead = nil
			page, err = r.metadataPage(ctx, opts, nil, nil, nil)
		}
		if err != nil {
			return nil, err
		}
		l.pages++
		if l.rv == "" || opts.Continue == "" {
			l.rv = page.resourceVersion
		}
		for _, it := range page.items {
			l.listed[it.key()] = listedItem{uid: it.uid, rv: it.resourceVersion}
		}
		if page.continueToken == "" || opts.Limit == 0 {
			return l, nil
		}
		if changes != nil && changes.many(int64(len(page.items))) {
			return nil, errManyChanged
		}
		opts.Continue = page.continueToken
		opts.ResourceVersion, opts.ResourceVersionMatch = "", ""
	}
}

// errManyChanged says the metadata list's first page shows much of the
// collection changed. The recovery lists it in full instead.
var errManyChanged = errors.New("much of the collection changed")

// countChanges returns the count by which a recovery decides from the first
// page of its metadata list whether much changed. The list is made at
// resourceVersion, what the store holds the collection at, or newer. If
// much changed, the rest of the list should not be made. One full list,
// read from its bytes through Lister.ListObjectsWire, then takes less time
// than the rest of the metadata list and the fetches (see
// firstPageFraction). The count is nil where the recovery cannot list in
// full. It is nil where there is no version to compare with, as for a
// consistent read at "". One page gives an estimate, since pages are in key
// order and one may hold only a few namespaces. A wrong estimate costs
// time, not correctness.
func (r *Relister) countChanges(resourceVersion string) *changeCount {
	if r.cfg.lister.ListObjectsWire == nil {
		return nil
	}
	stored, ok := parseRV(resourceVersion)
	if !ok {
		return nil
	}
	return &changeCount{stored: stored, fraction: r.cfg.firstPageFraction}
}

// changeCount counts the items of a page newer than stored.
type changeCount struct {
	stored   uint64
	changed  int
	fraction float64
}

// add counts one item.
func (c *changeCount) add(it wireItem) {
	if n, ok := parseRV(it.resourceVersion); !ok || n > c.stored {
		c.changed++
	}
}

// many reports whether the items counted are many changes for a page of n
// items. Asked with the page's limit while the page is read, it answers
// early. It tells as soon as the answer for the whole page can no longer
// change. A page with fewer items than its limit takes no more.
func (c *changeCount) many(n int64) bool {
	return n > 0 && c.changed > 0 && float64(c.changed) >= c.fraction*float64(n)
}

// metadataPage lists one page of the collection's metadata, its items'
// identities only. Through Lister.ListMetadataWire, it reads a protobuf body
// as it arrives. A non-nil ahead is the page's request, already made. Once
// the ListMeta is read, it calls continued, if not nil, with the continue
// token. Any other page is decoded. Where changes is not nil, it counts the
// page's items. A page read as it arrives then ends with errManyChanged as
// soon as they are many for its limit, often well before its end. A body
// cut short or not read as the layout is an errWire. A JSON body that does
// not decode is an errBody. Either is asked for again and decoded. A cut
// anywhere counts, before or inside the protobuf prefix too. So does an
// empty body, which is no list in any format.
func (r *Relister) metadataPage(ctx context.Context, opts metav1.ListOptions, ahead *pageAhead, continued func(next string), changes *changeCount) (*wireList, error) {
	return metadataPage(ctx, &r.cfg.lister, opts, ahead, continued, changes)
}

// metadataPage is Relister.metadataPage of lister.
func metadataPage(ctx context.Context, lister *Lister, opts metav1.ListOptions, ahead *pageAhead, continued func(next string), changes *changeCount) (*wireList, error) {
	if lister.ListMetadataWire == nil {
		return decodedPage(ctx, lister, opts, changes)
	}
	var body io.ReadCloser
	var err error
	if ahead != nil && ahead.opts.Continue == opts.Continue {
		defer ahead.drop()
		body, err = ahead.wait()
	} else {
		ahead.drop()
		body, err = lister.ListMetadataWire(ctx, opts)
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = body.Close() }()
	br := bufio.NewReaderSize(body, 64<<10)
	proto, err := sniffProtobuf(br)
	var page *wireList
	switch {
	case err != nil:
		// Cut before or inside the protobuf prefix, an empty body included.
	case proto:
		page, err = readMetadataPage(br, opts.Limit, continued, changes)
	default:
		page, err = jsonMetadataPage(br, changes)
	}
	if errors.Is(err, errWire) || errors.Is(err, errBody) {
		// Cut short by a connection closed mid-response, or not the layout
		// read. The failed page is asked for again and decoded whole, as a
		// full list's page is (wirePage).
		if changes != nil {
			changes.changed = 0 // the part read is counted again
		}
		return decodedPage(ctx, lister, opts, changes)
	}
	return page, err
}

// readMetadataPage reads a metadata page in protobuf from br as it arrives,
// for metadataPage. It calls continued, if not nil, once the ListMeta is
// read. It ends with errManyChanged once changes, if not nil, counts many
// for limit.
func readMetadataPage(br io.Reader, limit int64, continued func(next string), changes *changeCount) (*wireList, error) {
	var items []wireItem
	var listMeta func(*wireList)
	if continued != nil {
		listMeta = func(l *wireList) { continued(l.continueToken) }
	}
	page, err := scanProtobufListStreamMeta(br, listMeta, func(it wireItem) error {
		it.raw = nil // the scanner's buffer, reused
		items = append(items, it)
		if changes != nil {
			if changes.add(it); changes.many(limit) {
				return errManyChanged
			}
		}
		return nil
	})
	if errors.Is(err, errManyChanged) || errors.Is(err, errWire) {
		return nil, err
	}
	if err == nil && (page.kind != "PartialObjectMetadataList" || page.apiVersion != metav1.SchemeGroupVersion.String()) {
		err = fmt.Errorf("the server sent a %s %s for a metadata list", page.apiVersion, page.kind)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the metadata list: %w", err)
	}
	page.items = items
	return page, nil
}

// jsonMetadataPage decodes a metadata page in JSON from br, and counts its
// items in changes, if not nil. A body that does not decode, one cut short
// included, is an errBody.
func jsonMetadataPage(br io.Reader, changes *changeCount) (*wireList, error) {
	var list metav1.PartialObjectMetadataList
	if err := json.NewDecoder(br).Decode(&list); err != nil {
		return nil, fmt.Errorf("%w: decoding the metadata list: %w", errBody, err)
	}
	if list.Kind != "PartialObjectMetadataList" {
		return nil, fmt.Errorf("the server sent a %s %s for a metadata list", list.APIVersion, list.Kind)
	}
	return countedPage(decodedMetadataPage(&list), changes), nil
}

// decodedPage lists one page of the collection's metadata decoded, and
// counts its items in changes, if not nil.
func decodedPage(ctx context.Context, lister *Lister, opts metav1.ListOptions, changes *changeCount) (*wireList, error) {
	list, err := lister.ListMetadata(ctx, opts)
	if err != nil {
		return nil, err
	}
	if list == nil {
		return nil, errors.New("metadata list returned no list")
	}
	return countedPage(decodedMetadataPage(list), changes), nil
}

// countedPage counts a decoded page's items in changes, if not nil.
func countedPage(page *wireList, changes *changeCount) *wireList {
	if changes != nil {
		for _, it := range page.items {
			changes.add(it)
		}
	}
	return page
}

// decodedMetadataPage is the page of a decoded metadata list.
func decodedMetadataPage(list *metav1.PartialObjectMetadataList) *wireList {
	page := &wireList{resourceVersion: list.ResourceVersion, continueToken: list.Continue, items: make([]wireItem, len(list.Items))}
	for i := range list.Items {
		m := &list.Items[i].ObjectMeta
		page.items[i] = wireItem{namespace: m.Namespace, name: m.Name, uid: m.UID, resourceVersion: m.ResourceVersion}
	}
	return page
}

// pageAhead is the request of a metadata list's next page. It is made as
// soon as the page before it tells its continue token, while that page is
// still being read. A page's ListMeta precedes its items. kube-apiserver
// encodes each response on the goroutine that serves it. So a list read
// page after page keeps one of its cores busy. Asked ahead, the next page
// is encoded beside the one being read. It waits in the HTTP/2 stream's
// flow-control window, 4 MB in Go's client. kube-apiserver gzips a list for
// a client that accepts it. Gzipped, a page of recoveryStreamPageSize
// realistic Pods' metadata fits in that window. Uncompressed, the server
// gets that far ahead. The reflector reads one page at a time, and at most
// one is asked ahead.
type pageAhead struct {
	opts   metav1.ListOptions
	cancel context.CancelFunc
	done   chan struct{} // closed once the request returned
	body   io.ReadCloser
	err    error
}

// askAhead makes the request of the page opts asks for, on a goroutine.
func (r *Relister) askAhead(ctx context.Context, opts metav1.ListOptions) *pageAhead {
	listWire := r.cfg.lister.ListMetadataWire // only its pages tell their continue token early
	ctx, cancel := context.WithCancel(ctx)
	a := &pageAhead{opts: opts, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		a.body, a.err = listWire(ctx, opts)
	}()
	return a
}

// wait returns the page's body or the request's error. The body is the
// caller's to close, and drop must still be called.
func (a *pageAhead) wait() (io.ReadCloser, error) {
	<-a.done
	body := a.body
	a.body = nil
	return body, a.err
}

// drop cancels the request, waits for it and closes a body not taken. A
// nil pageAhead is nothing to drop.
func (a *pageAhead) drop() {
	if a == nil {
		return
	}
	a.cancel()
	<-a.done
	if a.body != nil {
		_ = a.body.Close()
		a.body = nil
	}
}

// givenListing returns Hooks.Listed's listing if it is at least as new as
// everything handed to the store, or nil. An older listing would tell
// objects created since deleted, and bring deleted ones back.
func (r *Relister) givenListing(ctx context.Context) *Listing {
	given := r.listed(ctx)
	if given == nil {
		return nil
	}
	last := r.l.LastSyncResourceVersion()
	listed, ok := parseRV(given.ResourceVersion)
	applied, ok2 := parseRV(last)
	if !ok || !ok2 || listed < applied {
		klog.FromContext(ctx).V(4).Info("Not recovering from the given metadata list: the store has applied newer changes", "reflector", r.l.Name(), "listResourceVersion", given.ResourceVersion, "lastSyncResourceVersion", last)
		return nil
	}
	return given
}

// Listing is a consistent metadata list of a collection, as ListVersions
// takes it. It holds each object's Version by key, at one resourceVersion.
type Listing struct {
	ResourceVersion string
	Versions        map[string]Version
	Pages           int
}

// ListVersions takes a consistent metadata list of lister's collection, at
// resourceVersion "". It lists in pages of recoveryStreamPageSize items of
// one snapshot. The small collections cache.Informer takes it for fit in one
// page. Pages through Lister.ListMetadataWire are read as they arrive. Each
// item's identity is kept, and nothing else of it is decoded or held.
func ListVersions(ctx context.Context, lister *Lister) (*Listing, error) {
	opts := metav1.ListOptions{Limit: recoveryStreamPageSize}
	l := &Listing{Versions: map[string]Version{}}
	for {
		page, err := metadataPage(ctx, lister, opts, nil, nil, nil)
		if err != nil {
			return nil, err
		}
		if l.Pages++; l.Pages == 1 {
			// Every page is of the snapshot the first one was read at.
			l.ResourceVersion = page.resourceVersion
		}
		for _, it := range page.items {
			l.Versions[it.key()] = Version{UID: it.uid, ResourceVersion: it.resourceVersion}
		}
		if page.continueToken == "" {
			return l, nil
		}
		opts.Continue = page.continueToken
	}
}
