package simulation

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/persist"
	"github.com/boltinformer/boltinformer/recovery"
)

// Env is what a run needs from its caller.
type Env struct {
	// Dir is a directory of the run's own, for its cache file.
	Dir string
	// Verify checks a closed cache file (inspect verify); nil skips it.
	Verify func(path string) error
	// Timeout bounds each wait for the informer to sync or settle.
	Timeout time.Duration
	// Logf, if set, receives each step as it runs.
	Logf func(format string, args ...any)
	// Stats, if set, receives the run's counts at its end: the server's
	// requests, triggers and lagging reads, and the driver's crashes.
	Stats func(map[string]int)
}

// Failure is a run's first failed invariant, with the step it followed.
type Failure struct {
	Step  int // index in the schedule; -1: after the last step
	What  string
	Trace []string // the steps run, and what they did
}

func (f *Failure) Error() string {
	return fmt.Sprintf("after step %d: %s", f.Step, f.What)
}

// Category is the failure's first line up to the first detail, used by
// shrinking to keep to the same defect.
func (f *Failure) Category() string {
	s := f.What
	for _, cut := range []string{":", "("} {
		if i := strings.Index(s, cut); i > 0 {
			s = s[:i]
		}
	}
	return s
}

const collection = "pods"

// driver runs one schedule against a Server and the real informer and file.
type driver struct {
	// read is the store read in flight (readStore); nil if none.
	read *storeRead

	cfg  Config
	env  Env
	srv  *Server
	lw   *ListerWatcher
	path string
	rng  *rand.Rand // acknowledgement choices only; the schedule is fixed
	gen  int

	db     *persist.DB
	inf    *bcache.Informer
	cancel context.CancelFunc
	done   chan struct{}
	cp     *bcache.Checkpoint
	cpRec  *recorder
	plain  []*recorder
	regs   map[*recorder]interface{ HasSynced() bool }
	errs   chan error
	trace  []string
	// damaged: the file was damaged on purpose, and verify would find it;
	// settled: a start has settled since (and set the damage aside), so the
	// next clean stop, which commits that, verifies the file again. A crash
	// may drop the set-aside, so it does not.
	damaged, settled bool

	// weak is the state of the weak server's and mid-operation faults'
	// driving (midop_test.go).
	weak weakState
	// model is the simulation's own record of the checkpoint (oracle_test.go);
	// removeObs removes its commit observer from the open file.
	model     *ckModel
	removeObs func()
	closeErr  error // the last Close's
	// diff is the differential mode's (differential_test.go); nil if off.
	diff *differential
	// stale are what a user kept of the informer a restart in the process
	// replaced (stale_test.go); nil if none.
	stale *staleHandles
	// handlerErrs are the watch error handler's violations (errorSeen).
	handlerErrs chan string
	// setAside is set once the running informer reported stored state set
	// aside (errorSeen): its relist may then add stored keys again.
	setAside atomic.Bool
}

// Run runs sched and returns its first failure, or nil.
func Run(sched Schedule, env Env) (fail *Failure) {
	d := &driver{
		cfg:  sched.Config,
		env:  env,
		srv:  newServerFor(sched),
		path: filepath.Join(env.Dir, "cache.db"),
		rng:  rand.New(rand.NewSource(sched.Seed)),
		regs: map[*recorder]interface{ HasSynced() bool }{},

		handlerErrs: make(chan string, 16),
	}
	d.lw = d.srv.ListerWatcher()
	d.srv.onCrash = func(what string) { d.crashImage(what) }
	if sched.Config.RealBackoff {
		d.weak.clock = newVirtualClock()
	}
	d.model = newCkModel(d.srv)
	d.diffInit()
	d.logf("config %s", sched.Config)
	defer func() {
		if p := recover(); p != nil {
			// A panic on the run's goroutine may have left a lock of the
			// library held: stopping would hang. The panic ends the run.
			panic(p)
		}
		d.shutdown()
		d.srv.Close()
		if d.diff != nil {
			d.diff.mirror.Close()
		}
		if fail != nil {
			fail.Trace = d.trace
		}
		if env.Stats != nil {
			counts := d.srv.Counts()
			for k, v := range d.weak.counts {
				counts[k] += v
			}
			env.Stats(counts)
		}
	}()
	for i, st := range sched.Steps {
		d.logf("%3d %s", i, st)
		if err := d.step(st); err != nil {
			return &Failure{Step: i, What: err.Error()}
		}
		if err := d.settle(st); err != nil {
			return &Failure{Step: i, What: err.Error()}
		}
	}
	// The end: the informer runs once more, settles, and stops cleanly.
	if err := d.step(Step{Op: OpStart}); err != nil {
		return &Failure{Step: -1, What: err.Error()}
	}
	if err := d.settle(Step{Op: OpStart}); err != nil {
		return &Failure{Step: -1, What: err.Error()}
	}
	if err := d.step(Step{Op: OpStop}); err != nil {
		return &Failure{Step: -1, What: err.Error()}
	}
	return nil
}

