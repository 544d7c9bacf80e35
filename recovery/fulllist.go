package recovery

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	goruntime "runtime"
	"sync"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1beta1 "k8s.io/apimachinery/pkg/apis/meta/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/boltinformer/boltinformer/internal/wire"
	"github.com/boltinformer/boltinformer/reflector"
)

// A recovery from a full list (attempt.go). Where the server cannot list
// the collection's metadata (an aggregated API's server may not serve the
// metadata form), the listed resourceVersions are not integers, or the
// metadata list's first page shows much changed, a recovery lists the
// whole collection through Lister.ListObjectsWire instead, and that one list
// serves as both the metadata list and the fetches:
//
//   - each page is read as it arrives, without decoding it, where it is
//     Kubernetes protobuf of the expected type's list (wirelist.go,
//     wirestream.go): every item's name, namespace, UID and
//     resourceVersion, and the bytes of those newer than the version the
//     store holds (newerThan), which alone may have changed; so the list
//     is never in memory whole;
//   - the diff is the metadata list's (unchanged objects are neither
//     decoded, nor rewritten, nor delivered but to handlers due for a
//     resync; gone and replaced ones are deleted), except that
//     resourceVersions that are not integers are only told equal or not;
//   - the objects to fetch are decoded from the list, alone (any whose
//     bytes were not kept are fetched), and applied
//     through the forward rule before the watch opens. The list is
//     consistent at its resourceVersion, so the recovery ends there (or,
//     if the store holds objects newer than the list, once the watch has
//     passed them).
//
// A page in another format (JSON) is decoded whole, and only the writing
// and delivering of its unchanged objects is saved.

// fetchPageSize is the Limit of each page of a recovery's fetch of a
// namespace or the collection, as the pager's.
const fetchPageSize = reflector.DefaultPagedListPageSize

// listFull lists the whole collection through Lister.ListObjectsWire at
// resourceVersion (NotOlderThan it; "" a consistent read), for a recovery,
// paged as the full list it replaces would be (listPageSize: at a
// resourceVersion in one request, which the watch cache serves). It
// returns reflector.ErrFullList if the Lister has no ListObjectsWire, unless
// Options.ListInFull asks for its pages decoded.
func (r *Relister) listFull(ctx context.Context, resourceVersion string) (*diffList, error) {
	listWire := r.cfg.lister.ListObjectsWire
	if listWire == nil {
		if !r.cfg.ListInFull {
			return nil, reflector.ErrFullList
		}
		listWire = decodedLists(r.cfg.lister.ListObjects)
	}
	opts := listOptions(resourceVersion, r.l.PageSize(resourceVersion))
	items, rv, pages, err := r.listWire(ctx, listWire, "", opts, r.newerThan(resourceVersion))
	if err != nil {
		return nil, err
	}
	l := &diffList{rv: rv, pages: pages,
		listed: make(map[string]listedItem, len(items)), objects: map[string]wireItem{}}
	for _, it := range items {
		key := it.key()
		l.listed[key] = listedItem{uid: it.uid, rv: it.resourceVersion}
		if it.held() {
			l.objects[key] = it
		}
	}
	return l, nil
}

// newerThan returns which items of a full list made at resourceVersion
// (what the store holds the collection at, or newer) a recovery keeps the
// bytes of: those newer than it, and any whose version cannot be compared.
// Where the store is consistent at resourceVersion, an item no newer is
// stored at the same version (it was created and last changed before), so
// the diff finds it unchanged; where it is not (a recovery that failed
// after its diff left keys behind), the diff finds such an item changed
// and the recovery fetches it, as after a metadata list. So a full list
// holds in memory the changed items only, not every item's bytes.
func (r *Relister) newerThan(resourceVersion string) func(*wireItem) bool {
	stored, ok := parseRV(resourceVersion)
	if !ok || r.cfg.OpaqueVersions {
		return func(*wireItem) bool { return true }
	}
	return func(it *wireItem) bool {
		n, ok := parseRV(it.resourceVersion)
		return !ok || n > stored
	}
}

