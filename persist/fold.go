package persist

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/vmihailenco/msgpack/v5"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/boltinformer/boltinformer/internal/format"
)

// A fold writes the collection's object tree and its versions afresh. It
// merges each with the folding generation's changes, in key order, into a
// copy below format.RebuildBucket. A key the generation changes gets the
// generation's state, and every other key the tree's. The copy only grows
// at its end, so it fills its pages (FillPercent 1), and each record is
// written once. A leaf of a tree updated in place is rewritten for every
// changed record in it, and split pages stay half empty. docs/write-path.md
// gives the arithmetic.
//
// The merge moves a chunk of keys per commit (commitBudget), through both
// trees alike. The same transaction deletes the merged entries from the
// trees. A tree's leaves are freed whole in key order, without being
// rewritten, and the next chunks reuse their pages. So the file holds each
// record about once, plus the journal, while a fold runs. Reads see a copy
// and its tree's rest as one tree (format.Tree). The copy's keys all sort
// before the rest's.
//
// The index trees are small, and are updated in place, once per fold, by
// the commit that swaps the copies in (swapTx). A byValue tree is in value
// order, so no chunk of keys maps to a part of it. Until that commit, the
// index trees hold the state before the generation for every key. The
// merge stands at the same key in both copies. So a key's record and
// version agree at every commit, and its index entries give the old
// values, which the update in place removes.
//
// The copies hold no state the collection lacks. Each of their entries is
// the tree's, or the folding generation's, whose layer reads consult before
// the trees. So a chunk changes no read, and a crash between chunks leaves
// a file that opens to the same state. The next commit goes on where the
// copies end: their last key is where the merge stands.
//
// bbolt moves a bucket by its header as of the transaction's start. A
// bucket written in the same transaction would lose those writes. So the
// commit after the last chunk moves the copies in, and writes no copy.
// Paths that need the trees whole (a bulk commit, an index build, an open
// that changes the collection) finish the fold first, a chunk per
// transaction (finishFold). If that fails, they fold the copies back into
// the trees in their own transaction (abandonRebuildTx). The index trees
// then still hold the old state of the keys folded back, and the
// generation, which stays, is applied over them again. A journal's
// set-aside drops the generation, so it brings the index trees in line
// itself (foldBackForSetAsideTx).

// foldCommits is how many commits a fold is spread over at least, and
// minFoldBytes and maxFoldBytes bound a commit's chunk. Each commit also
// merges at least foldPerAppended bytes per byte it appends. So the new
// generation grows by at most an eighth of the trees while the old one is
// folded.
const (
	foldCommits     = 16
	foldPerAppended = 8
	minFoldBytes    = 1 << 20
	maxFoldBytes    = 32 << 20
)

// foldBudget bounds what one commit's chunk of a fold writes.
type foldBudget struct {
	bytes   int64
	entries int
}

func (b *foldBudget) spent() bool { return b.bytes <= 0 || b.entries <= 0 }

func (b *foldBudget) spend(n int) {
	b.bytes -= int64(n)
	b.entries--
}

// unlimited is the budget of a merge that must finish.
var unlimited = foldBudget{bytes: math.MaxInt64, entries: math.MaxInt}

// commitBudget returns the chunk of a commit that appended appended bytes
// to the journal.
func (c *Collection) commitBudget(j *journalState, appended int64) foldBudget {
	if n := c.db.opts.foldChunk; n > 0 {
		return foldBudget{bytes: math.MaxInt64, entries: n}
	}
	bytes := min(max(j.treeBytes/foldCommits, minFoldBytes), maxFoldBytes)
	return foldBudget{bytes: max(bytes, foldPerAppended*appended), entries: math.MaxInt}
}

// foldStep moves the fold of the folding generation along in b's
// transaction, by one chunk of appended's budget. It starts the copies if
// there are none. If the last chunk was merged before, it swaps the copies
// in instead, deletes the generation and reports that the fold is done.
func (c *Collection) foldStep(b *bolt.Bucket, j *journalState, appended int64) (bool, error) {
	rb := b.Bucket(format.RebuildBucket)
	if rb == nil {
		var err error
		if rb, err = c.startRebuildTx(b, j); err != nil {
			return false, err
		}
	} else {
		done, err := c.mergeTx(b, rb, j, foldBudget{})
		if err != nil {
			return false, err
		}
		if done {
			return true, c.swapTx(b, j)
		}
	}
	_, err := c.mergeTx(b, rb, j, c.commitBudget(j, appended))
	return false, err
}