func (d *driver) logf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	d.trace = append(d.trace, line)
	if d.env.Logf != nil {
		d.env.Logf("%s", line)
	}
}

func (d *driver) up() bool { return d.inf != nil }

func (d *driver) step(st Step) error {
	d.gen++
	if d.write(st) {
		return nil
	}
	switch st.Op {
	case OpEndWatches:
		d.srv.EndWatches()
	case OpInject:
		d.srv.Inject(st.Kind, st.Code, st.N)
	case OpArm:
		switch {
		case st.Kind == KindCommit:
			d.armCommit(st.N)
		case st.Do == ActHold:
			d.srv.Arm(st.Kind, st.N, st.Do, st.Key, st.Code, d.gen)
			d.srv.OpenHolds()
		default:
			d.srv.Arm(st.Kind, st.N, st.Do, st.Key, st.Code, d.gen)
		}
	case OpRestartOne:
		d.srv.RestartOne(st.N)
	case OpQuiet:
		d.srv.SetQuiet(true)
		d.weak.quietLeft = st.N
	case OpStart:
		if !d.up() {
			return d.start(!st.NoWait)
		}
	case OpStop:
		if d.up() {
			return d.stop(false)
		}
	case OpCrash:
		if d.up() {
			return d.stop(true)
		}
	case OpFlush:
		if d.up() {
			ctx, cancel := context.WithTimeout(context.Background(), d.env.Timeout)
			defer cancel()
			mark := d.model.mark()
			if err := d.db.Flush(ctx); err != nil {
				return fmt.Errorf("flush: %w", err)
			}
			d.model.flushed(mark)
		}
	case OpAck:
		if d.up() && d.cp != nil {
			return d.ack(st.P)
		}
	case OpStaleAck:
		if d.up() && d.cp != nil {
			if p := d.cpRec.older(st.Key); p != nil {
				d.logf("    stale ack %s@%s", st.Key, p.ResourceVersion)
				if err := d.cp.Ack(p); err != nil {
					return fmt.Errorf("stale ack: %w", err)
				}
				d.model.ack(p)
			}
		}
	case OpClear:
		if d.up() && d.cp != nil {
			if err := d.cp.Clear(); err != nil {
				return fmt.Errorf("clear: %w", err)
			}
			d.model.clear()
		}
	case OpLateHandler:
		if d.up() {
			r := newRecorder(fmt.Sprintf("late%d", d.gen), d.srv)
			if err := d.diffHandler(r.name, false); err != nil {
				return err
			}
			reg, err := d.inf.AddEventHandler(d.handler(r))
			if err != nil {
				return fmt.Errorf("late handler: %w", err)
			}
			d.diffJoined(r.name)
			d.plain = append(d.plain, r)
			d.regs[r] = reg
		}
	case OpDamageJ:
		if !d.up() {
			what, err := damageJournal(d.path)
			if err != nil {
				return err
			}
			if what != "" {
				d.logf("    %s", what)
				d.damaged, d.settled = true, false
				// The set-aside at the next open turns acknowledgements of
				// keys only the journal held into tombstones (persist's
				// checkpoint rules): the handler may be given them again.
				d.model.damaged(false)
			}
		}
	case OpDamageR:
		if !d.up() {
			what, err := damageRecord(d.path, st.N)
			if err != nil {
				return err
			}
			if what != "" {
				d.logf("    %s", what)
				d.damaged, d.settled = true, false
				// The walk sets the record aside: its acknowledgement
				// becomes a tombstone.
				d.model.damaged(false)
			}
		}
	case OpDamageBucket, OpDamageHeader, OpDamageIndex, OpDamageMeta:
		if !d.up() {
			return d.damageKind(st)
		}
	case OpHandover:
		if d.up() {
			return d.handover(st.N%2 == 1)
		}
	case OpStale:
		return d.staleCalls()
	default:
		return fmt.Errorf("unknown step %q", st.Op)
	}
	return nil
}