// decodeListed returns the objects a full list (l) holds of the keys the
// diff found to fetch, decoding them and no others, and lets go of the
// list's bodies. Nil for a metadata list.
func (rec *attempt) decodeListed(l *diffList) (map[string]runtime.Object, error) {
	if l.objects == nil {
		return nil, nil
	}
	defer func() { l.objects = nil }()
	for _, it := range l.objects {
		if it.obj != nil {
			rec.stats.Decoded++ // a page decoded whole
		}
	}
	// A key to fetch whose bytes the list did not keep (newerThan) stays
	// to fetch.
	keys := make([]string, 0, len(rec.pending))
	for key := range rec.pending {
		if it, ok := l.objects[key]; ok {
			keys = append(keys, key)
			if it.obj == nil {
				rec.stats.Decoded++
			}
		}
	}
	// On every core: the warm start's walk waits for the recovery.
	objs := make([]runtime.Object, len(keys))
	errs := make([]error, len(keys))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(goruntime.GOMAXPROCS(0), len(keys)) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(keys); i = int(next.Add(1) - 1) {
				it := l.objects[keys[i]]
				objs[i], errs[i] = it.object()
			}
		})
	}
	wg.Wait()
	out := make(map[string]runtime.Object, len(keys))
	for i, key := range keys {
		if errs[i] != nil {
			return nil, fmt.Errorf("decoding %s of the list: %w", key, errs[i])
		}
		out[key] = objs[i]
	}
	return out, nil
}

// listWire lists namespace ("" all the lister lists) through lister with
// opts, page after page as client-go's pager does (opts.Limit is the page
// size; each page continues the first; an expired continue token lists
// again in one request), and returns the items of every page, the list's
// resourceVersion and the number of pages. Of a page read from its bytes,
// only the items keep wants hold them (wireItem.held); the others are
// their identity alone.
func (r *Relister) listWire(ctx context.Context, lister listObjectsWire, namespace string, opts metav1.ListOptions, keep func(*wireItem) bool) ([]wireItem, string, int, error) {
	first := opts
	var items []wireItem
	rv, pages := "", 0
	for {
		page, err := r.wirePage(ctx, lister, namespace, opts, keep)
		if apierrors.IsResourceExpired(err) && opts.Continue != "" {
			opts = first
			opts.Limit = 0
			items, pages = nil, 0
			page, err = r.wirePage(ctx, lister, namespace, opts, keep)
		}
		if err != nil {
			return nil, "", 0, err
		}
		if pages == 0 {
			rv = page.resourceVersion // every page is of the first one's snapshot
		}
		pages++
		items = append(items, page.items...)
		if page.continueToken == "" || opts.Limit == 0 {
			return items, rv, pages, nil
		}
		opts.Continue = page.continueToken
		opts.ResourceVersion, opts.ResourceVersionMatch = "", ""
	}
}

// wirePage lists one page and reads it as it arrives where it is
// Kubernetes protobuf of the list of Options.ExpectedType (scanned: only
// the bytes of the items keep wants are kept, to be decoded later), and
// decodes it whole otherwise. A page whose body does not read is asked for
// again once and decoded whole, whose error is then the one to report. That
// is a body cut short anywhere (a connection closed mid-response), an empty
// one included, and one that turns out, partly read, not to be that list
// (a changed layout: the scanner pins v0.37.2's).
func (r *Relister) wirePage(ctx context.Context, lister listObjectsWire, namespace string, opts metav1.ListOptions, keep func(*wireItem) bool) (*wireList, error) {
	body, decode, err := lister(ctx, namespace, opts)
	if err != nil {
		return nil, err
	}
	if body == nil {
		return r.decodedWirePage(nil, decode)
	}
	l, whole, err := r.scanWirePage(body, keep)
	_ = body.Close()
	switch {
	case err == nil && l != nil:
		return l, nil
	case err == nil:
		if decode == nil {
			return nil, errNoDecoder
		}
		obj, err := decode(whole)
		if err == nil {
			return r.listedPage(obj)
		}
	case !errors.Is(err, errWire) && !errors.Is(err, errBody):
		return nil, err
	}
	// Read in part, or not decoded: ask again, and decode that whole.
	if whole, decode, err = wholePage(ctx, lister, namespace, opts); err != nil {
		return nil, err
	}
	return r.decodedWirePage(whole, decode)
}

// errNoDecoder: Lister.ListObjectsWire returned a body without the function that
// decodes it.
var errNoDecoder = errors.New("the lister returned no decoder")

// decodedWirePage decodes a page's whole body with decode.
func (r *Relister) decodedWirePage(whole []byte, decode func([]byte) (runtime.Object, error)) (*wireList, error) {
	if decode == nil {
		return nil, errNoDecoder
	}
	obj, err := decode(whole)
	if err != nil {
		return nil, err
	}
	return r.listedPage(obj)
}

