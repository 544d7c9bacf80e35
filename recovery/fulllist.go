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

// A recovery from a full list (attempt.go). A recovery lists the whole
// collection through Lister.ListObjectsWire in three cases. The server
// cannot list the collection's metadata, as an aggregated API's server may
// not serve the metadata form. Or the listed resourceVersions are not
// integers. Or the metadata list's first page shows much changed. That one
// full list then serves as both the metadata list and the fetches.
//
//   - Each page in Kubernetes protobuf of the expected type's list is read
//     as it arrives, without decoding it (wirelist.go, wirestream.go). It
//     yields every item's name, namespace, UID and resourceVersion. It keeps
//     the bytes of items newer than the version the store holds
//     (newerThan), which alone may have changed. So the list is never in
//     memory whole.
//   - The diff is the metadata list's. Unchanged objects are neither
//     decoded nor rewritten, and delivered only to handlers due for a
//     resync. Gone and replaced ones are deleted. It differs only in that
//     resourceVersions that are not integers are told equal or not.
//   - The objects to fetch are decoded from the list, alone. Any whose bytes
//     were not kept are fetched. They are applied through the forward rule
//     before the watch opens. The list is consistent at its
//     resourceVersion, so the recovery ends there. If the store holds
//     objects newer than the list, it ends once the watch has passed them.
//
// A page in another format (JSON) is decoded whole. Only the writing and
// delivering of its unchanged objects is saved.

// fetchPageSize is the Limit of each page of a recovery's fetch of the
// collection, as the pager's.
const fetchPageSize = reflector.DefaultPagedListPageSize

// listFull lists the whole collection through Lister.ListObjectsWire for a
// recovery. It lists NotOlderThan resourceVersion, and "" makes a consistent
// read. It pages as the full list it replaces would (listPageSize). A list
// at a resourceVersion is one request, which the watch cache serves. It
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

// newerThan returns which items of a full list a recovery keeps the bytes
// of. The list is made at resourceVersion, what the store holds the
// collection at, or newer. The recovery keeps the items newer than it, and
// any whose version cannot be compared. Where the store is consistent at
// resourceVersion, an item no newer is stored at the same version. It was
// created and last changed before, so the diff finds it unchanged. A
// recovery that failed after its diff leaves the store not consistent, with
// keys behind. There the diff finds such an item changed, and the recovery
// fetches it, as after a metadata list. So a full list holds in memory the
// changed items only, not every item's bytes.
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
// diff found to fetch. It decodes them and no others, and lets go of the
// list's bodies. It returns nil for a metadata list.
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
	// Decode on every core, since the warm start's walk waits for the
	// recovery.
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

// listWire lists namespace through lister with opts, page after page as
// client-go's pager does. An empty namespace is all the lister lists.
// opts.Limit is the page size, and each page continues the first. An expired
// continue token lists again in one request. listWire returns the items of
// every page, the list's resourceVersion and the number of pages. Of a page
// read from its bytes, only the items keep wants hold them (wireItem.held).
// The others are their identity alone.
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

// wirePage lists one page. It reads a page in Kubernetes protobuf of the
// list of Options.ExpectedType as it arrives. Only the bytes of the items
// keep wants are kept, to be decoded later. It decodes any other page
// whole. A page whose body does not read is asked for again once and
// decoded whole. The error of that decoding is the one to report. A body
// that does not read is one cut short anywhere, an empty one included. A
// connection closed mid-response cuts it short. It is also one that turns
// out, partly read, not to be that list. A changed layout does that, since
// the scanner pins v0.37.2's.
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
	// Read in part, or not decoded. Ask again, and decode that whole.
	if whole, decode, err = wholePage(ctx, lister, namespace, opts); err != nil {
		return nil, err
	}
	return r.decodedWirePage(whole, decode)
}

// errNoDecoder says Lister.ListObjectsWire returned a body without the
// function that decodes it.
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
// protobuf of the list of Options.ExpectedType, it returns the list. The
// items keep wants hold copies of their bytes. Where the body is in another
// format, it returns the whole body. A body cut short is an error, and so is
// one that turns out, part read, not to be that list. It is an errWire for
// protobuf or a body cut inside its prefix. It is an errBody for another
// format. Neither list nor body is returned then.
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
// ends with a bare io.EOF may still be cut short. Decoding a protobuf body
// cut where an envelope field ends gives a list without items. So a
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

// decodedLists is the full list of Options.ListInFull without a wire form.
// It has no body to read, and listObjects decodes each page whole.
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