// write makes st's change to the server, and the mirror's, if st is a
// write (one the mirror repeats); false if it is not.
func (d *driver) write(st Step) bool {
	switch st.Op {
	case OpCreate, OpUpdate, OpDelete, OpRecreate, OpCreateRich, OpOtherWrites, OpBookmark, OpRestart, OpCompact:
	default:
		return false
	}
	defer d.lockWrites()()
	d.mirrorStep(st)
	switch st.Op {
	case OpCreate:
		d.srv.Create(st.Key, d.gen)
	case OpUpdate:
		d.srv.Update(st.Key, d.gen)
	case OpDelete:
		d.srv.Delete(st.Key)
	case OpRecreate:
		if d.srv.Delete(st.Key) {
			d.srv.Create(st.Key, d.gen)
		}
	case OpCreateRich:
		createRich(d.srv, st.Key, d.gen, st.N, d.cfg)
	case OpOtherWrites:
		d.srv.OtherWrites(st.N)
	case OpBookmark:
		d.srv.Bookmark()
	case OpRestart:
		d.srv.Restart(st.N)
	case OpCompact:
		d.srv.Compact()
	}
	return true
}

// start opens the file and starts an informer on it with the run's
// options (startInformer); wait: it waits until the informer is synced.
func (d *driver) start(wait bool) error {
	_, statErr := os.Stat(d.path)
	warm := statErr == nil
	if !warm {
		d.model.cold()
	}
	db, err := persist.Open(d.path, persist.Options{
		Scheme:        scheme.Scheme,
		NoSync:        true,
		BatchInterval: time.Hour, // commits at BatchLimit, Flush and Close: the crash points are the schedule's
		BatchLimit:    d.cfg.BatchLimit,
		LockTimeout:   time.Second,
	})
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	d.db = db
	d.liveFile(db)
	d.removeObs = db.AddCommitObserver(func(s persist.CommitStats) { d.model.observeCommit(s.Err == nil) })
	return d.startInformer(warm, wait)
}

// startInformer starts an informer on the open file d.db with the run's
// options. With wait it waits until the informer is synced; then, unless it
// may be synced at open, the store must equal the server: nothing changed
// since the start. An informer that cannot be made closes the file.
func (d *driver) startInformer(warm, wait bool) error {
	db := d.db
	fromRev, fromMoved := d.srv.Revision(), d.srv.Moved()
	d.model.starting()
	opts := bcache.InformerOptions{
		Persistence:    bcache.Persistence{DB: db, Collection: collection, CacheObjects: d.cfg.CacheObjects, CacheBytes: d.cfg.CacheBytes},
		Indexers:       simIndexers(),
		WarmListBelow:  d.cfg.WarmListBelow,
		SyncedAtOpen:   d.cfg.SyncedAtOpen,
		PageSize:       d.cfg.PageSize,
		InitialBackoff: time.Millisecond,
		MaxBackoff:     10 * time.Millisecond,
	}
	if d.weak.clock != nil {
		// client-go's backoff, on virtual time.
		opts.Clock, opts.InitialBackoff, opts.MaxBackoff = d.weak.clock, 0, 0
	}
	lw, lister := d.listerWatcher()
	if d.cfg.Recovery {
		opts.Recovery = &recovery.Options{Lister: lister, Workers: d.cfg.Workers,
			Tuning: recovery.Tuning{FullListFraction: d.cfg.FullListAt}}
	}
	// A panic here (damage the constructor does not expect) may leave a
	// lock of the file held: it ends the run, in its own process.
	inf, err := bcache.NewSharedIndexInformerWithOptions(lw, &corev1.Pod{}, opts)
	if err != nil {
		d.removeObs()
		db.Close()
		d.db = nil
		return fmt.Errorf("informer: %w", err)
	}
	d.inf = inf
	d.errs = make(chan error, 1000)
	d.setAside.Store(false)
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cacheReflector, err error) {
		d.errorSeen(err)
		select {
		case d.errs <- err:
		default:
		}
	})
	d.plain, d.cpRec, d.cp = nil, nil, nil
	d.regs = map[*recorder]interface{ HasSynced() bool }{}
	// A start that does not wait meets the next steps' writes before its first
	// settled point, at another moment of its list than client-go's.
	if err := d.diffStart(!warm && wait); err != nil {
		return err
	}
	r := newRecorder("plain", d.srv)
	reg, err := inf.AddEventHandler(d.handler(r))
	if err != nil {
		return fmt.Errorf("handler: %w", err)
	}
	d.plain = append(d.plain, r)
	d.regs[r] = reg
	if d.cfg.Checkpoint && !d.cfg.CheckpointLate {
		if err := d.addCheckpoint(); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel, d.done = cancel, make(chan struct{})
	go func() { defer close(d.done); inf.RunWithContext(ctx) }()
	d.runClock()
	if d.cfg.Checkpoint && d.cfg.CheckpointLate {
		if err := d.addCheckpoint(); err != nil {
			return err
		}
	}
	if !wait {
		d.logf("    started (warm=%v), not waiting for it to sync", warm)
		return nil
	}
	if err := d.wait(func() bool { return inf.HasSynced() }); err != nil {
		if errors.Is(err, errInterrupted) {
			return d.crashRestart()
		}
		return fmt.Errorf("the informer did not sync within %v (warm=%v): %s", d.env.Timeout, warm, d.errorsSeen())
	}
	d.model.synced()
	if !d.cfg.SyncedAtOpen {
		got, err := d.readStoreWaiting(inf)
		if err != nil {
			return err
		}
		if diff := d.syncedDiff(got, fromRev, fromMoved); diff != "" {
			return fmt.Errorf("synced with a store that is not the server's (warm=%v): %s", warm, diff)
		}
	}
	d.logf("    synced (warm=%v) %v %s", warm, d.srv.Counts(), d.errorsSeen())
	return nil
}

