package simulation

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	bcache "github.com/boltinformer/boltinformer/cache"
)

type cacheReflector = cache.Reflector

// check runs after every step. While the informer runs, it waits until the
// system is quiescent — the informer synced, its store equal to the server,
// every handler whose registration has synced holding the server's state —
// and fails if that does not happen within the timeout; the server does not
// change meanwhile, so each of these is final once reached. Bookmarks are
// sent while it waits, as the watch cache sends them. Every handler's
// violations (checked as notifications arrive) fail it, and so does a
// bounded cache above its bound.
func (d *driver) check() error {
	if err := d.violations(); err != nil {
		return err
	}
	if !d.up() {
		return nil
	}
	want := d.srv.Objects()
	var pending, rv string
	if err := d.wait(func() bool {
		// Read before the store is compared with the server: a change it
		// applies after that comparison then moves it (errStoreMoved).
		rv = d.inf.GetIndexer().LastStoreSyncResourceVersion()
		pending = d.pending(want)
		return pending == ""
	}); err != nil {
		if err := d.violations(); err != nil {
			return err
		}
		return fmt.Errorf("not settled within %v: %s; %s", d.env.Timeout, pending, d.errorsSeen())
	}
	if err := d.violations(); err != nil {
		return err
	}
	d.model.synced()
	if d.cpRec != nil {
		d.cpRec.settledMaybe(want)
	}
	d.settled = true
	if d.cfg.CacheObjects > 0 {
		if n := d.inf.Indexer().Collection().CacheStats().Objects; n > d.cfg.CacheObjects {
			return fmt.Errorf("bounded cache holds %d decoded objects, bound %d", n, d.cfg.CacheObjects)
		}
	}
	err := d.checkSettled()
	if now := d.inf.GetIndexer().LastStoreSyncResourceVersion(); now != rv {
		// The store applied a change it still had queued while the checks
		// read: a creation and deletion still in flight leave it equal to
		// the server until then.
		return fmt.Errorf("%w (the store moved from resourceVersion %q to %q during the checks: %v)", errStoreMoved, rv, now, err)
	}
	return err
}

// errStoreMoved ends a check during which the store applied a change: it
// is made again.
var errStoreMoved = errors.New("the store moved during the checks")

// pending says what is not settled yet; "" once everything is.
func (d *driver) pending(want map[string]Version) string {
	if !d.inf.HasSynced() {
		return "informer not synced"
	}
	if s := d.diffPending(); s != "" {
		return s
	}
	got, ok, err := d.readStore(d.inf, 20*time.Millisecond)
	if !ok {
		return "the store's List waits for a list the store owes"
	}
	if err != nil {
		return err.Error()
	}
	if diff := diffViews(got, want); diff != "" {
		return "store differs from the server: " + diff
	}
	for _, r := range d.recorders() {
		if reg := d.regs[r]; reg != nil && !reg.HasSynced() {
			return fmt.Sprintf("handler %s not synced", r.name)
		}
		if diff := r.diff(want); diff != "" {
			what := "handler"
			if r.checkpoint {
				what = "checkpoint handler"
			}
			return fmt.Sprintf("%s %s was not told: %s", what, r.name, diff)
		}
	}
	return ""
}

// storeBehind says whether a store equal to the server may still have
// changes to apply: its resourceVersion is below the server's latest
// change. An object created and deleted again since the store last moved
// leaves it equal to the server until it applies both, and its handlers'
// notifications of them come after. "" if it has applied them (or does not
// say: an unset or unreadable resourceVersion). Only client-go's store is
// held to it: ours may legitimately stay behind with nothing to apply,
// after a warm start's proof by versions dropped the replayed changes of
// objects created and gone again (cache/versionproof.go), or while a
// recovery waits for a bookmark (recovery/doc.go, step 4); check reads
// ours again instead if it moved during the checks.
func storeBehind(idx cache.Indexer, latest int64) string {
	rv, err := strconv.ParseInt(idx.LastStoreSyncResourceVersion(), 10, 64)
	if err != nil || rv >= latest {
		return ""
	}
	return fmt.Sprintf("store at resourceVersion %d, below the server's latest change %d", rv, latest)
}

// storeState reads the informer's store: key → UID and resourceVersion. A
// store read that panics (a read error, as documented) is an error.
func storeState(inf *bcache.Informer) (out map[string]Version, err error) {
	defer func() {
		if p := recover(); p != nil {
			repanicUndocumented(p)
			err = fmt.Errorf("store List panicked: %v", p)
		}
	}()
	out = map[string]Version{}
	for _, o := range inf.GetStore().List() {
		p, ok := o.(*corev1.Pod)
		if !ok {
			return nil, fmt.Errorf("store holds a %T", o)
		}
		out[p.Namespace+"/"+p.Name] = Version{UID: p.UID, RV: p.ResourceVersion}
	}
	return out, nil
}

// repanicUndocumented panics again with p unless it is the documented panic
// of a read that failed (an error value). A runtime error may have left a
// lock held: going on would hang the run, which should fail with the panic.
func repanicUndocumented(p any) {
	if _, ok := p.(runtime.Error); ok {
		panic(p)
	}
	if _, ok := p.(error); !ok {
		panic(p)
	}
}
