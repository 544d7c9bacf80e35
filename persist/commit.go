package persist

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"github.com/boltinformer/boltinformer/internal/format"
)

// This comment describes the write path in one place. It says where a
// change lives from Apply until it is in the trees, and which lock guards it
// in each place. It gives the one order in which the package's locks are
// taken. It follows the group commit that moves changes down, in the order
// it runs (DB.commit and what it calls, top to bottom). The journal's own
// mechanics (append, seal, fold) are in journal.go. The chunked write of a
// large list is in writeahead.go. The reads are in read.go, and they look
// through the states in the table's order.
//
// # Where a change lives
//
// A change passes through five states, top to bottom. The first four are a
// Collection's layers. A layer holds the latest change per key, with its
// index values (layer.go). The fifth state is the file's trees. Every field
// below belongs to the Collection. Every lock is the Collection's mu, or its
// DB's commitMu and applyMu. "On disk" is below collections/<name>/
// (internal/format).
//
//	state       field         written by               held to write     held to read  on disk
//	----------  ------------  -----------------------  ----------------  ------------  ---------------------
//	pending     pending       apply (Apply, ApplyList, mu and applyMu    mu (R)        nowhere (1)
//	                          ApplyPart, SetAside),    (R)
//	                          Checkpoint.write;
//	                          swapForCommit, reset     mu and commitMu
//	                          replace it               (the swap also
//	                                                   applyMu)
//	committing  committing    swapForCommit sets it;   mu and commitMu   mu (R), or    being written by the
//	                          finishCommit, reset                        commitMu (2)  commit's transaction (3)
//	                          clear it
//	journaled   journaled     finishCommit;            mu and commitMu   mu (R), or    journal/<gen>, the
//	                          loadJournal (4),                           commitMu (2)  newest generation,
//	                          dropJournalLayers                                        which commits append to
//	folding     folding       the same                 mu and commitMu   mu (R), or    journal/<gen>, the older
//	                                                                     commitMu (2)  one; rebuild/: the trees'
//	                                                                                   copies the fold writes
//	trees       (the file)    the commit's transaction commitMu (5)      a read        objects/, versions/ (with
//	                          (writeTrees, foldStep),                    transaction,  their copies in rebuild/),
//	                          writeAhead, index                          begun under   indexes/, meta/,
//	                          builds, reset                              mu (R) (6)    checkpoints/, tombstones/
//
// commitMu alone guards where the journal stands. That is the field
// journal, a journalState of its generations, the fold's progress and the
// trees' record bytes. Only the commit, writeAhead, loadJournal (4) and
// dropJournalLayers write it. Only they and the fold read it.
//
//  1. A crash loses it. The watch, resumed from the stored resourceVersion,
//     delivers it again.
//  2. Every writer of the committing and journal layers holds commitMu. So
//     the commit's transaction reads them without mu, and no reader holds
//     it up.
//  3. A large list may load into an empty collection. writeAhead's
//     transactions then write most of it into the trees first, without a
//     resourceVersion (writeahead.go). The layer's writtenAhead records how
//     far. commitMu alone guards it, since only the commit reads it.
//  4. At open, before the collection is shared.
//  5. Every bbolt write transaction after Open runs under commitMu. That is
//     the commit's, writeAhead's, AddIndexes', reset's and DB.Collection's.
//  6. A read that merges the file with the layers (Collection.view). Reads
//     of the file alone (CommittedResourceVersion, CheckpointAcks) take no
//     lock of ours.
//
// Invariants:
//   - A change leaves a state only once the next one holds it. finishCommit
//     drops a committing layer, or moves it below into the journal's, only
//     after the transaction that wrote it committed. A reader takes the
//     first state that has the key. So it always finds the key's newest
//     state.
//   - A reader holding mu sees the layers of the last finished commit. It
//     sees a file at most one commit ahead of them, because the transaction
//     commits before finishCommit takes mu. That commit may have folded a
//     journal generation away. The trees then hold what its entries held,
//     and changeRecordTx reads it there.
//   - A failed commit changes nothing in memory. Its committing layer stays,
//     and reads keep finding it. The next commit writes it again, together
//     with what was applied since (swapForCommit absorbs the pending layer).
//   - A collection's resourceVersion and must-list mark are written in the
//     transaction that writes the changes they cover. So the file always
//     holds a prefix of the applied stream.
//
// # Lock order
//
// The package's locks are listed in the one order in which they are taken.
// A goroutine holding one takes only locks after it.
//
//	DB.commitMu → DB.applyMu → Collection.aheadMu → Collection.mu →
//	    Collection.memMu → a bbolt transaction
//
//   - DB.commitMu allows one commit, index build, reset or journal
//     set-aside at a time.
//   - DB.applyMu is held for reading by apply and Checkpoint.write while
//     they add to a pending layer and count applySeq. The commit's swap,
//     Collection.Close and DB.Close hold it for writing. So the commit's
//     barrier, the applySeq it covers, counts exactly the changes it
//     swapped. And no change is applied after a Close.
//   - Collection.aheadMu allows one decodeAhead at a time.
//   - Collection.mu guards the layers and the open checkpoints. It also
//     guards the collection's state mirrored from the file (rv, mustList,
//     indexes, provenance). Its read lock is not reentrant. A goroutine
//     holding it must not take it again, since Go's RWMutex holds new
//     readers back once a writer waits.
//   - Collection.memMu guards publishing the in-memory index
//     (completeLocked).
//   - Nothing that runs inside a bbolt transaction takes a lock above.
//     The commit's transaction reads the layers under commitMu alone (note
//     2). So a reader holding mu never waits for a commit that waits for
//     it. A commit that grows the file's map waits for open read
//     transactions.
//
// DB.mu, objectCache.mu and holders.mu are leaves. Nothing is taken while
// one is held.
//
// # The commit
//
// Apply adds to the pending layer and calls noteApplied. noteApplied arms
// the batch timer, or kicks run at once past Options.BatchLimit. Flush kicks
// run too. DB.Close commits once more after stopping it. run calls
// DB.commit, which holds commitMu throughout. DB.commit takes four steps.
//
//  1. It swaps, holding applyMu for writing. swapForCommit moves each
//     collection's pending layer to committing. It absorbs the layer into
//     the committing layer a failed commit left, if there is one. The
//     barrier is the last applySeq.
//  2. It writes, holding no Collection.mu. writeAhead writes most of a
//     large list into an empty collection, a chunk per transaction. Then
//     one bbolt transaction writes every committing layer
//     (writeCommitting). It writes the layer's objects to the journal or
//     into the trees, and moves a fold along (writeObjects). It writes the
//     acknowledgements and tombstones (writeAcks). It writes the
//     resourceVersion and must-list mark.
//  3. If the transaction committed, it mirrors it in memory under each
//     collection's mu (finishCommit). The committing layer joins the
//     journal's or is dropped. The journal's layers follow the fold.
//  4. It reports the attempt to the commit observers. It logs once when
//     commits start failing and once when they recover. Then it releases
//     the Flush callers whose changes the barrier covers.