// wait polls cond until it holds or the timeout passes. While it waits,
// lagging watch caches move on, the server sends bookmarks, and every 100 ms
// the short (catch-up) watches time out, as they would on their own after 3
// seconds. It ends early with errInterrupted when a crash image is pending
// or, in a check, a trigger changed the objects (midop_test.go).
func (d *driver) wait(cond func() bool) error {
	// A held request would keep the informer from settling.
	d.srv.CloseHolds()
	deadline := time.Now().Add(d.env.Timeout)
	lastEnd := time.Now()
	interval := time.Millisecond
	for {
		d.srv.Tick()
		d.srv.Bookmark()
		d.mirrorBookmark()
		if cond() {
			return nil
		}
		if err := d.interruption(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		d.endShortWatches(&lastEnd)
		time.Sleep(interval)
		interval = min(2*interval, 20*time.Millisecond)
	}
}

// endShortWatches ends the short watches every 100 ms of a wait, as their
// own timeouts would end them after a few seconds.
func (d *driver) endShortWatches(lastEnd *time.Time) {
	if time.Since(*lastEnd) > 100*time.Millisecond {
		d.srv.EndShortWatches(5)
		*lastEnd = time.Now()
	}
}

// storeRead is a read of an informer's store in flight. A lister's List
// waits while the store owes a list, and the list may need time to pass:
// a recovery waits for a bookmark, a relist for a short watch's end.
type storeRead struct {
	inf  *bcache.Informer
	done chan struct{}
	got  map[string]Version
	err  error
}

// readStore reads inf's store, or goes on with the read in flight, for at
// most patience; ok is false if the read still waits then. The server's
// time does not stop while a read waits: the caller's wait moves it.
func (d *driver) readStore(inf *bcache.Informer, patience time.Duration) (got map[string]Version, ok bool, err error) {
	if d.read == nil || d.read.inf != inf {
		r := &storeRead{inf: inf, done: make(chan struct{})}
		go func() {
			defer close(r.done)
			r.got, r.err = storeState(inf)
		}()
		d.read = r
	}
	r := d.read
	t := time.NewTimer(patience)
	defer t.Stop()
	select {
	case <-r.done:
		d.read = nil
		return r.got, true, r.err
	case <-t.C:
		return nil, false, nil
	}
}

// readStoreWaiting reads inf's store, moving the server's time while the
// read waits (as wait does), for at most the timeout.
func (d *driver) readStoreWaiting(inf *bcache.Informer) (map[string]Version, error) {
	deadline := time.Now().Add(d.env.Timeout)
	lastEnd := time.Now()
	for {
		if got, ok, err := d.readStore(inf, 10*time.Millisecond); ok {
			return got, err
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the store's List waited %v for a list the store owes, which never came", d.env.Timeout)
		}
		d.srv.Tick()
		d.srv.Bookmark()
		d.mirrorBookmark()
		d.endShortWatches(&lastEnd)
	}
}

func (d *driver) addCheckpoint() error {
	cp, err := d.inf.Checkpoint("sim")
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	r := newCheckpointRecorder("checkpoint", d.srv, d.model.start(d.srv.Pods()))
	r.setAside = d.setAside.Load
	if d.cfg.AckInHandler {
		rng := rand.New(rand.NewSource(d.rng.Int63()))
		r.pick = func() bool { return rng.Intn(10) < 7 } // under r.mu
		r.inHandler = d.ackInHandler(cp, r)
	}
	reg, err := cp.AddEventHandler(r)
	if err != nil {
		return fmt.Errorf("checkpoint handler: %w", err)
	}
	d.cp, d.cpRec = cp, r
	d.regs[r] = reg
	return nil
}

func (d *driver) errorsSeen() string {
	var out []string
	for {
		select {
		case err := <-d.errs:
			if len(out) < 5 {
				out = append(out, err.Error())
			}
		default:
			return "watch errors: [" + strings.Join(out, "; ") + "]"
		}
	}
}

// stop stops the informer and closes the file; crash keeps only what the
// file had committed when it was called, as a kill would. A pending crash
// image makes any stop a crash that kept the image: the process died when
// it was taken.
func (d *driver) stop(crash bool) error {
	var committed bytes.Buffer
	if img, what := d.takeImage(); img != nil {
		// The process died mid-operation, when the image was taken.
		d.logf("    crashed mid-operation (%s)", what)
		d.count("crash-midop")
		crash = true
		committed.Write(img)
	} else if crash {
		// The model must not learn of the commit Close makes after the
		// snapshot, which the crash loses.
		d.removeObs()
		d.removeObs = func() {}
		if _, err := d.db.Snapshot(&committed); err != nil {
			return fmt.Errorf("snapshot: %w", err)
		}
	}
	// Violations of the deliveries up to the stop still count.
	if err := d.violations(); err != nil {
		return err
	}
	d.shutdown()
	if crash {
		d.stale = nil // the process died, and what it held
	}
	d.model.closed(!crash && d.closeErr == nil)
	if !crash && d.closeErr != nil {
		return fmt.Errorf("a clean stop's Close failed: %w", d.closeErr)
	}
	if crash {
		if err := os.WriteFile(d.path, committed.Bytes(), 0o600); err != nil {
			return err
		}
	}
	// The file's checkpoint cross-checks the model, which never reads it.
	acks, tombstones, err := readCheckpoint(d.path, "sim", false)
	if err != nil {
		return err
	}
	if s := d.model.crossCheck(acks, tombstones, d.srv.Pods(), !crash && d.closeErr == nil); s != "" {
		return fmt.Errorf("the file's checkpoint is none the model allows after %s: %s", map[bool]string{true: "a crash", false: "a clean stop"}[crash], s)
	}
	if d.damaged && d.settled && !crash {
		d.damaged = false
	}
	if d.env.Verify != nil && !d.damaged {
		if err := d.env.Verify(d.path); err != nil {
			return fmt.Errorf("inspect verify after %s: %w", map[bool]string{true: "a crash", false: "a clean stop"}[crash], err)
		}
	}
	return nil
}

// shutdown stops whatever runs and closes the file.
func (d *driver) shutdown() {
	if d.inf == nil {
		return
	}
	d.deadFile()
	d.cancel()
	d.srv.CloseHolds() // after cancel: a held request sees its context end
	<-d.done
	d.stopClock()
	d.diffStop()
	if d.cp != nil {
		d.cp.Close()
	}
	d.closeErr = d.db.Close()
	if d.closeErr != nil {
		d.logf("    close: %v", d.closeErr)
	}
	d.weak.snapshots.Wait()
	d.removeObs()
	d.inf, d.db, d.cp = nil, nil, nil
}

func (d *driver) ack(p float64) error {
	var acked []string
	for _, obj := range d.cpRec.takeToAck(func() bool { return d.rng.Float64() < p }) {
		if err := d.cp.Ack(obj); err != nil {
			return fmt.Errorf("ack: %w", err)
		}
		d.model.ack(obj)
		acked = append(acked, ackString(obj))
	}
	if len(acked) > 0 {
		d.logf("    acked %s", strings.Join(acked, " "))
	}
	return nil
}

func (d *driver) violations() error {
	var all []string
	for _, r := range d.recorders() {
		all = append(all, r.takeViolations()...)
	}
	for len(d.handlerErrs) > 0 {
		all = append(all, <-d.handlerErrs)
	}
	if len(all) > 0 {
		d.weak.violated = true
		return errors.New(strings.Join(all, "\n"))
	}
	return nil
}

func (d *driver) recorders() []*recorder {
	rs := append([]*recorder(nil), d.plain...)
	if d.cpRec != nil {
		rs = append(rs, d.cpRec)
	}
	return rs
}