// finishFold merges the rest of a fold in progress, a chunk per
// transaction (commitBudget), and swaps the copies in with a last one. A
// path that needs the trees whole would otherwise fold the copies back in
// its own transaction (abandonRebuildTx). That writes up to the whole
// collection in one transaction, and bbolt holds a buffer per page it
// writes until the commit. A fold that has not written copies is left as
// it is, since nothing needs folding back.
//
// Each transaction leaves a file that opens to the same state, as every
// chunk of a commit does. So a failed one ends it, and the caller's own
// transaction folds back what is left. It is called with commitMu held,
// and with mu if locked, before the caller's transaction.
func (c *Collection) finishFold(locked bool) error {
	for c.journal.foldKeys != nil {
		j := c.journal
		j.gens, j.ends = slices.Clone(j.gens), slices.Clone(j.ends)
		started, done := false, false
		err := c.db.bolt.Update(func(tx *bolt.Tx) error {
			b := c.bucket(tx)
			if b == nil {
				return ErrNoCollection
			}
			if started = b.Bucket(format.RebuildBucket) != nil; !started {
				return nil
			}
			var err error
			done, err = c.foldStep(b, &j, 0)
			return err
		})
		if err != nil || !started {
			return c.db.closedErr(err)
		}
		if !locked {
			c.mu.Lock()
		}
		c.journal = j
		if done {
			c.folding = nil
		}
		if !locked {
			c.mu.Unlock()
		}
	}
	return nil
}

// startRebuildTx creates the copies of the collection b's object tree and
// versions, empty, and records the generation they fold.
func (c *Collection) startRebuildTx(b *bolt.Bucket, j *journalState) (*bolt.Bucket, error) {
	rb, err := b.CreateBucket(format.RebuildBucket)
	if err != nil {
		return nil, err
	}
	if err := b.Bucket(format.CollMetaBucket).Put(format.RebuildKey, format.JournalSeq(j.gens[0])); err != nil {
		return nil, err
	}
	for _, name := range rebuiltTrees {
		if b.Bucket(name) == nil {
			continue // versions, in a file schema 2 wrote, until built
		}
		if _, err := rb.CreateBucket(name); err != nil {
			return nil, err
		}
	}
	return rb, nil
}

// rebuiltTrees are the trees a fold writes afresh.
var rebuiltTrees = [][]byte{format.ObjectsBucket, format.VersionsBucket}

// treeMerge is one tree's part of a fold: its name below the collection
// and the entries the folding generation gives it, in key order.
type treeMerge struct {
	name []byte
	keys []string // the generation's keys, sorted
	// deletes reports whether the generation deletes the i-th key.
	deletes func(i int) bool
	// value returns the i-th key's value, which the generation does not
	// delete.
	value func(i int) ([]byte, error)
}

// mergeTx merges the next keys of the object tree and the versions into
// their copies below rb, within budget, both up to the same key. It reports
// whether both are merged. With a zero budget it only reports that, and
// writes nothing.
func (c *Collection) mergeTx(b, rb *bolt.Bucket, j *journalState, budget foldBudget) (bool, error) {
	changes := map[string]*change{}
	if c.folding != nil {
		changes = c.folding.changes
	}
	keys := j.foldKeys
	deletes := func(i int) bool { return changes[keys[i]].deleted }
	objects := treeMerge{
		name: format.ObjectsBucket, keys: keys, deletes: deletes,
		value: func(i int) ([]byte, error) { return c.changeRecordTx(b, keys[i], changes[keys[i]]) },
	}
	versions := treeMerge{
		name: format.VersionsBucket, keys: keys, deletes: deletes,
		value: func(i int) ([]byte, error) {
			ch := changes[keys[i]]
			uid, rv := ch.uid, ch.rv
			if uid == "" && rv == "" { // journaled by schema 2
				rec, err := c.changeRecordTx(b, keys[i], ch)
				if err != nil {
					return nil, err
				}
				v := versionOfRecord(c.db.codec, rec)
				uid, rv = string(v.UID), v.ResourceVersion
			}
			return format.AppendVersion(nil, uid, rv), nil
		},
	}
	check := budget == foldBudget{}
	done, last, err := c.mergeTree(b, rb, j, objects, &budget, nil)
	if err != nil || rb.Bucket(format.VersionsBucket) == nil {
		return done, err
	}
	switch {
	case check:
		// Both copies stand at the same key, so the versions are merged
		// whole if the records are. Look without writing anything.
		budget = foldBudget{}
		last = nil
	case done:
		// The versions follow to the end, whatever that costs: they are
		// small beside the records.
		budget, last = unlimited, nil
	case last == nil:
		return false, nil // nothing merged
	default:
		budget = unlimited
	}
	vdone, _, err := c.mergeTree(b, rb, j, versions, &budget, last)
	return done && vdone, err
}