// noteApplied arms the batch timer or kicks an early commit. Called after
// every Apply with the number of changes it made.
//
// One timer at most is pending, so the timer starts at most one commit per
// BatchInterval. A change applied while a timer is pending waits for that
// timer, which fires sooner than one armed now would. A commit started by
// Flush or the batch limit stops the pending timer, because it takes every
// change applied so far (commit). If each such commit let the next change
// arm a second timer instead, every Flush during a steady stream would add
// a timer that commits once per interval while the stream lasts. A cold
// list received in pages flushes every thousand objects, and every commit
// rewrites the meta page, the freelist and the journal's branch and tail.
func (db *DB) noteApplied(n int) {
	if db.pending.Add(int64(n)) >= int64(db.opts.BatchLimit) {
		db.trigger()
		return
	}
	db.mu.Lock()
	// An Apply calls this after it lets applyMu go, so Close may have
	// committed its change meanwhile. A closed DB arms no timer.
	if db.batchTimer == nil && !db.closed {
		db.batchTimer = time.AfterFunc(db.opts.BatchInterval, db.batchDue)
	}
	db.mu.Unlock()
}

// batchDue is the batch timer's callback. It clears the timer, so that the
// next change arms another, and starts a commit.
func (db *DB) batchDue() {
	db.mu.Lock()
	db.batchTimer = nil
	db.mu.Unlock()
	db.trigger()
}

