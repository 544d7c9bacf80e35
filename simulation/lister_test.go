package simulation

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/boltinformer/boltinformer/recovery"
)

// The requests the informer makes, as kube-apiserver answers them: lists
// (full, paged, limit=1 consistent reads), watches, metadata lists and
// one-object fetches, each of which may be answered with an injected error.

// Request kinds, for injected errors, triggers and counts.
const (
	KindList  = "list"  // ListerWatcher.List
	KindWatch = "watch" // ListerWatcher.Watch
	KindMeta  = "meta"  // recovery.Lister.ListMetadata (and its wire form)
	KindFetch = "fetch" // recovery.Lister.ListObjects (and its wire form)
	KindAny   = "any"
	// KindPage is any list, metadata list or fetch with a continue token:
	// a trigger's kind only.
	KindPage = "page"
	// KindCommit is a group commit of the cache file: a trigger's kind
	// only.
	KindCommit = "commit"
)

var podsResource = schema.GroupResource{Resource: "pods"}

type fault struct {
	kind string
	code int
}

// Inject makes the next n requests of kind (or of any kind, KindAny) fail
// with the HTTP status code: 403, 404, 429 or 500.
func (s *Server) Inject(kind string, code, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.faults = append(s.faults, fault{kind: kind, code: code})
	}
}

// ClearFaults drops the injected errors not yet served.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// faultLocked returns the error the next request of kind gets, or nil.
func (s *Server) faultLocked(kind string) error {
	s.counts[kind]++
	for i, f := range s.faults {
		if f.kind != kind && f.kind != KindAny {
			continue
		}
		s.faults = append(s.faults[:i], s.faults[i+1:]...)
		s.counts["fault"]++
		cause := errors.New("injected by the simulation")
		switch f.code {
		case 403:
			return apierrors.NewForbidden(podsResource, "", cause)
		case 404:
			return apierrors.NewNotFound(podsResource, "")
		case 429:
			return apierrors.NewTooManyRequests("injected by the simulation", 1)
		default:
			return apierrors.NewInternalError(cause)
		}
	}
	return nil
}

func continueToken(rv int64, key string) string { return fmt.Sprintf("%d/%s", rv, key) }

func parseContinue(tok string) (int64, string, error) {
	i := strings.IndexByte(tok, '/')
	if i < 0 {
		return 0, "", fmt.Errorf("invalid continue token %q", tok)
	}
	rv, err := strconv.ParseInt(tok[:i], 10, 64)
	return rv, tok[i+1:], err
}

// listLocked returns one page of the objects keep accepts, as a list with
// opts is answered on the apiserver in: its items, revision and continue
// token.
func (s *Server) listLocked(in *instance, opts metav1.ListOptions, keep func(*corev1.Pod) bool) ([]*corev1.Pod, int64, string, error) {
	rv, cached, err := s.readAtLocked(in, opts)
	if err != nil {
		return nil, 0, "", err
	}
	after := ""
	if opts.Continue != "" {
		_, after, _ = parseContinue(opts.Continue)
	}
	limit := opts.Limit
	if cached && !s.cachePages {
		limit = 0 // the watch cache ignores Limit
	}
	if limit > 0 && s.pageCap > 0 {
		limit = min(limit, int64(s.pageCap))
	}
	var items []*corev1.Pod
	for _, p := range s.stateAtLocked(rv) {
		key := p.Namespace + "/" + p.Name
		if (after != "" && key <= after) || !keep(p) {
			continue
		}
		if limit > 0 && int64(len(items)) == limit {
			last := items[len(items)-1]
			return items, rv, continueToken(rv, last.Namespace+"/"+last.Name), nil
		}
		items = append(items, p)
	}
	return items, rv, "", nil
}

func podList(items []*corev1.Pod, rv int64, cont string) *corev1.PodList {
	out := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.FormatInt(rv, 10), Continue: cont}}
	for _, p := range items {
		out.Items = append(out.Items, *p.DeepCopy())
	}
	return out
}

// ListerWatcher is the informer's view of the server: a
// cache.ListerWatcherWithContext and a recovery's lister over Pods
// (recoveryLister).
// It reports watch-list semantics unsupported, as a server without
// streaming lists does.
type ListerWatcher struct {
	s *Server
}

// ListerWatcher returns the server's ListerWatcher, which also lists for a
// recovery.
func (s *Server) ListerWatcher() *ListerWatcher { return &ListerWatcher{s: s} }

var (
	_ cache.ListerWatcher            = (*ListerWatcher)(nil)
	_ cache.ListerWatcherWithContext = (*ListerWatcher)(nil)
)