// mergeTree merges m's tree into its copy below rb until the budget is
// spent, past until if that is not nil, or to the end. It reports whether
// the tree is merged whole, and returns the last key it took. The copy's
// last key is where the merge stands. Every entry of the tree up to there
// was merged, and deleted from the tree in the same transaction. Every
// entry the generation gives up to there was written. So the merge goes
// on from the tree's first entry and the generation's first key after
// that.
func (c *Collection) mergeTree(b, rb *bolt.Bucket, j *journalState, m treeMerge, budget *foldBudget, until []byte) (bool, []byte, error) {
	tree, copied := b.Bucket(m.name), rb.Bucket(m.name)
	if tree == nil || copied == nil {
		return false, nil, fmt.Errorf("%w: folding %s: the tree or its copy is missing", ErrCorruptRecord, m.name)
	}
	objects := bytes.Equal(m.name, format.ObjectsBucket)
	at, _ := copied.Cursor().Last()
	i := 0
	if at != nil {
		i = sort.SearchStrings(m.keys, string(at)+"\x00")
	}
	// Every key goes after the copy's, so fill its pages.
	copied.FillPercent = 1.0
	treeBytes := j.treeBytes
	cur := tree.Cursor()
	k, v := cur.First()
	var merged [][]byte
	var last []byte
	done := false
	for {
		var ck []byte
		if i < len(m.keys) {
			ck = []byte(m.keys[i])
		}
		if ck != nil && m.deletes(i) && (k == nil || bytes.Compare(ck, k) < 0) {
			// A deletion of a key the tree lacks: nothing to merge. The
			// copy's last key stays before it, so the next chunk passes
			// it again, as cheaply.
			i++
			continue
		}
		if k == nil && ck == nil {
			done = true
			break
		}
		next := ck
		if k != nil && (ck == nil || bytes.Compare(k, ck) < 0) {
			next = k
		}
		if budget.spent() || (until != nil && bytes.Compare(next, until) > 0) {
			break
		}
		last = next
		if k != nil && (ck == nil || bytes.Compare(k, ck) < 0) {
			// The tree's entry comes first, and the generation leaves it
			// as it is. A nested bucket (damage) is copied as an empty
			// value, which reads take for a record that does not
			// decode, as they took the bucket.
			merged = append(merged, k)
			if err := copied.Put(k, v); err != nil {
				return false, nil, fmt.Errorf("folding %s, key %q: %w", m.name, k, err)
			}
			budget.spend(len(k) + len(v))
			k, v = cur.Next()
			continue
		}
		// The generation's entry, which replaces the tree's if it has
		// one.
		if k != nil && bytes.Equal(k, ck) {
			merged = append(merged, k)
			if objects && j.treeBytes >= 0 {
				j.treeBytes -= int64(len(v))
			}
			k, v = cur.Next()
		}
		n := len(ck)
		if !m.deletes(i) {
			val, err := m.value(i)
			if err != nil {
				return false, nil, err
			}
			// val aliases the journal, or is this transaction's. Neither
			// is freed before the commit, and bbolt copies it when it
			// writes the page.
			if err := copied.Put(ck, val); err != nil {
				return false, nil, fmt.Errorf("folding %s, key %q: %w", m.name, ck, err)
			}
			if objects && j.treeBytes >= 0 {
				j.treeBytes += int64(len(val))
			}
			n += len(val)
		}
		budget.spend(n)
		i++
	}
	// Delete backwards: bbolt then removes each entry from the end of its
	// leaf, and a leaf left empty is freed without being written.
	for n := len(merged) - 1; n >= 0; n-- {
		if err := deleteValue(tree, merged[n]); err != nil {
			return false, nil, fmt.Errorf("folding %s, key %q: %w", m.name, merged[n], err)
		}
	}
	if objects && j.treeBytes != treeBytes {
		if err := writeTreeBytes(b, j.treeBytes); err != nil {
			return false, nil, err
		}
	}
	return done, last, nil
}