func (db *DB) trigger() {
	select {
	case db.kick <- struct{}{}:
	default:
	}
}

// run is the group-commit goroutine. It commits when kicked by the batch
// timer, the batch limit or Flush. It retries a failed commit with backoff,
// until stopped. Then it closes donec, and DB.Close commits what is left.
func (db *DB) run() {
	defer close(db.donec)
	var retry <-chan time.Time
	backoff := db.opts.BatchInterval
	for {
		select {
		case <-db.stopc:
			return
		case <-db.kick:
		case <-retry:
		}
		retry = nil
		if err := db.commit(); err != nil {
			// Keep the changes in memory and try again. Readers keep seeing
			// them through the layers, and the RV on disk stays behind.
			retry = time.After(backoff)
			backoff = min(backoff*2, 5*time.Second)
		} else {
			backoff = db.opts.BatchInterval
		}
	}
}

// commit writes every collection's pending changes, and their resource
// versions, in one bbolt transaction. It takes steps 1 to 4 above.
func (db *DB) commit() error {
	db.commitMu.Lock()
	defer db.commitMu.Unlock()

	db.mu.Lock()
	// The swap below takes every change applied so far. A pending batch
	// timer would start another commit for the changes applied after it,
	// less than an interval after this one. A timer that could not be
	// stopped has fired, and its callback clears it.
	if db.batchTimer != nil && db.batchTimer.Stop() {
		db.batchTimer = nil
	}
	colls := make([]*Collection, 0, len(db.collections))
	for _, c := range db.collections {
		colls = append(colls, c)
	}
	db.mu.Unlock()
	sort.Slice(colls, func(i, j int) bool { return colls[i].name < colls[j].name })

	// 1. Swap the pending layers out under applyMu, so that the barrier
	// covers exactly the changes swapped.
	db.applyMu.Lock()
	barrier := db.applySeq.Load()
	db.pending.Store(0)
	changes := 0
	var dirty []*Collection
	for _, c := range colls {
		if n, ok := c.swapForCommit(); ok {
			changes += n
			dirty = append(dirty, c)
		}
	}
	db.applyMu.Unlock()

	start := time.Now()
	var err error
	var plans []commitPlan
	if len(dirty) > 0 {
		// 2. Write most of a large layer of a collection being filled ahead,
		// a chunk per transaction (writeahead.go), then every layer in one
		// transaction. Readers keep seeing the committing layers until step
		// 3, so nothing they read goes missing meanwhile.
		for _, c := range dirty {
			if c.bulk(c.committing) {
				// The layer goes into the trees in place. A fold in
				// progress is finished first, a chunk per transaction.
				// If that fails, the commit folds the copies back in
				// its own (fold.go).
				_ = c.finishFold(false)
			}
			if err = c.writeAhead(); err != nil {
				err = fmt.Errorf("collection %s: writing ahead: %w", c.name, err)
				break
			}
		}
		plans = make([]commitPlan, len(dirty))
		if err == nil {
			err = db.bolt.Update(func(tx *bolt.Tx) error {
				now := time.Now().UTC()
				for i, c := range dirty {
					var err error
					if plans[i], err = c.writeCommitting(tx, now); err != nil {
						return fmt.Errorf("collection %s: %w", c.name, err)
					}
				}
				return nil
			})
		}
		if err != nil {
			err = fmt.Errorf("committing %d changes to %s: %w", changes, db.path, err)
		}
	}
	// 3. Drop the committed layers, or move them below to the journal's.
	// Reads now go to the file for what was written into the trees. Those
	// records are in the file now, and bbolt copied them there. So reuse
	// the buffers.
	if err == nil {
		for i, c := range dirty {
			for _, l := range c.finishCommit(plans[i]) {
				l.recycleRecords()
			}
		}
	}

	// 4. Report. The observers run before Flush callers are released, so
	// whoever waited for this commit also sees it reported.
	db.mu.Lock()
	observers := make([]func(CommitStats), 0, len(db.commitObservers))
	for _, fn := range db.commitObservers {
		observers = append(observers, fn)
	}
	failingBefore := db.lastErr != nil
	db.mu.Unlock()
	if len(dirty) > 0 || err != nil {
		stats := CommitStats{Changes: changes, Duration: time.Since(start), Err: err}
		for _, fn := range observers {
			fn(stats)
		}
	}
	// Say so once when commits start failing and once when they recover,
	// not on every retry.
	switch {
	case err != nil && !failingBefore:
		utilruntime.HandleError(fmt.Errorf("boltinformer: %w; the changes stay in memory, reads serve them, and commits are retried with backoff; the stored resourceVersion stays at the last committed state", err))
	case err == nil && failingBefore && len(dirty) > 0:
		utilruntime.HandleError(fmt.Errorf("boltinformer: commits to %s succeed again; the file has caught up", db.path))
	}

	db.mu.Lock()
	db.attempts++
	if err == nil {
		db.committedSeq = max(db.committedSeq, barrier)
		db.lastErr = nil
	} else {
		db.lastErr, db.lastErrSeq = err, db.attempts
	}
	close(db.commitDone)
	db.commitDone = make(chan struct{})
	db.mu.Unlock()
	return err
}