// recoveryLister is the recovery.Lister of l's methods, without wire forms.
func (l *ListerWatcher) recoveryLister() *recovery.Lister {
	return &recovery.Lister{ListMetadata: l.ListMetadata, ListObjects: l.ListObjects}
}

func (l *ListerWatcher) IsWatchListSemanticsUnSupported() bool { return true }

func (l *ListerWatcher) List(opts metav1.ListOptions) (runtime.Object, error) {
	return l.ListWithContext(context.Background(), opts)
}

func (l *ListerWatcher) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return l.WatchWithContext(context.Background(), opts)
}

func (l *ListerWatcher) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	s := l.s
	if err := s.fire(ctx, KindList, opts); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.faultLocked(KindList); err != nil {
		return nil, err
	}
	in := s.pickLocked()
	items, rv, cont, err := s.listLocked(in, opts, func(*corev1.Pod) bool { return true })
	if err != nil {
		return nil, err
	}
	if opts.Limit == 1 && opts.ResourceVersion == "" && opts.Continue == "" {
		// A consistent read brings the watch cache up to date; its next
		// bookmark (kube-apiserver sends one before each watch's timeout)
		// carries the read's revision. Sent now rather than a second later.
		s.bookmarkLocked()
	}
	return podList(items, rv, cont), nil
}

func (l *ListerWatcher) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	s := l.s
	if err := s.fire(ctx, KindWatch, opts); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.faultLocked(KindWatch); err != nil {
		return nil, err
	}
	w, err := s.watchLocked(ctx, s.pickLocked(), opts)
	if err != nil {
		return nil, err
	}
	if s.wire {
		return s.wireWatchLocked(w), nil
	}
	go w.run()
	return w, nil
}

// ListMetadata lists one page of the Pods' metadata.
func (l *ListerWatcher) ListMetadata(ctx context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	s := l.s
	if err := s.fire(ctx, KindMeta, opts); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listMetadataLocked(opts)
}

func (s *Server) listMetadataLocked(opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	if err := s.faultLocked(KindMeta); err != nil {
		return nil, err
	}
	if opts.ResourceVersion == "0" {
		return nil, apierrors.NewBadRequest("the simulation refuses metadata lists at resourceVersion 0 (a lagging cache may serve them)")
	}
	items, rv, cont, err := s.listLocked(s.pickLocked(), opts, func(*corev1.Pod) bool { return true })
	if err != nil {
		return nil, err
	}
	if opts.Continue == "" {
		s.countBehindFetchLocked(rv)
	}
	out := &metav1.PartialObjectMetadataList{
		TypeMeta: metav1.TypeMeta{APIVersion: metav1.SchemeGroupVersion.String(), Kind: "PartialObjectMetadataList"},
		ListMeta: metav1.ListMeta{ResourceVersion: strconv.FormatInt(rv, 10), Continue: cont},
	}
	for _, p := range items {
		out.Items = append(out.Items, metav1.PartialObjectMetadata{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: *p.ObjectMeta.DeepCopy(),
		})
	}
	return out, nil
}

// ListObjects lists the Pods of namespace named name (either may be empty:
// all).
func (l *ListerWatcher) ListObjects(ctx context.Context, namespace, name string, opts metav1.ListOptions) (runtime.Object, error) {
	s := l.s
	if err := s.fire(ctx, KindFetch, opts); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listObjectsLocked(namespace, name, opts)
}

func (s *Server) listObjectsLocked(namespace, name string, opts metav1.ListOptions) (*corev1.PodList, error) {
	if err := s.faultLocked(KindFetch); err != nil {
		return nil, err
	}
	items, rv, cont, err := s.listLocked(s.pickLocked(), opts, func(p *corev1.Pod) bool {
		return (namespace == "" || p.Namespace == namespace) && (name == "" || p.Name == name)
	})
	if err != nil {
		return nil, err
	}
	for _, p := range items {
		n, _ := strconv.ParseInt(p.ResourceVersion, 10, 64)
		key := p.Namespace + "/" + p.Name
		s.fetched[key] = max(s.fetched[key], n)
	}
	return podList(items, rv, cont), nil
}

// countBehindFetchLocked counts a metadata list at revision rev that lacks
// an object an earlier fetch or watch brought, created after rev: a
// lagging list that a recovery must not read as the object's deletion.
func (s *Server) countBehindFetchLocked(rev int64) {
	at := map[string]bool{}
	for _, p := range s.stateAtLocked(rev) {
		at[p.Namespace+"/"+p.Name] = true
	}
	for key, n := range s.fetched {
		if n > rev && !at[key] {
			s.counts["meta-behind-fetch"]++
			return
		}
	}
}