// swapTx updates the collection b's index trees in place for the folding
// generation, puts the merged copies in place of the trees the merge
// emptied, and deletes the generation. No copy may have been written in
// this transaction (see above).
func (c *Collection) swapTx(b *bolt.Bucket, j *journalState) error {
	if err := c.foldIndexesTx(b, j.foldKeys); err != nil {
		return err
	}
	rb := b.Bucket(format.RebuildBucket)
	for _, name := range rebuiltTrees {
		if rb.Bucket(name) == nil {
			continue
		}
		if err := b.DeleteBucket(name); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
			return err
		}
		if err := rb.MoveBucket(name, b); err != nil {
			return fmt.Errorf("moving the rebuilt %q in place: %w", name, err)
		}
	}
	if err := deleteRebuildTx(b); err != nil {
		return err
	}
	jb := b.Bucket(format.JournalBucket)
	if err := jb.DeleteBucket(format.JournalSeq(j.gens[0])); err != nil {
		return fmt.Errorf("deleting folded journal generation %d: %w", j.gens[0], err)
	}
	if err := jb.Delete(format.FoldedKey); err != nil { // a schema-3 fold's
		return err
	}
	j.gens, j.ends = j.gens[1:], j.ends[1:]
	j.foldKeys = nil
	return writeJournalRecord(b, j)
}

// foldIndexesTx writes the folding generation's changes to keys into the
// index trees of the indexes in use, in place. The trees hold the state
// before the generation, and each key's byKey entry its old values, which
// writeIndexValues removes.
func (c *Collection) foldIndexesTx(b *bolt.Bucket, keys []string) error {
	idx := b.Bucket(format.IndexesBucket)
	owed := byValueOwed(b)
	for _, name := range sortedKeys(c.indexes) {
		ib := idx.Bucket([]byte(name))
		if ib == nil {
			return fmt.Errorf("%w: index bucket %q missing", ErrCorruptRecord, name)
		}
		byValue, byKey := ib.Bucket(format.ByValueBucket), ib.Bucket(format.ByKeyBucket)
		if owed {
			byValue = nil
		}
		for _, key := range keys {
			ch := c.folding.changes[key]
			var old []string
			if raw := byKey.Get([]byte(key)); raw != nil {
				if err := msgpack.Unmarshal(raw, &old); err != nil {
					return fmt.Errorf("%w: index %q of %q: %v", ErrCorruptRecord, name, key, err)
				}
			}
			var values []string
			if !ch.deleted {
				values = ch.indexes[name]
			}
			if err := writeIndexValues(byValue, byKey, key, old, values); err != nil {
				return fmt.Errorf("index %q of %q: %w", name, key, err)
			}
		}
	}
	return nil
}

// abandonRebuildTx folds the copies a fold wrote back into the collection
// b's trees, and deletes them. Object tree and versions then hold what
// trees and copies held, so reads see the same state. The index trees hold
// the state before the folding generation, which stays, and a later fold
// or foldAllTx applies it again. Paths that write the trees in place call
// it first, in their transaction (see above). It reports whether the
// copies held anything, which the index trees then lag.
func (c *Collection) abandonRebuildTx(b *bolt.Bucket) (bool, error) {
	rb := b.Bucket(format.RebuildBucket)
	if rb == nil {
		return false, nil
	}
	merged := false
	for _, name := range rebuiltTrees {
		copied, tree := rb.Bucket(name), b.Bucket(name)
		if copied == nil || tree == nil {
			continue
		}
		// The copy is deleted below, and its pages are freed. bbolt
		// reuses them only after the commit, so the values Put is given
		// stay valid until then.
		err := copied.ForEach(func(k, v []byte) error {
			merged = true
			return putValue(tree, k, v)
		})
		if err != nil {
			return false, fmt.Errorf("folding back the rebuilt %s: %w", name, err)
		}
	}
	if merged {
		c.db.foldedBack.Add(1)
	}
	return merged, deleteRebuildTx(b)
}

// deleteRebuildTx deletes a fold's copies of the collection b's trees, if
// it has any, and the record of them in meta.
func deleteRebuildTx(b *bolt.Bucket) error {
	if err := b.DeleteBucket(format.RebuildBucket); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
		return err
	}
	return b.Bucket(format.CollMetaBucket).Delete(format.RebuildKey)
}