// swapForCommit moves the pending layer to committing, or folds it into a
// committing layer left by a failed commit, and stamps the open
// checkpoints in it. It reports the number of changes to write and whether
// there is anything to write. Called by commit (step 1), with commitMu and
// applyMu held.
func (c *Collection) swapForCommit() (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seeOpenCheckpointsLocked()
	if c.committing != nil {
		if !c.pending.empty() {
			c.committing.absorb(c.pending)
			c.pending = newLayer()
		}
		return len(c.committing.changes), true
	}
	if c.pending.empty() {
		return 0, false
	}
	c.committing, c.pending = c.pending, newLayer()
	return len(c.committing.changes), true
}

// writeCommitting writes the committing layer in tx (step 2). It writes the
// object changes (writeObjects), acknowledgements (writeAcks), resource
// version and must-list mark. It is called with commitMu held and not mu.
// commitMu also guards c.indexes against AddIndexes here. Every writer of
// the committing and journal layers holds it (see the table above).
func (c *Collection) writeCommitting(tx *bolt.Tx, now time.Time) (commitPlan, error) {
	l := c.committing
	b := c.bucket(tx)
	if b == nil {
		return commitPlan{}, ErrNoCollection
	}
	deleted, plan, err := c.writeObjects(b, l)
	if err != nil {
		return plan, err
	}
	if err := c.writeAcks(b, l, deleted); err != nil {
		return plan, err
	}
	meta := b.Bucket(format.CollMetaBucket)
	if l.rvSet {
		if err := meta.Put(format.RVKey, []byte(l.rv)); err != nil {
			return plan, err
		}
		if l.rv != "" {
			// A file with a resourceVersion may be resumed, so its
			// indexes must be whole (byvalueowed.go). The writes that
			// owed dropped the dormant indexes.
			if err := payByValueTx(b, sortedKeys(c.indexes)); err != nil {
				return plan, err
			}
		}
	}
	if l.mustListSet {
		if err := writeMustList(meta, l.mustList); err != nil {
			return plan, err
		}
	}
	if err := meta.Put(format.ClockKey, strconv.AppendInt(nil, c.inUseNow().Unix(), 10)); err != nil {
		return plan, err
	}
	return plan, meta.Put(format.CommittedKey, []byte(now.Format(time.RFC3339Nano)))
}

// commitPlan is what writeCommitting did, for finishCommit to mirror in
// memory once the transaction committed.
type commitPlan struct {
	journal  journalState
	appended bool // the committing layer went to the journal
	// appendedGen and appendedSeqs say where. appendedSeqs[i] is the
	// sequence number of the layer's i-th key in key order.
	appendedGen  uint64
	appendedKeys []string
	appendedSeqs []uint64
	foldAll      bool // the journal was folded whole (and the layer written to the trees)
	foldDone     bool // the folding generation's last chunk was folded
	seal         bool // the journaled generation is now folding
}

