package simulation

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"

	"github.com/boltinformer/boltinformer/persist"
	"github.com/boltinformer/boltinformer/recovery"
)

// The driver's side of what strikes mid-operation: crash images taken
// while the informer is busy, steps that do not wait for it to settle, and
// the settled points where the invariants are checked.
//
// A crash trigger (a request's, faults_test.go, or a group commit's) copies the
// committed file at that moment through persist's DB.Snapshot, a read
// transaction: the image is what a process killed right then leaves, a
// commit point and never half a transaction. The informer runs on until
// the driver next looks, which changes nothing a kill at the image would
// not: what it commits afterwards is thrown away with the file, and the
// checkpoint model is read back from the image. The driver then kills it
// and starts it again from the image.
//
// A step marked NoWait is followed by no wait: the next step comes while
// the informer still works on this one's changes. Its notifications are
// still checked as they arrive; the settled checks (invariants_test.go) run only
// after a step that waits. A trigger's write while the driver waits makes
// the wait's target stale, so the check starts again against the new
// state.

// weakState is the driver's state for the weak server and mid-operation
// faults.
type weakState struct {
	// clock is the informer's virtual clock when the run uses client-go's
	// backoff; nil: the real clock and millisecond backoffs. While the
	// informer runs, a goroutine moves it to its next deadline every
	// clockStep of real time; clockStop stops that goroutine and
	// clockDone is closed once it has.
	clock                *virtualClock
	clockStop, clockDone chan struct{}

	// mu guards db, image, what and commits: request and commit
	// goroutines take crash images.
	mu sync.Mutex
	// db is the open cache file while the informer runs; nil otherwise.
	db *persist.DB
	// image is a crash image not yet used, and what took it.
	image []byte
	what  string
	// commits: group commits still to come before each armed crash.
	commits []int
	// snapshots joins the goroutines commit observers start to take
	// images (an observer must not call back into the DB).
	snapshots sync.WaitGroup

	// interruptible: a wait ends early when a trigger changed the objects
	// (moved no longer equals waitMoved). interrupted: a wait did.
	// violated: violations were reported since the check began.
	interruptible, interrupted, violated bool
	waitMoved                            int

	quietLeft int            // steps left without bookmarks
	counts    map[string]int // the driver's own counts (Env.Stats)
}

// clockStep is the real time between two moves of the virtual clock: a
// backoff of up to 30 s costs this much.
const clockStep = 5 * time.Millisecond

// runClock starts moving the virtual clock, if the run has one. It runs
// by itself, not in the driver's waits, because the driver also blocks in
// the informer's reads, which may wait for a list that waits for a
// backoff.
func (d *driver) runClock() {
	m := &d.weak
	if m.clock == nil {
		return
	}
	m.clockStop, m.clockDone = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(m.clockDone)
		t := time.NewTicker(clockStep)
		defer t.Stop()
		for {
			select {
			case <-m.clockStop:
				return
			case <-t.C:
				m.clock.AdvanceToNext()
			}
		}
	}()
}

// stopClock stops what runClock started.
func (d *driver) stopClock() {
	m := &d.weak
	if m.clockStop == nil {
		return
	}
	close(m.clockStop)
	<-m.clockDone
	m.clockStop, m.clockDone = nil, nil
}

// errInterrupted ends a wait whose target changed: a crash image is
// pending, or (while interruptible) a trigger changed the objects.
var errInterrupted = errors.New("interrupted: the informer crashed or the server changed meanwhile")

func (d *driver) count(what string) {
	if d.weak.counts == nil {
		d.weak.counts = map[string]int{}
	}
	d.weak.counts[what]++
}

// listerWatcher returns what the informer lists and watches through, and
// the recovery's lister.
func (d *driver) listerWatcher() (cache.ListerWatcher, *recovery.Lister) {
	if d.cfg.Wire {
		wl := &WireListerWatcher{d.lw}
		return wl, wl.recoveryLister()
	}
	return d.lw, d.lw.recoveryLister()
}

// liveFile records db as the running informer's file, for crash images,
// and counts its commits for commit triggers.
func (d *driver) liveFile(db *persist.DB) {
	m := &d.weak
	m.mu.Lock()
	m.db = db
	m.mu.Unlock()
	db.AddCommitObserver(func(cs persist.CommitStats) {
		if cs.Err != nil {
			return
		}
		m.mu.Lock()
		due := false
		keep := m.commits[:0]
		for _, n := range m.commits {
			if n--; n <= 0 {
				due = true
				continue
			}
			keep = append(keep, n)
		}
		m.commits = keep
		m.mu.Unlock()
		if due {
			m.snapshots.Go(func() { d.crashImage("a group commit") })
		}
	})
}

// deadFile forgets the file of an informer being stopped: no crash image
// is taken from it any more, and one not yet used is dropped.
func (d *driver) deadFile() {
	m := &d.weak
	m.mu.Lock()
	m.db, m.image = nil, nil
	m.mu.Unlock()
}

// crashImage takes the crash image, unless one is pending or the informer
// is not running. what says what struck.
func (d *driver) crashImage(what string) {
	m := &d.weak
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.db == nil || m.image != nil {
		return
	}
	// The model learns of no commit from here on, before the snapshot: a
	// commit that ends after the snapshot began is not in the image, and
	// its observer may run before the snapshot ends. Freezing early only
	// leaves the model more prefixes to allow.
	d.model.freeze()
	var b bytes.Buffer
	if _, err := m.db.Snapshot(&b); err != nil {
		return // a closing file: the kill came too late to matter
	}
	m.image, m.what = b.Bytes(), what
}