// foldBackForSetAsideTx folds a fold's copies back into the collection
// b's trees before its journal is set aside, and brings the index trees
// in line with the records. The copies hold states of the folding
// generation, and the merge deleted some of its deleted keys from the
// trees. The index trees still hold the states before the generation
// for all of those keys, and no journal will say them any more.
//
// If the folding generation can be read whole, its entries give the
// index values of every state the fold wrote, and the index trees are
// updated in place. Otherwise, with canBuild, every index is dropped, and
// DB.Collection builds them again from the records. Without IndexValues
// no index can be built, and an index the file holds at the version its
// owner names needs none. So the records the copies held are set aside
// instead, with their versions and index entries, as are index entries of
// keys the records lack. The caller sets the must-list mark. It returns
// the records set aside, for the checkpoints' tombstones.
func (c *Collection) foldBackForSetAsideTx(b *bolt.Bucket, canBuild bool) (map[string][]byte, error) {
	rb := b.Bucket(format.RebuildBucket)
	if rb == nil {
		return nil, deleteRebuildTx(b)
	}
	// A chunk that ended on a deleted key deleted it from the trees and
	// copied nothing. So even empty copies may leave index entries behind.
	var copied []string
	if ob := rb.Bucket(format.ObjectsBucket); ob != nil {
		if err := ob.ForEach(func(k, _ []byte) error {
			copied = append(copied, string(k))
			return nil
		}); err != nil {
			return nil, err
		}
	}
	changes, whole := foldingGeneration(b)
	if _, err := c.abandonRebuildTx(b); err != nil {
		return nil, err
	}
	var at string // where the merge stood: every state up to it is the generation's
	if len(copied) > 0 {
		at = copied[len(copied)-1]
	}
	objects := b.Bucket(format.ObjectsBucket)
	switch {
	case whole:
		return nil, forEachIndexTx(b, func(name string, byValue, byKey *bolt.Bucket) error {
			for _, key := range sortedKeys(changes) {
				e := changes[key]
				var values []string
				switch {
				case e.Deleted && objects.Get([]byte(key)) == nil:
					// A deleted key the merge passed, or one the trees
					// never held.
				case !e.Deleted && len(copied) > 0 && key <= at:
					values = e.Indexes[name]
				default:
					continue // the trees still hold the state before the generation
				}
				if err := rewriteIndexValues(byValue, byKey, name, key, values); err != nil {
					return err
				}
			}
			return nil
		})
	case canBuild:
		if err := dropIndexesTx(b); err != nil {
			return nil, err
		}
		c.rebuiltAtOpen = errors.Join(c.rebuiltAtOpen, errors.New("indexes: a fold in progress had written part of the journal's changes, which the set-aside dropped, into the records; the indexes were built again from the records"))
		return nil, nil
	}
	setAside := make(map[string][]byte, len(copied))
	versions := b.Bucket(format.VersionsBucket)
	for _, key := range copied {
		kb := []byte(key)
		setAside[key] = bytes.Clone(objects.Get(kb))
		if err := deleteValue(objects, kb); err != nil {
			return nil, err
		}
		if versions != nil {
			if err := deleteValue(versions, kb); err != nil {
				return nil, err
			}
		}
	}
	err := forEachIndexTx(b, func(name string, byValue, byKey *bolt.Bucket) error {
		var stale []string
		if err := byKey.ForEach(func(k, _ []byte) error {
			if objects.Get(k) == nil {
				stale = append(stale, string(k))
			}
			return nil
		}); err != nil {
			return err
		}
		for _, key := range stale {
			if err := rewriteIndexValues(byValue, byKey, name, key, nil); err != nil {
				return err
			}
		}
		return nil
	})
	c.journalSetAside = errors.Join(c.journalSetAside, fmt.Errorf("a fold in progress had written part of the journal, which cannot be read whole, into the records; without IndexValues their index entries cannot be rebuilt, so the %d records the fold had written were set aside too", len(copied)))
	return setAside, err
}

// foldingGeneration returns the newest entry of each key of the journal
// generation the collection b's fold is writing (format.RebuildKey), and
// whether it could read that generation whole: every entry from the first
// to the last its record in meta names. Entries alias the transaction's
// memory.
func foldingGeneration(b *bolt.Bucket) (map[string]format.JournalEntry, bool) {
	meta := b.Bucket(format.CollMetaBucket)
	gen, err := format.ParseJournalSeq(meta.Get(format.RebuildKey))
	if err != nil {
		return nil, false
	}
	record, err := format.ParseJournalRecord(meta.Get(format.JournalKey))
	if err != nil || meta.Get(format.JournalKey) == nil {
		return nil, false
	}
	i := slices.IndexFunc(record, func(g format.JournalGeneration) bool { return g.Gen == gen })
	jb := b.Bucket(format.JournalBucket)
	if i < 0 || jb == nil || jb.Bucket(format.JournalSeq(gen)) == nil {
		return nil, false
	}
	out := map[string]format.JournalEntry{}
	var n uint64
	err = jb.Bucket(format.JournalSeq(gen)).ForEach(func(k, raw []byte) error {
		seq, err := format.ParseJournalSeq(k)
		if err != nil || seq != n+1 || raw == nil {
			return errors.New("not a whole generation")
		}
		e, err := format.DecodeJournalEntry(raw)
		if err != nil || e.Key == "" {
			return errors.New("not a whole generation")
		}
		out[e.Key] = e
		n = seq
		return nil
	})
	if err != nil || n != record[i].Last {
		return nil, false
	}
	return out, true
}

