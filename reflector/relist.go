package reflector

import (
	"context"
	"errors"
	"reflect"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
)

// Relister makes the lists after a reflector's first in place of full
// lists. Package recovery's recovers only what changed. It is the
// reflector's one hook beyond client-go's design.
type Relister interface {
	// Relist is called on the reflector's goroutine whenever a list is due
	// after the reflector has recorded a resourceVersion. A cold start's
	// lists have none to recover from, so they never come here. It returns
	// nil if ctx ended, or ErrFullList to have the reflector list in full.
	// Otherwise it returns the relist that goes on while the watch runs.
	Relist(ctx context.Context, l *Relist) (*Relisted, error)
}

// Relisted is a Relister's list that goes on while the watch runs. Nil
// fields are none.
type Relisted struct {
	// Ctx is the context the watches run under. The Relister cancels it to
	// end the watch, and ListAndWatch ends with it.
	Ctx context.Context
	// Store takes the watch's events in place of the reflector's Store.
	Store Store
	// Writes are run by the watch loop on its goroutine, between the events
	// it reads. A failed write is reported as a failed event is.
	Writes <-chan func() error
	// WatchStarted is called on the reflector's goroutine for every watch
	// the server accepted.
	WatchStarted func()
	// Finish is called as ListAndWatch returns, on its goroutine. It
	// returns why the relist failed, which ListAndWatch returns.
	Finish func() error
}

// Relist is what a Relister may ask of the reflector during one relist.
// Its methods must be called on the reflector's goroutine, except Name,
// TypeDescription, ExpectedType, Clock, Check, Report and Backoff.
type Relist struct {
	r     *Reflector
	cause StartCause
}

// Cause is why the list is made.
func (l *Relist) Cause() StartCause { return l.cause }

// Name names the reflector in logs and errors.
func (l *Relist) Name() string { return l.r.name }

// TypeDescription describes the listed objects' type.
func (l *Relist) TypeDescription() string { return l.r.typeDescription }

// ExpectedType is Options.ExpectedType's type, nil for any.
func (l *Relist) ExpectedType() reflect.Type { return l.r.expectedType }

// Clock is Options.Clock.
func (l *Relist) Clock() clock.Clock { return l.r.clock }

// Check reports an object a watch event's check would reject.
func (l *Relist) Check(obj runtime.Object) error { return l.r.checkObject(obj) }

// Report hands err to Options.WatchErrorHandler.
func (l *Relist) Report(ctx context.Context, err error) { l.r.errorHandler(ctx, err) }

// Backoff waits one backoff interval; false if ctx ended first.
func (l *Relist) Backoff(ctx context.Context) bool { return l.r.sleep(ctx) }

// Observer is Options.Observer.
func (l *Relist) Observer() Observer { return l.r.observer }

// ResourceVersion is the resourceVersion the list is to be made at, as a
// full list would be. "" asks for a consistent read made now. A list made
// before this relist does not serve for it. A catch-up relists at "" to get
// past the reads it took (see CatchUp).
func (l *Relist) ResourceVersion() string { return l.r.relistResourceVersion() }

// Unavailable reports whether err says the server no longer serves the
// resourceVersion asked for. If so, ResourceVersion falls back to "".
func (l *Relist) Unavailable(err error) bool {
	if !isResourceVersionUnavailable(err) && !isInvalidResourceVersionError(err) {
		return false
	}
	l.r.markResourceVersionUnavailable(l.cause)
	return true
}

// PageSize is the Limit a full list at resourceVersion would ask for.
func (l *Relist) PageSize(resourceVersion string) int64 {
	l.r.mu.RLock()
	paginatedBefore := l.r.paginatedResult
	l.r.mu.RUnlock()
	return l.r.listPageSize(resourceVersion, paginatedBefore)
}

// LastSyncResourceVersion is the reflector's.
func (l *Relist) LastSyncResourceVersion() string { return l.r.LastSyncResourceVersion() }

// Listed records a list made during this relist, as a full list is
// recorded. The list was asked for at listedAt and served at
// resourceVersion. The watch starts there. listedAt "" says the list was a
// consistent read, at or past every read made before it. Such a list may
// end a catch-up, as a full list at "" does (see CatchUp).
func (l *Relist) Listed(listedAt, resourceVersion string, items, pages int) {
	l.listed(listedAt, resourceVersion, items, pages, false)
}

// ListedEarlier records, as Listed does, a consistent list (at "") served
// at resourceVersion. The list was made before this relist but after the
// reflector was created, and the Relister was handed it. It may predate a
// catch-up's reads, so it settles the catch-up only if no read has given a
// target yet (see CatchUp).
func (l *Relist) ListedEarlier(resourceVersion string, items, pages int) {
	l.listed("", resourceVersion, items, pages, true)
}

func (l *Relist) listed(listedAt, resourceVersion string, items, pages int, earlier bool) {
	r := l.r
	if r.catchingUp() {
		r.catchUpListed(listedAt, resourceVersion, earlier)
	}
	r.mu.Lock()
	r.lastSyncRVUnavailable = false
	r.lastSyncRV = resourceVersion
	r.nextListCause = CauseRelistError
	r.mu.Unlock()
	r.watchFailures = 0 // watches failing in a row since this list
	r.observer.Listed(l.cause, resourceVersion, items, pages)
}

// ListInFullUntilWatch makes the lists full lists until a watch opens.
func (l *Relist) ListInFullUntilWatch() { l.r.listInFull = true }

// listOrRelist makes the list ListAndWatch is due. The Relister makes it
// where one is set and the reflector has seen a resourceVersion. Otherwise,
// or where the Relister cannot make it, it is a full list. A cold start
// whose paged list failed part-way has seen none, though it lists at ""
// (see listFailed). Its store holds pages of no version to recover from.
// Only the full list's Store.Replace syncs the queue. It returns the
// context the watch must run under, and finish, which ListAndWatch calls on
// its way out.
func (r *Reflector) listOrRelist(ctx context.Context) (context.Context, func() error, error) {
	none := func() error { return nil }
	if r.relister == nil || r.LastSyncResourceVersion() == "" || r.listInFull {
		return ctx, none, r.list(ctx)
	}
	r.mu.RLock()
	cause := r.nextListCause
	r.mu.RUnlock()
	rl, err := r.relister.Relist(ctx, &Relist{r: r, cause: cause})
	switch {
	case errors.Is(err, ErrFullList):
		return ctx, none, r.list(ctx)
	case err != nil || rl == nil:
		return ctx, none, err
	}
	r.relisted = rl
	finish := func() error {
		r.relisted = nil
		if rl.Finish == nil {
			return nil
		}
		return rl.Finish()
	}
	if rl.Ctx != nil {
		ctx = rl.Ctx
	}
	return ctx, finish, nil
}