// writeObjects writes the committing layer's object changes in tx, to the
// journal or to the trees, and moves the fold along. It returns the last
// stored records of the keys the layer deletes (for the checkpoints'
// tombstones) and what finishCommit must do.
func (c *Collection) writeObjects(b *bolt.Bucket, l *layer) (map[string][]byte, commitPlan, error) {
	plan := commitPlan{journal: c.journal}
	plan.journal.gens = slices.Clone(c.journal.gens)
	plan.journal.ends = slices.Clone(c.journal.ends)
	if len(l.changes) == 0 {
		return nil, plan, nil
	}
	keys := sortedKeys(l.changes)
	if l.writtenAhead != "" { // those are in the trees already (writeahead.go)
		keys = keys[sort.SearchStrings(keys, l.writtenAhead+"\x00"):]
	}
	objects := b.Bucket(format.ObjectsBucket)
	checkpoints := b.Bucket(format.CheckpointsBucket) != nil || len(l.acks) > 0
	deleted := map[string][]byte{}
	if checkpoints {
		for _, key := range keys {
			if ch := l.changes[key]; ch.deleted {
				rec, err := c.lastRecord(b, key)
				if err != nil {
					return nil, plan, err
				}
				if ch.replaced != nil {
					rec = ch.replaced // newer than the committed one
				}
				deleted[key] = rec
			}
		}
	}
	if c.bulk(l) || (!c.hasJournal() && appending(objects, keys)) {
		// Write straight into the trees when the journal is off, or when
		// the commit is large enough that each rewritten leaf holds many of
		// its keys. So does a commit that appends, such as a list loading
		// into an empty collection.
		plan.foldAll = c.hasJournal()
		if err := c.foldAllTx(b, &plan.journal, l); err != nil {
			return nil, plan, err
		}
		return deleted, plan, nil
	}
	gen, seqs, appended, err := c.appendJournal(b, &plan.journal, keys, l)
	if err != nil {
		return nil, plan, err
	}
	plan.appendedGen, plan.appendedSeqs, plan.appendedKeys = gen, seqs, keys
	plan.appended = true
	if c.folding != nil {
		// Before the dormant indexes are dropped below: the fold may
		// move the rebuilt trees in, which no write in this transaction
		// may precede (fold.go).
		done, err := c.foldStep(b, &plan.journal, appended)
		if err != nil {
			return nil, plan, err
		}
		plan.foldDone = done
	} else {
		limit, err := c.journalLimit(b, &plan.journal)
		if err != nil {
			return nil, plan, err
		}
		// The sealed generation's keys are derived from its layer once
		// finishCommit has it, as loadJournal derives them.
		plan.seal = plan.journal.activeBytes >= limit
		if plan.seal {
			plan.journal.activeBytes = 0
		}
	}
	// Dormant indexes would be behind the journal as they would be behind
	// the trees.
	if err := c.dropUnusedIndexes(b); err != nil {
		return nil, plan, err
	}
	return deleted, plan, nil
}

// bulk reports whether the committing layer l goes into the trees in
// place, whatever the file holds: the journal is off, or l is large
// enough that each leaf it rewrites holds many of its keys.
func (c *Collection) bulk(l *layer) bool {
	return c.db.opts.JournalShare < 0 || len(l.changes) >= c.db.opts.BatchLimit
}

// lastRecord returns a copy of key's newest committed record (journal,
// then the object tree), or nil if it has none.
func (c *Collection) lastRecord(b *bolt.Bucket, key string) ([]byte, error) {
	if ch := c.journalChangeLocked(key); ch != nil {
		if ch.deleted {
			return nil, nil
		}
		rec, err := c.changeRecordTx(b, key, ch)
		return bytes.Clone(rec), err
	}
	return bytes.Clone(objectsTree(b).Get([]byte(key))), nil
}

