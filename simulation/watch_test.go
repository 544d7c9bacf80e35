package simulation

import (
	"context"
	"net/http"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// simWatch is one watch request's stream. The server queues events under
// its mu (so a watch sees every change after its start, in revision order,
// with no gap); one goroutine, run, hands them to the client and ends when
// the server ends the stream and it is drained, when the client calls Stop,
// or when the request's context is cancelled. done is closed when it has
// exited.
type simWatch struct {
	s         *Server
	inst      *instance // the apiserver serving it
	ctx       context.Context
	bookmarks bool
	timeout   int64 // the request's timeoutSeconds; 0: none

	// Guarded by s.mu.
	queue []watch.Event
	pos   int64 // revision of the latest event queued
	ended bool

	notify   chan struct{} // capacity 1: something was queued or ended
	out      chan watch.Event
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
	// pumped, if not nil, is closed once the goroutine that encodes the
	// watch's events as protobuf (wirelister_test.go) has exited.
	pumped chan struct{}
}

var _ watch.Interface = (*simWatch)(nil)

func newSimWatch(s *Server, in *instance, ctx context.Context, bookmarks bool, pos int64) *simWatch {
	return &simWatch{
		s: s, inst: in, ctx: ctx, bookmarks: bookmarks, pos: pos,
		notify: make(chan struct{}, 1),
		out:    make(chan watch.Event),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
}

func (w *simWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *simWatch) Stop() { w.stopOnce.Do(func() { close(w.stop) }) }

func (w *simWatch) poke() {
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

// sendLocked queues an event at revision rev. Called with s.mu held.
func (w *simWatch) sendLocked(e watch.Event, rev int64) {
	if w.ended {
		return
	}
	if p, ok := e.Object.(*corev1.Pod); ok && e.Type != watch.Bookmark {
		key := p.Namespace + "/" + p.Name
		w.s.fetched[key] = max(w.s.fetched[key], rev)
	}
	w.queue = append(w.queue, e)
	w.pos = rev
	w.poke()
}

// bookmarkLocked queues a bookmark at rev if the client asked for them and
// rev is past the watch's position, as the watch cache sends them.
func (w *simWatch) bookmarkLocked(rev int64) {
	if !w.bookmarks || rev <= w.pos {
		return
	}
	w.sendLocked(watch.Event{Type: watch.Bookmark, Object: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		ResourceVersion: strconv.FormatInt(rev, 10),
	}}}, rev)
}

// endLocked ends the stream once what is queued has been delivered, and
// detaches the watch from the server.
func (w *simWatch) endLocked(final *watch.Event) {
	if w.ended {
		return
	}
	if final != nil {
		w.queue = append(w.queue, *final)
	}
	w.ended = true
	delete(w.s.watches, w)
	w.poke()
}

func (w *simWatch) run() {
	defer close(w.done)
	defer close(w.out)
	defer func() {
		w.s.mu.Lock()
		delete(w.s.watches, w)
		w.s.mu.Unlock()
	}()
	for {
		w.s.mu.Lock()
		if len(w.queue) > 0 {
			e := w.queue[0]
			w.queue = w.queue[1:]
			w.s.mu.Unlock()
			select {
			case w.out <- e:
				continue
			case <-w.stop:
				return
			case <-w.ctx.Done():
				return
			}
		}
		ended := w.ended
		w.s.mu.Unlock()
		if ended {
			return
		}
		select {
		case <-w.notify:
		case <-w.stop:
			return
		case <-w.ctx.Done():
			return
		}
	}
}

// expiredStatus is what kube-apiserver says of a revision older than its
// watch cache.
func expiredStatus(rv string) *metav1.Status {
	return &metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusGone,
		Reason:  metav1.StatusReasonExpired,
		Message: "too old resource version: " + rv,
	}
}

// watchLocked opens a watch from opts.ResourceVersion on the apiserver in.
// Called with s.mu held.
func (s *Server) watchLocked(ctx context.Context, in *instance, opts metav1.ListOptions) (*simWatch, error) {
	from := in.pos
	initial := false
	switch opts.ResourceVersion {
	case "", "0":
		initial = true // start at the cache's position, with its objects as adds
	default:
		rv, err := strconv.ParseInt(opts.ResourceVersion, 10, 64)
		if err != nil {
			return nil, apierrors.NewBadRequest("invalid resourceVersion " + opts.ResourceVersion)
		}
		if rv < in.windowStart {
			if !s.expireInStream {
				return nil, apierrors.NewResourceExpired("too old resource version: " + opts.ResourceVersion)
			}
			w := newSimWatch(s, in, ctx, false, rv)
			s.counts["watch-expired"]++
			w.endLocked(&watch.Event{Type: watch.Error, Object: expiredStatus(opts.ResourceVersion)})
			return w, nil
		}
		// A watch from a revision the cache has not reached waits for it:
		// the cache sends only changes after rv.
		from = rv
		if rv > in.pos {
			s.counts["watch-ahead"]++
		}
	}
	w := newSimWatch(s, in, ctx, opts.AllowWatchBookmarks, from)
	if opts.TimeoutSeconds != nil {
		w.timeout = *opts.TimeoutSeconds
	}
	if initial {
		if in.pos < s.latestChangeLocked() {
			s.counts["lagged"]++
		}
		for _, p := range s.stateAtLocked(in.pos) {
			w.queue = append(w.queue, watch.Event{Type: watch.Added, Object: p.DeepCopy()})
		}
	} else {
		for _, c := range s.history {
			if c.rev > from && c.rev <= in.pos {
				w.queue = append(w.queue, watch.Event{Type: c.typ, Object: c.obj.DeepCopy()})
				w.pos = c.rev
			}
		}
	}
	s.watches[w] = struct{}{}
	w.poke()
	return w, nil
}