// crashPending reports whether a crash image waits to be used.
func (d *driver) crashPending() bool {
	m := &d.weak
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.image != nil
}

// takeImage returns the pending crash image and what took it, if any.
func (d *driver) takeImage() ([]byte, string) {
	m := &d.weak
	m.mu.Lock()
	defer m.mu.Unlock()
	img, what := m.image, m.what
	m.image = nil
	return img, what
}

// armCommit arms a crash n group commits from now.
func (d *driver) armCommit(n int) {
	m := &d.weak
	m.mu.Lock()
	defer m.mu.Unlock()
	m.commits = append(m.commits, max(n, 1))
}

// crashRestart kills the informer, whose crash image is pending, and
// starts it again from the image.
func (d *driver) crashRestart() error {
	if err := d.stop(true); err != nil {
		return err
	}
	return d.start(true)
}

// interruption says whether a wait must end early, and notes that it did.
func (d *driver) interruption() error {
	m := &d.weak
	if d.crashPending() || (m.interruptible && d.srv.Moved() != m.waitMoved) {
		m.interrupted = true
		return errInterrupted
	}
	return nil
}

// settle follows each step: unless the step may leave the informer busy,
// it waits for the settled point and checks the invariants there (check),
// restarting an informer whose crash image is pending first, and checking
// again whenever a trigger changed the server during the check.
func (d *driver) settle(st Step) error {
	m := &d.weak
	if m.quietLeft > 0 {
		if m.quietLeft--; m.quietLeft == 0 {
			d.srv.SetQuiet(false)
		}
	}
	if st.NoWait {
		if err := d.violations(); err != nil {
			return err
		}
		if d.up() && d.srv.HoldsOpen() {
			d.waitHeld()
		}
		return nil
	}
	for {
		if d.up() && d.crashPending() {
			if err := d.crashRestart(); err != nil {
				return err
			}
			continue
		}
		m.interruptible, m.interrupted, m.violated = true, false, false
		moved := d.srv.Moved()
		m.waitMoved = moved
		err := d.check()
		m.interruptible = false
		switch {
		case err != nil && m.interrupted && !m.violated:
			continue // the target moved or the informer died: again
		case err != nil && !m.violated && d.up() && d.srv.Moved() != moved:
			// A trigger wrote while the settled checks read: they compared
			// the informers with a state the server had already left.
			continue
		case errors.Is(err, errStoreMoved) && !m.violated:
			continue
		case err == nil && d.up() && (d.srv.Moved() != moved || d.crashPending()):
			continue
		}
		return err
	}
}

// syncedDiff compares the store of an informer that just synced with the
// server. A trigger may have written since the start began at revision
// from (moved is the count of such writes then): any state the server held
// since then is one a read made at or after the start can have returned.
func (d *driver) syncedDiff(got map[string]Version, from int64, moved int) string {
	diff := diffViews(got, d.srv.Objects())
	if diff == "" || d.srv.Moved() == moved {
		return diff
	}
	for rev := from; rev <= d.srv.Revision(); rev++ {
		if diffViews(got, d.srv.ObjectsAt(rev)) == "" {
			return ""
		}
	}
	return diff + fmt.Sprintf(" (nor any state since revision %d)", from)
}

// waitHeld follows a step that does not wait while holds are open (a slow
// apiserver, faults_test.go): it waits until a request is held, or the informer
// and every registration are synced, and no handler has had anything new
// for three polls in a row; or until a crash image is pending. The next
// step then meets the informer halfway through its list, recovery or
// start, not before it began. It reads no store, since a read may wait for
// a list a hold keeps back. It never fails: at worst the next step comes
// sooner, after a quarter of the timeout.
func (d *driver) waitHeld() {
	deadline := time.Now().Add(d.env.Timeout / 4)
	interval := time.Millisecond
	quiet, last := 0, -1
	for d.up() && time.Now().Before(deadline) && !d.crashPending() {
		d.srv.Tick()
		d.srv.Bookmark()
		d.mirrorBookmark()
		events := d.delivered()
		if events == last && d.handlersIdle() && (d.srv.Holding() > 0 || d.allSynced()) {
			if quiet++; quiet >= 3 {
				return
			}
		} else {
			quiet = 0
		}
		last = events
		time.Sleep(interval)
		interval = min(2*interval, 20*time.Millisecond)
	}
}

// allSynced reports whether the informer and every registration are synced.
func (d *driver) allSynced() bool {
	if !d.inf.HasSynced() {
		return false
	}
	for _, reg := range d.regs {
		if !reg.HasSynced() {
			return false
		}
	}
	return true
}

// delivered counts the notifications every handler of ours has been given.
func (d *driver) delivered() int {
	n := 0
	for _, r := range d.recorders() {
		r.mu.Lock()
		n += r.events
		r.mu.Unlock()
	}
	return n
}

// handlersIdle reports whether no registration has notifications waiting.
func (d *driver) handlersIdle() bool {
	for _, reg := range d.regs {
		if p, ok := reg.(interface{ Pending() int64 }); ok && p.Pending() > 0 {
			return false
		}
	}
	return true
}
