package recovery

import (
	"context"

	"github.com/boltinformer/boltinformer/reflector"
)

// Hooks are what the store's owner (cache.Informer) adds to a user's
// Options. Nil fields are none.
type Hooks struct {
	// Listed may give a recovery a consistent metadata list of the
	// collection that the store's owner took with ListVersions.
	// cache.Informer takes one to prove a small warm collection caught up.
	// The recovery uses it only if it is at least as new as the last
	// resourceVersion handed to the store. It uses it only in place of a
	// list at that version, never of a consistent read asked for now.
	// Listed returns nil when there is none, and may wait, with ctx, for one
	// being taken. The list must be taken after the reflector was created.
	// A reflector catching up may take its resourceVersion as its target,
	// if no read gave one before (reflector.Relist.ListedEarlier).
	Listed func(ctx context.Context) *Listing
	// Started is called as each recovery begins, before its list. The
	// function it returns is called once that recovery has ended. It ends
	// with the store consistent, failed or stopped, or given way to a full
	// list.
	Started func() (ended func())
}

// config is an Options completed with its defaults and Tuning.
type config struct {
	Options
	// lister is a copy of Options.Lister, made at New, and Options.Lister
	// is nil. A recovery decides on its page size and first page before its
	// first request. So a later change to the Lister must not reach it.
	lister            Lister
	fullListFraction  float64
	firstPageFraction float64
	// maxFetchRequests is Tuning.MaxFetchRequests. 0 derives it from
	// Lister.QPS, and negative is no bound.
	maxFetchRequests int
	// noPageAhead turns that fast path off, to measure what it buys.
	noPageAhead bool
}

// newConfig completes cfg with its defaults and reads its Tuning.
func newConfig(cfg *Options) config {
	c := config{Options: *cfg,
		fullListFraction:  orDefault(cfg.Tuning.FullListFraction, fullListFraction),
		firstPageFraction: orDefault(cfg.Tuning.FirstPageFraction, firstPageFraction),
		maxFetchRequests:  cfg.Tuning.MaxFetchRequests,
		noPageAhead:       cfg.Tuning.NoPageAhead,
	}
	if cfg.Lister != nil { // New requires one; newConfig's tests may not
		c.lister = *cfg.Lister
	}
	c.Options.Lister = nil
	if c.Workers <= 0 {
		c.Workers = defaultWorkers
	}
	if c.OpaqueVersions {
		c.ListInFull = true
	}
	return c
}

// orDefault returns fraction if it is above zero, else def. A NaN is not
// above zero.
func orDefault(fraction, def float64) float64 {
	if fraction > 0 {
		return fraction
	}
	return def
}

// Relister makes a reflector's lists after the first as recoveries. It
// implements reflector.Relister, and is used by one reflector at a time.
type Relister struct {
	cfg     config
	store   Store
	listed  func(ctx context.Context) *Listing
	started func() (ended func())
	// l is the reflector's side of the relist under way. Relist sets it on
	// the reflector's goroutine before anything of the recovery starts.
	l *reflector.Relist
}

var _ reflector.Relister = (*Relister)(nil)

// New returns a Relister for store, or nil for a nil cfg. It panics if cfg
// does not Validate. Its caller, the informer's constructor, checks cfg
// first and returns the error.
func New(cfg *Options, store Store, hooks Hooks) *Relister {
	if cfg == nil {
		return nil
	}
	if err := cfg.Validate(); err != nil {
		panic("recovery.New: " + err.Error())
	}
	return &Relister{cfg: newConfig(cfg), store: store, listed: hooks.Listed, started: hooks.Started}
}

// Relist implements reflector.Relister. It makes a recovery, whose fetches
// go on while the watch runs.
func (r *Relister) Relist(ctx context.Context, l *reflector.Relist) (*reflector.Relisted, error) {
	r.l = l
	rec, err := r.recover(ctx)
	if err != nil || rec == nil {
		return nil, err
	}
	return &reflector.Relisted{
		Ctx:          rec.ctx,
		Store:        rec,
		Writes:       rec.writes,
		WatchStarted: rec.watchOpened,
		Finish:       rec.finish,
	}, nil
}