// listedPage is the page of a decoded list, obj.
func (r *Relister) listedPage(obj runtime.Object) (*wireList, error) {
	if gvk := obj.GetObjectKind().GroupVersionKind(); isTableList(obj) {
		return nil, fmt.Errorf("unsupported list gvk: %v, type: %v", gvk, r.l.TypeDescription())
	}
	listMeta, err := meta.ListAccessor(obj)
	if err != nil {
		return nil, fmt.Errorf("unable to understand list result %T: %w", obj, err)
	}
	objs, err := meta.ExtractListWithAlloc(obj)
	if err != nil {
		return nil, fmt.Errorf("unable to extract items of %T: %w", obj, err)
	}
	l := &wireList{resourceVersion: listMeta.GetResourceVersion(), continueToken: listMeta.GetContinue(), items: make([]wireItem, 0, len(objs))}
	for _, o := range objs {
		m, err := meta.Accessor(o)
		if err != nil {
			return nil, fmt.Errorf("an item of the list, %T: %w", o, err)
		}
		l.items = append(l.items, wireItem{namespace: m.GetNamespace(), name: m.GetName(), uid: m.GetUID(), resourceVersion: m.GetResourceVersion(), obj: o})
	}
	return l, nil
}

// scanWirePage reads a page's body as it arrives. Where it is Kubernetes
// protobuf of the list of Options.ExpectedType it returns the list, whose
// items keep wants hold their bytes (copied); where it is in another format,
// the whole body. A body cut short, or that turns out, part read, not to be
// that list, is an errWire (protobuf, or cut inside its prefix) or errBody
// (another format), and neither is returned.
func (r *Relister) scanWirePage(body io.Reader, keep func(*wireItem) bool) (*wireList, []byte, error) {
	br := bufio.NewReaderSize(body, 64<<10)
	proto, err := sniffProtobuf(br)
	if err != nil {
		return nil, nil, err
	}
	if !proto {
		whole, err := io.ReadAll(br)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %w", errBody, err)
		}
		return nil, whole, nil
	}
	var dec func([]byte) (runtime.Object, error)
	var items []wireItem
	l, err := scanProtobufListStreamMeta(br, func(l *wireList) {
		dec = itemDecoder(r.l.ExpectedType(), l.kind)
	}, func(it wireItem) error {
		if dec == nil {
			return fmt.Errorf("%w: not a list of %v", errWire, r.l.ExpectedType())
		}
		if keep(&it) {
			it.raw, it.decode = bytes.Clone(it.raw), dec
		} else {
			it.raw = nil
		}
		items = append(items, it)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if itemDecoder(r.l.ExpectedType(), l.kind) == nil { // an empty list, or the kind read last
		return nil, nil, fmt.Errorf("%w: not a list of %v", errWire, r.l.ExpectedType())
	}
	l.items = items
	return l, nil, nil
}

// wholePage lists one page again and reads its body whole. A body that
// ends with a bare io.EOF may still be cut short, and decoding a protobuf
// one cut where an envelope field ends gives a list without items. So a
// protobuf body must hold its whole envelope (wire.CheckWhole), or the page
// fails.
func wholePage(ctx context.Context, lister listObjectsWire, namespace string, opts metav1.ListOptions) ([]byte, func([]byte) (runtime.Object, error), error) {
	body, decode, err := lister(ctx, namespace, opts)
	if err != nil || body == nil {
		return nil, decode, err
	}
	defer func() { _ = body.Close() }()
	whole, err := io.ReadAll(body)
	if err == nil {
		err = wire.CheckWhole(whole)
	}
	return whole, decode, err
}

// decodedLists is the full list of Options.ListInFull without a wire
// form: no body to read, each page decoded whole by listObjects.
func decodedLists(listObjects func(ctx context.Context, namespace, name string, opts metav1.ListOptions) (runtime.Object, error)) listObjectsWire {
	return func(ctx context.Context, namespace string, opts metav1.ListOptions) (io.ReadCloser, func([]byte) (runtime.Object, error), error) {
		return nil, func([]byte) (runtime.Object, error) { return listObjects(ctx, namespace, "", opts) }, nil
	}
}

// isTableList reports a Table response, which cannot feed a cache, as
// client-go's reflector does for a list.
func isTableList(obj runtime.Object) bool {
	u, ok := obj.(*unstructured.UnstructuredList)
	if !ok {
		return false
	}
	gvk := u.GetObjectKind().GroupVersionKind()
	return gvk == metav1.SchemeGroupVersion.WithKind("Table") || gvk == metav1beta1.SchemeGroupVersion.WithKind("Table")
}