// writeAcks writes the layer's acknowledgements after its object changes.
// deleted holds the last stored record of each key the layer deleted. It is
// called from writeCommitting.
//
// A deleted key acknowledged in a checkpoint, on disk or in this layer,
// becomes a tombstone. It does not if the layer also holds the
// acknowledgement of that deletion (ackedDeletions). Then the layer's
// acknowledgements are written, and a key not stored is not acknowledged.
// Each drops its key's tombstone only if it settles the deletion (see
// Checkpoint.Ack). The deletion itself settles it, and so does a state
// stored after it. The keys this layer deleted were settled above and are
// left alone.
//
// An entry that damage left as a bucket reads as one that does not decode,
// as openCheckpoint read it. It is written over like any other (putValue).
func (c *Collection) writeAcks(b *bolt.Bucket, l *layer, deleted map[string][]byte) error {
	if err := writeSeen(b, l.seen); err != nil {
		return err
	}
	cb := b.Bucket(format.CheckpointsBucket)
	if cb == nil && len(l.acks) == 0 && len(l.clearedAcks) == 0 {
		return nil // no checkpoint was ever written: nothing to move either
	}
	var err error
	if cb == nil {
		if cb, err = b.CreateBucket(format.CheckpointsBucket); err != nil {
			return err
		}
	}
	tb, err := b.CreateBucketIfNotExists(format.TombstonesBucket)
	if err != nil {
		return err
	}
	for name := range l.clearedAcks {
		for _, parent := range []*bolt.Bucket{cb, tb} {
			if err := parent.DeleteBucket([]byte(name)); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
				return err
			}
		}
	}
	names := map[string]bool{}
	err = cb.ForEachBucket(func(name []byte) error {
		names[string(name)] = true
		return nil
	})
	if err != nil {
		return err
	}
	for name := range l.acks {
		names[name] = true
	}
	// A deleted key's tombstone value is the same in every checkpoint.
	tombstones := map[string][]byte{}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		nb, err := cb.CreateBucketIfNotExists([]byte(name))
		if err != nil {
			return err
		}
		nt, err := tb.CreateBucketIfNotExists([]byte(name))
		if err != nil {
			return err
		}
		layerAcks := l.acks[name]
		for _, key := range sortedKeys(deleted) {
			kb := []byte(key)
			if _, acked := entry(nb, kb); !acked && layerAcks[key] == "" {
				continue
			}
			if err := deleteValue(nb, kb); err != nil {
				return err
			}
			if l.ackedDeletions[name][key] {
				if err := deleteValue(nt, kb); err != nil {
					return err
				}
				continue
			}
			rec := deleted[key]
			if rec == nil {
				continue // never stored: nothing was deleted
			}
			v, ok := tombstones[key]
			if !ok {
				v = c.tombstoneValue(key, rec, l.changes[key].deletedAt)
				tombstones[key] = v
			}
			if err := putValue(nt, kb, v); err != nil {
				return err
			}
		}
		for _, key := range sortedKeys(layerAcks) {
			if _, ok := deleted[key]; ok {
				continue
			}
			kb := []byte(key)
			rv := layerAcks[key]
			storedRV, stored, err := c.storedVersionTx(b, l, key)
			if err != nil {
				return fmt.Errorf("checkpoint %q, key %q: %w", name, key, err)
			}
			if raw, ok := entry(nt, kb); ok {
				t, _ := format.DecodeTombstone(raw)
				if rv == "" || rv == t.DeletedAt || (stored && rv == storedRV) {
					if err := deleteValue(nt, kb); err != nil {
						return err
					}
				}
			}
			if rv == "" || !stored {
				// Not stored, because deleted in an earlier commit or
				// never stored. There is nothing to skip.
				continue
			}
			if err := putValue(nb, kb, []byte(rv)); err != nil {
				return fmt.Errorf("checkpoint %q, key %q: %w", name, key, err)
			}
		}
	}
	return nil
}

// storedVersionTx returns the resourceVersion of key's newest committed
// state after l, and whether that state is an object.
func (c *Collection) storedVersionTx(b *bolt.Bucket, l *layer, key string) (string, bool, error) {
	var rec []byte
	if ch := c.changeAfter(l, key); ch != nil {
		if ch.deleted {
			return "", false, nil
		}
		if ch.obj != nil {
			rv, err := resourceVersionOf(ch.obj)
			return rv, true, err
		}
		var err error
		if rec, err = c.changeRecordTx(b, key, ch); err != nil {
			return "", false, err
		}
	} else if rec = objectsTree(b).Get([]byte(key)); rec == nil {
		return "", false, nil
	}
	rv, err := format.ReadResourceVersion(rec)
	return rv, err == nil, err
}

// tombstoneValue encodes the tombstone of key, deleted at deletedAt (if
// known), with rec its last record. A record that cannot be decoded is
// replaced by an empty object of its type (Codec.placeholder), or by none.
// A tombstone must open on every later start. A deletion must be delivered
// even where its last state is lost.
func (c *Collection) tombstoneValue(key string, rec []byte, deletedAt string) []byte {
	if _, err := c.db.codec.Decode(rec); err != nil {
		p := c.db.codec.placeholder(key, rec)
		rec = nil
		if p != nil {
			rec, _ = c.db.codec.Encode(p)
		}
	}
	return format.AppendTombstone(nil, format.Tombstone{DeletedAt: deletedAt, Record: rec})
}