// forEachIndexTx calls fn with each sound index bucket of the collection
// b, until fn returns an error, which it returns. An index without its
// byValue or byKey bucket is damage, which checkIndexBuckets reports. An
// index with a damaged entry is skipped too, unwritten. A bucket standing
// where an entry belongs would fail the caller's writes, and the open with
// them, at every attempt. create drops such an index and builds it again
// from the records (dropDamagedDerivedTx), so nothing it held is lost.
func forEachIndexTx(b *bolt.Bucket, fn func(name string, byValue, byKey *bolt.Bucket) error) error {
	idx := b.Bucket(format.IndexesBucket)
	var names []string
	if err := idx.ForEachBucket(func(name []byte) error {
		names = append(names, string(name))
		return nil
	}); err != nil {
		return err
	}
	for _, name := range names {
		ib := idx.Bucket([]byte(name))
		byValue, byKey := ib.Bucket(format.ByValueBucket), ib.Bucket(format.ByKeyBucket)
		if byValue == nil || byKey == nil || checkIndexEntries(ib) != nil {
			continue
		}
		if err := fn(name, byValue, byKey); err != nil {
			return fmt.Errorf("index %q: %w", name, err)
		}
	}
	return nil
}

// rewriteIndexValues gives key values in the named index, whatever it
// held. The index's entries are sound (forEachIndexTx checks them), so
// its byKey value of key decodes, if it has one.
func rewriteIndexValues(byValue, byKey *bolt.Bucket, name, key string, values []string) error {
	var old []string
	if raw := byKey.Get([]byte(key)); raw != nil {
		if err := msgpack.Unmarshal(raw, &old); err != nil {
			old = nil
		}
	}
	if err := writeIndexValues(byValue, byKey, key, old, values); err != nil {
		return fmt.Errorf("index %q of %q: %w", name, key, err)
	}
	return nil
}

// dropIndexesTx deletes every index of the collection b and forgets their
// versions. DB.Collection then builds the indexes it is given from the
// records, as for an index whose version changed.
func dropIndexesTx(b *bolt.Bucket) error {
	idx := b.Bucket(format.IndexesBucket)
	var names [][]byte
	if err := idx.ForEachBucket(func(name []byte) error {
		names = append(names, bytes.Clone(name))
		return nil
	}); err != nil {
		return err
	}
	for _, name := range names {
		if err := idx.DeleteBucket(name); err != nil {
			return err
		}
	}
	raw, err := msgpack.Marshal(map[string]string{})
	if err != nil {
		return err
	}
	return b.Bucket(format.CollMetaBucket).Put(format.IndexVersionsKey, raw)
}

// checkRebuild returns an error wrapping errCollectionDamaged if the
// collection b's copies do not mirror its object tree and versions: a copy
// of each, and no other, and each copy's keys before its tree's. Copies
// recorded in meta but missing lost the records a fold merged. Reads would
// otherwise miss them. Copies that meta does not record, or whose
// generation the journal lacks, are the journal's damage (loadJournal).
func checkRebuild(b *bolt.Bucket) error {
	rb := b.Bucket(format.RebuildBucket)
	if rb == nil {
		if b.Bucket(format.CollMetaBucket).Get(format.RebuildKey) != nil {
			return damagedError("the copies of its trees that a fold in progress wrote are missing")
		}
		return nil
	}
	for _, name := range rebuiltTrees {
		if rb.Get(name) != nil {
			return damagedError("a plain value stands where the rebuilt %q bucket belongs", name)
		}
		t := format.CollectionTree(b, name)
		if (t.Rebuilt() == nil) != (t.Live() == nil) {
			return damagedError("its fold in progress has no copy of %q, or a copy of none", name)
		}
		if !t.CheckOrder() {
			return damagedError("the copy of %q a fold wrote overlaps what is left of it", name)
		}
	}
	return nil
}