// finishCommit mirrors a committed plan in memory (step 3). The committing
// layer joins the journal or is dropped. The journal's layers follow the
// fold. It returns the layers whose records may be recycled.
func (c *Collection) finishCommit(plan commitPlan) []*layer {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.committing
	c.committing = nil
	c.journal = plan.journal
	c.forgetTombstoneObjectsLocked(l)
	var done []*layer
	switch {
	case plan.appended:
		l.acks, l.clearedAcks, l.ackedDeletions = nil, nil, nil // written
		// The file holds the records now. The layer keeps where, and
		// reads take them from there. This runs under mu, because readers
		// may be reading the committing layer's records until now.
		recycled := 0
		bounded := c.cache.bounded()
		for i, key := range plan.appendedKeys {
			ch := l.changes[key]
			ch.gen, ch.seq = plan.appendedGen, plan.appendedSeqs[i]
			if ch.record != nil && recycled < maxRecycledPerCommit && cap(ch.record) <= maxRecycledRecord {
				p := ch.record[:0]
				recordPool.Put(&p)
				recycled++
			}
			ch.record, ch.replaced = nil, nil
			if bounded {
				// A bounded cache's memory must not grow with the
				// journal. Reads decode the records again.
				ch.obj = nil
			}
		}
		if c.journaled == nil {
			c.journaled = l
		} else {
			for key, ch := range l.changes {
				c.journaled.put(key, ch)
			}
		}
	case plan.foldAll:
		done = append(done, l, c.journaled, c.folding)
		c.journaled, c.folding = nil, nil
	default:
		done = append(done, l)
	}
	if plan.foldDone {
		done = append(done, c.folding)
		c.folding = nil
	}
	if plan.seal {
		c.folding, c.journaled = c.journaled, nil
		c.journal.foldKeys = sortedKeys(c.folding.changes)
	}
	return done
}

// forgetTombstoneObjectsLocked drops the objects of the open checkpoints'
// tombstones of the keys l deleted, now that the commit wrote them.
// Deleted reads them from the file. Tombstones then cost a key each in
// memory, not an object. A key changed again since keeps its object until
// that change is committed. Called with mu held for writing.
func (c *Collection) forgetTombstoneObjectsLocked(l *layer) {
	if len(c.checkpoints) == 0 {
		return
	}
	for key, ch := range l.changes {
		if !ch.deleted || c.pending.changes[key] != nil {
			continue
		}
		for _, cp := range c.checkpoints {
			if t := cp.deleted[key]; t != nil {
				t.obj = nil
			}
		}
	}
}

// Flush commits every change applied before the call and returns once they
// are on disk, or the first commit error seen after the call.
func (db *DB) Flush(ctx context.Context) error {
	if db.opts.ReadOnly {
		return nil
	}
	target := db.applySeq.Load()
	db.mu.Lock()
	startAttempts := db.attempts
	db.mu.Unlock()
	db.trigger()
	for {
		db.mu.Lock()
		done, committed := db.commitDone, db.committedSeq
		lastErr, errSeq, closed := db.lastErr, db.lastErrSeq, db.closed
		db.mu.Unlock()
		if committed >= target {
			return nil
		}
		if lastErr != nil && errSeq > startAttempts {
			return lastErr
		}
		if closed {
			return ErrClosed
		}
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Err returns the error of the latest commit if it failed, nil otherwise.
func (db *DB) Err() error {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.lastErr
}

// CommitStats describes one group commit, for metrics.
type CommitStats struct {
	Changes  int
	Duration time.Duration
	Err      error
}

// AddCommitObserver calls fn after every commit attempt that wrote changes
// or failed, until the returned function is called. fn runs on the commit
// goroutine before Flush callers are released. It must not block or call
// back into the DB.
func (db *DB) AddCommitObserver(fn func(CommitStats)) (remove func()) {
	db.mu.Lock()
	defer db.mu.Unlock()
	id := db.nextObserver
	db.nextObserver++
	db.commitObservers[id] = fn
	return func() {
		db.mu.Lock()
		delete(db.commitObservers, id)
		db.mu.Unlock()
	}
}
