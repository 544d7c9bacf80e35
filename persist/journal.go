package persist

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/vmihailenco/msgpack/v5"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/boltinformer/boltinformer/internal/format"
)

// A group commit appends its changes to the collection's journal bucket
// instead of writing them into the object and index trees. The journal's
// keys are sequential, so the appends fill pages. In the trees, each
// scattered change would rewrite a whole leaf. The journal is folded into
// the trees in bulk, and each leaf is rewritten once for all the changes it
// gathered. internal/format/journal.go gives the layout, and
// docs/write-path.md the arithmetic.
//
// In memory, each generation in the file is a layer, journaled or folding.
// These are two of the five states of commit.go's table. The table says who
// changes them under which locks.
//
// The journal's layers hold each change's key, index values and place in
// the file, not its record. Reads take the record from the journal
// (changeRecordTx), as they take a tree record from the tree. So the
// journal adds a few hundred bytes of memory per key, not the records'
// bytes.
//
// A fold writes the trees afresh from the trees and a sealed generation, a
// chunk of entries per commit, in key order, and swaps the copies in with
// the last (fold.go). So each record is written about once per fold, and
// the file holds it about once while a fold runs.

// DefaultJournalShare is the share of a collection's record bytes its
// journal generation may hold before it is folded (see Options.JournalShare).
// A fold writes the trees whole, about the records' bytes once. So a share
// s adds about 1/s of a record to every change, beside the record the
// journal takes. The file holds the trees, the generation being folded and
// what the next one gathers meanwhile (foldPerAppended): about 1+9s/8 times
// the records. Smaller shares write more per change, and larger ones make
// the file larger. docs/write-path.md gives the arithmetic and measures.
const DefaultJournalShare = 1.0

// minJournalBytes is the journal a small collection may gather anyway. A
// fold of fewer bytes saves nothing worth the bookkeeping. Tests set their
// own limit, through Options.journalBytes.
const minJournalBytes = 1 << 20

// journalState is where the collection's journal stands. Guarded by
// db.commitMu (and set by load before the collection is shared).
type journalState struct {
	gens []uint64 // generations in the file, oldest first (at most 2)
	// ends holds the last sequence number of each generation of gens (0
	// for none). Appends take the newest's next.
	ends        []uint64
	activeBytes int64    // bytes appended to the generation commits append to
	foldKeys    []string // sorted keys of the folding layer; nil if none
	// treeBytes is the size of the records in the object tree, or -1 until
	// counted (once, by the first commit that needs it).
	treeBytes int64
}

// active reports the generation commits append to, if any. That is the
// newest, unless it is the one being folded.
func (j *journalState) active() (uint64, bool) {
	if len(j.gens) == 0 || (len(j.gens) == 1 && j.foldKeys != nil) {
		return 0, false
	}
	return j.gens[len(j.gens)-1], true
}

// loadJournal reads the journal into the journaled and folding layers. It
// loads keys, index values and where each record is. Records are read from
// the file when needed, and objects are decoded when first read. A journal
// that does not match the record of it in meta (format.JournalKey) lost
// generations or entries: it is an error wrapping errJournalUnreadable.
func (c *Collection) loadJournal(b *bolt.Bucket) error {
	c.journaled, c.folding = nil, nil
	c.journal = journalState{treeBytes: -1}
	if raw := b.Bucket(format.CollMetaBucket).Get(format.TreeBytesKey); raw != nil {
		if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil && n >= 0 {
			c.journal.treeBytes = n
		}
	}
	layers := map[uint64]*layer{}
	j, err := format.WalkJournal(b, func(gen uint64, e format.JournalEntry) error {
		l := layers[gen]
		if l == nil {
			l = newLayer()
			layers[gen] = l
		}
		l.put(e.Key, &change{deleted: e.Deleted, indexes: e.Indexes, gen: gen, seq: e.Seq, uid: e.UID, rv: e.ResourceVersion})
		return nil
	})
	if err == nil {
		err = checkJournalRecord(b, j)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", errJournalUnreadable, err)
	}
	c.journal.gens = j.Generations
	for _, n := range j.Entries {
		c.journal.ends = append(c.journal.ends, uint64(n)) // entries run from 1 (WalkJournal)
	}
	if !holdsObjects(b) {
		c.journal.treeBytes = 0
	}
	layer := func(i int) *layer {
		if l := layers[j.Generations[i]]; l != nil {
			return l
		}
		return newLayer() // an empty generation
	}
	// The oldest generation is folding if a newer one follows it, or if a
	// fold of it is recorded: copies being written (format.RebuildBucket),
	// or a schema-3 fold's last key folded (format.FoldedKey).
	folding := len(j.Generations) == 2 || j.Folded != nil
	if b.Bucket(format.RebuildBucket) != nil {
		gen, err := format.ParseJournalSeq(b.Bucket(format.CollMetaBucket).Get(format.RebuildKey))
		if err == nil && (len(j.Generations) == 0 || j.Generations[0] != gen) {
			err = fmt.Errorf("%w: the trees are being rebuilt from journal generation %d, which the journal (%v) does not begin with", ErrCorruptRecord, gen, j.Generations)
		}
		if err != nil {
			return fmt.Errorf("%w: %w", errJournalUnreadable, err)
		}
		folding = true
	}
	switch {
	case len(j.Generations) == 2:
		c.folding, c.journaled = layer(0), layer(1)
		c.journal.activeBytes = j.Bytes[1]
	case len(j.Generations) == 1 && folding:
		c.folding = layer(0)
	case len(j.Generations) == 1:
		c.journaled = layer(0)
		c.journal.activeBytes = j.Bytes[0]
	}
	if c.folding != nil {
		c.journal.foldKeys = sortedKeys(c.folding.changes)
		if j.Folded != nil && c.folding.changes[string(j.Folded)] == nil {
			// A schema-3 fold records the last key it moved, a key of
			// the folding generation. This build folds the generation
			// afresh, but another key says the journal is not as that
			// fold left it.
			return fmt.Errorf("%w: %w: the journal's last folded key %q is not in generation %d", errJournalUnreadable, ErrCorruptRecord, j.Folded, j.Generations[0])
		}
	}
	return nil
}

// checkJournalRecord compares the journal j found in the collection b with
// the record of it in meta. A collection last written before the record
// was kept has none, and its journal is taken as found. A journal may hold
// more than its record (see journalHolds), never less.
func checkJournalRecord(b *bolt.Bucket, j format.Journal) error {
	raw := b.Bucket(format.CollMetaBucket).Get(format.JournalKey)
	if raw == nil {
		return nil
	}
	want, err := format.ParseJournalRecord(raw)
	if err != nil {
		return err
	}
	got := make([]format.JournalGeneration, len(j.Generations))
	for i, gen := range j.Generations {
		got[i] = format.JournalGeneration{Gen: gen, Last: uint64(j.Entries[i])}
	}
	if !journalHolds(got, want) {
		return fmt.Errorf("%w: the journal holds generations %s, but the last commit left %s: journaled changes are lost", ErrCorruptRecord, describeGenerations(got), describeGenerations(want))
	}
	return nil
}

// journalHolds reports whether the journal got holds every entry the
// record want names. Older builds of schema 3 append to the journal and
// leave the record as they found it. Their appends extend the record's
// newest generation, or start newer generations after it. So the record
// must be a prefix of the journal: each older generation equal, and the
// newest one no shorter. A generation missing, shorter or renumbered is
// damage. An older build that folded the record's oldest generation away
// leaves a journal that looks the same. It is set aside too, and costs a
// list, because the record cannot tell that fold from a loss.
func journalHolds(got, want []format.JournalGeneration) bool {
	if len(got) < len(want) {
		return false
	}
	for i, w := range want {
		g := got[i]
		switch {
		case g.Gen != w.Gen:
			return false
		case i < len(want)-1 && g.Last != w.Last:
			return false // a sealed generation takes no appends
		case g.Last < w.Last:
			return false
		}
	}
	return true
}

// describeGenerations says which generations and entries gens holds.
func describeGenerations(gens []format.JournalGeneration) string {
	if len(gens) == 0 {
		return "none"
	}
	parts := make([]string, len(gens))
	for i, g := range gens {
		if g.Last == 0 {
			parts[i] = fmt.Sprintf("%d (no entries)", g.Gen)
		} else {
			parts[i] = fmt.Sprintf("%d (entries 1 to %d)", g.Gen, g.Last)
		}
	}
	return strings.Join(parts, " and ")
}

// writeJournalRecord records, in the meta bucket of the collection b, the
// generations j says the journal holds. Every transaction that changes the
// journal calls it, so the record always describes the journal beside it.
func writeJournalRecord(b *bolt.Bucket, j *journalState) error {
	gens := make([]format.JournalGeneration, len(j.gens))
	for i, gen := range j.gens {
		gens[i] = format.JournalGeneration{Gen: gen, Last: j.ends[i]}
	}
	return b.Bucket(format.CollMetaBucket).Put(format.JournalKey, format.AppendJournalRecord([]byte{}, gens))
}

// errJournalUnreadable marks a journal that cannot be read at open. The
// collection's state cannot be told without it. But the trees still hold a
// state every object really had. So DB.Collection sets the journal aside
// (setAsideJournalTx), and the owner lists, as for any record that cannot
// be read back.
var errJournalUnreadable = errors.New("the collection's journal cannot be read")

// setAsideJournalTx deletes the collection's journal and sets the
// must-list mark, in one transaction. The trees stay, without the changes
// the journal held, until a list is applied. The checkpoints'
// acknowledgements of objects only the journal held become tombstones in
// the same transaction (tombstoneUnstoredAcksTx).
//
// A fold's copies are folded back first (foldBackForSetAsideTx). canBuild
// says whether the owner gave IndexValues, so that DB.Collection can build
// indexes from the records.
func (c *Collection) setAsideJournalTx(tx *bolt.Tx, canBuild bool) error {
	b := c.bucket(tx)
	if b == nil {
		return ErrNoCollection
	}
	setAside, err := c.foldBackForSetAsideTx(b, canBuild)
	if err != nil {
		return err
	}
	last := func() map[string][]byte {
		records := readableJournalRecords(b)
		for k, rec := range setAside {
			if _, ok := records[k]; !ok {
				records[k] = rec
			}
		}
		return records
	}
	if err := c.tombstoneUnstoredAcksTx(b, last); err != nil {
		return err
	}
	if err := b.DeleteBucket(format.JournalBucket); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
		return err
	}
	if err := writeJournalRecord(b, &journalState{}); err != nil {
		return err
	}
	meta := b.Bucket(format.CollMetaBucket)
	if err := meta.Delete(format.TreeBytesKey); err != nil { // counted again
		return err
	}
	return writeMustList(meta, true)
}

// tombstoneUnstoredAcksTx turns each checkpoint's acknowledgements of keys
// the object tree lacks into tombstones, as a commit deleting them would.
// The set-aside drops those objects. The list that follows lacks them, and
// so would tell no consumer of them. A tombstone keeps the newest state of
// its key that last, called once if needed, still holds (see Deleted).
func (c *Collection) tombstoneUnstoredAcksTx(b *bolt.Bucket, last func() map[string][]byte) error {
	cb := b.Bucket(format.CheckpointsBucket)
	if cb == nil {
		return nil
	}
	var names [][]byte
	if err := cb.ForEachBucket(func(name []byte) error {
		names = append(names, bytes.Clone(name))
		return nil
	}); err != nil {
		return err
	}
	objects := objectsTree(b)
	var records map[string][]byte // read once, when first needed
	for _, name := range names {
		nb := cb.Bucket(name)
		var gone [][]byte
		if err := nb.ForEach(func(k, _ []byte) error {
			if objects.Get(k) == nil {
				gone = append(gone, bytes.Clone(k))
			}
			return nil
		}); err != nil {
			return err
		}
		if len(gone) == 0 {
			continue
		}
		if records == nil {
			records = last()
		}
		tb, err := b.CreateBucketIfNotExists(format.TombstonesBucket)
		if err != nil {
			return err
		}
		nt, err := tb.CreateBucketIfNotExists(name)
		if err != nil {
			return err
		}
		for _, k := range gone {
			// Damage may have left a bucket where an entry belongs (see
			// putValue). It is replaced, as an entry that does not decode.
			if err := deleteValue(nb, k); err != nil {
				return err
			}
			if nt.Get(k) != nil {
				continue // an earlier deletion of the key is still to be told
			}
			if err := putValue(nt, k, c.tombstoneValue(string(k), records[string(k)], "")); err != nil {
				return err
			}
		}
	}
	return nil
}

// readableJournalRecords returns the record of each key's newest journal
// entry that can still be read, and nil for a deletion. It skips damaged
// entries. The result is what a set-aside can still say of the states it
// drops.
func readableJournalRecords(b *bolt.Bucket) map[string][]byte {
	out := map[string][]byte{}
	jb := b.Bucket(format.JournalBucket)
	if jb == nil {
		return out
	}
	// Generations and their entries come oldest first.
	_ = jb.ForEachBucket(func(gen []byte) error {
		return jb.Bucket(gen).ForEach(func(_, raw []byte) error {
			if e, err := format.DecodeJournalEntry(raw); err == nil {
				out[e.Key] = bytes.Clone(e.Record)
			}
			return nil
		})
	})
	return out
}

// journalChangeLocked returns key's newest change in the journal, or nil.
// Called with mu held, or by the commit goroutine.
func (c *Collection) journalChangeLocked(key string) *change {
	if c.journaled != nil {
		if ch := c.journaled.changes[key]; ch != nil {
			return ch
		}
	}
	if c.folding != nil {
		return c.folding.changes[key]
	}
	return nil
}

// dropJournalLayers forgets the journal after the file's was deleted
// with every object (treeBytes 0) or folded into the trees (the count the
// fold kept). Called with mu held, or before the collection is shared.
func (c *Collection) dropJournalLayers(treeBytes int64) {
	c.journaled, c.folding = nil, nil
	c.journal = journalState{treeBytes: treeBytes}
}

// foldJournalForBuild folds the whole journal into the trees before an
// index is built from the object tree. The journal's entries carry no
// values for the new index. The dormant indexes go, because the trees
// change under them. It returns the tree's record bytes after the fold. The
// caller drops the journal's layers once tx commits.
func (c *Collection) foldJournalForBuild(b *bolt.Bucket) (int64, error) {
	j := c.journal
	if !c.hasJournal() {
		return j.treeBytes, nil
	}
	c.dormant = nil
	err := c.foldAllTx(b, &j, nil)
	return j.treeBytes, err
}

// hasJournal reports whether the journal holds anything.
func (c *Collection) hasJournal() bool { return c.journaled != nil || c.folding != nil }

// changeRecordTx returns the record of ch, a change to key that is not a
// deletion. That is ch's own record. For a change in the journal, it is the
// journal entry's record in b's transaction, aliasing the transaction's
// memory. A commit ahead of the layers may have folded an entry's
// generation away. The entry is then in the trees.
func (c *Collection) changeRecordTx(b *bolt.Bucket, key string, ch *change) ([]byte, error) {
	if ch.record != nil || ch.seq == 0 {
		return ch.record, nil
	}
	rec, ok, err := format.JournalRecord(b, ch.gen, ch.seq)
	if err != nil {
		return nil, fmt.Errorf("collection %q key %q: %w", c.name, key, err)
	}
	if !ok {
		if rec = objectsTree(b).Get([]byte(key)); rec == nil {
			return nil, fmt.Errorf("%w: collection %q key %q: journal entry %d/%d is neither in the journal nor folded", ErrCorruptRecord, c.name, key, ch.gen, ch.seq)
		}
	}
	return rec, nil
}

// changeRecordLocked is changeRecordTx in a read transaction of its own.
// The record is copied out of it. Called with mu held.
func (c *Collection) changeRecordLocked(key string, ch *change) ([]byte, error) {
	if ch.record != nil || ch.seq == 0 {
		return ch.record, nil
	}
	var out []byte
	err := c.view(func(tx *bolt.Tx) error {
		b := c.bucket(tx)
		if b == nil {
			return ErrNoCollection
		}
		rec, err := c.changeRecordTx(b, key, ch)
		out = bytes.Clone(rec)
		return err
	})
	return out, err
}

// changeAfter returns key's newest change not in the trees once l is
// committed. l may be nil for none. The change is l's, else the journal's,
// else nil.
func (c *Collection) changeAfter(l *layer, key string) *change {
	if l != nil {
		if ch := l.changes[key]; ch != nil {
			return ch
		}
	}
	return c.journalChangeLocked(key)
}

// appendJournal appends l's changes, in key order, to the active
// generation, creating it if there is none. It returns the generation,
// each key's sequence number and the bytes appended.
func (c *Collection) appendJournal(b *bolt.Bucket, j *journalState, keys []string, l *layer) (uint64, []uint64, int64, error) {
	jb, err := b.CreateBucketIfNotExists(format.JournalBucket)
	if err != nil {
		return 0, nil, 0, err
	}
	gen, ok := j.active()
	if !ok {
		gen = 1
		if n := len(j.gens); n > 0 {
			gen = j.gens[n-1] + 1
		}
		j.gens = append(j.gens, gen)
		j.ends = append(j.ends, 0)
		j.activeBytes = 0
	}
	gb, err := jb.CreateBucketIfNotExists(format.JournalSeq(gen))
	if err != nil {
		return 0, nil, 0, err
	}
	// The journal only appends, so fill the pages.
	gb.FillPercent = 1.0
	seqs := make([]uint64, len(keys))
	var appended int64
	last := &j.ends[len(j.ends)-1]
	for i, key := range keys {
		ch := l.changes[key]
		// Use a new buffer each time, because bbolt keeps the slice until
		// the commit.
		buf, err := format.AppendJournalEntry(make([]byte, 0, len(key)+len(ch.record)+128), format.JournalEntry{Key: key, Deleted: ch.deleted, Indexes: ch.indexes, Record: ch.record, UID: ch.uid, ResourceVersion: ch.rv})
		if err != nil {
			return 0, nil, 0, err
		}
		seq := *last + 1
		if err := gb.Put(format.JournalSeq(seq), buf); err != nil {
			return 0, nil, 0, fmt.Errorf("journal entry of %q: %w", key, err)
		}
		seqs[i] = seq
		*last = seq
		appended += int64(len(buf))
	}
	j.activeBytes += appended
	return gen, seqs, appended, writeJournalRecord(b, j)
}

// journalLimit returns how many bytes the active generation may hold
// before it is sealed and folded.
func (c *Collection) journalLimit(b *bolt.Bucket, j *journalState) (int64, error) {
	if j.treeBytes < 0 {
		var n int64
		if err := objectsTree(b).ForEach(func(_, v []byte) error { n += int64(len(v)); return nil }); err != nil {
			return 0, err
		}
		j.treeBytes = n
		if err := writeTreeBytes(b, n); err != nil {
			return 0, err
		}
	}
	if n := c.db.opts.journalBytes; n > 0 {
		return n, nil
	}
	share := c.db.opts.JournalShare
	if share == 0 {
		share = DefaultJournalShare
	}
	return max(minJournalBytes, int64(share*float64(j.treeBytes))), nil
}

// foldAllTx writes the whole journal, then l (if not nil), into the trees
// and deletes the journal. It changes only the file and j. The caller drops
// the journal's layers once tx commits.
func (c *Collection) foldAllTx(b *bolt.Bucket, j *journalState, l *layer) error {
	// The journal's changes are written below over what the copies held.
	if _, err := c.abandonRebuildTx(b); err != nil {
		return err
	}
	newest := func(key string) *change { return c.changeAfter(l, key) }
	all := map[string]struct{}{}
	for _, src := range []*layer{c.folding, c.journaled, l} {
		if src == nil {
			continue
		}
		for key := range src.changes {
			if src == l && l.aheadOf(key) {
				continue // in the trees already (writeahead.go)
			}
			all[key] = struct{}{}
		}
	}
	if len(all) > 0 {
		if err := c.writeTrees(b, j, sortedKeys(all), newest); err != nil {
			return err
		}
	}
	if b.Bucket(format.JournalBucket) != nil {
		if err := b.DeleteBucket(format.JournalBucket); err != nil {
			return err
		}
	}
	*j = journalState{treeBytes: j.treeBytes}
	return writeJournalRecord(b, j)
}

// writeTrees writes the changes to sorted keys into the object tree, the
// versions and the index buckets.
func (c *Collection) writeTrees(b *bolt.Bucket, j *journalState, keys []string, changeOf func(string) *change) error {
	if b.Bucket(format.RebuildBucket) != nil {
		// Writes in place would go to the part a fold has not merged.
		return fmt.Errorf("writing the trees while a fold rebuilds them (fold back first: abandonRebuildTx)")
	}
	objects := b.Bucket(format.ObjectsBucket)
	versions := b.Bucket(format.VersionsBucket) // nil only for a read-only open
	if versions != nil && appending(versions, keys) {
		versions.FillPercent = 1.0
	}
	idx := b.Bucket(format.IndexesBucket)
	owed, err := c.oweByValueTx(b)
	if err != nil {
		return err
	}
	type ibuckets struct {
		name           string
		byValue, byKey *bolt.Bucket // byValue is nil while owed
	}
	var indexes []ibuckets
	for name := range c.indexes {
		ib := idx.Bucket([]byte(name))
		if ib == nil {
			return fmt.Errorf("%w: index bucket %q missing", ErrCorruptRecord, name)
		}
		t := ibuckets{name: name, byKey: ib.Bucket(format.ByKeyBucket)}
		if !owed {
			t.byValue = ib.Bucket(format.ByValueBucket)
		}
		indexes = append(indexes, t)
	}
	if appending(objects, keys) {
		// Every key goes after the stored ones, as when a list is loaded
		// in key order. So fill the pages instead of leaving them half
		// empty for inserts that will not come. byKey has the same keys.
		// byValue's entries may sort anywhere, so each index is checked.
		objects.FillPercent = 1.0
		for _, ib := range indexes {
			ib.byKey.FillPercent = 1.0
			if ib.byValue != nil && appendingEntries(ib.byValue, ib.name, keys, changeOf) {
				ib.byValue.FillPercent = 1.0
			}
		}
	}
	for _, key := range keys {
		ch := changeOf(key)
		kb := []byte(key)
		if j.treeBytes >= 0 {
			j.treeBytes -= int64(len(objects.Get(kb)))
		}
		var err error
		if ch.deleted {
			err = deleteValue(objects, kb)
		} else {
			var rec []byte
			if rec, err = c.changeRecordTx(b, key, ch); err != nil {
				return err
			}
			if ch.record == nil {
				// The record comes from the journal, which this
				// transaction may delete. bbolt keeps what Put is given
				// until the commit.
				rec = bytes.Clone(rec)
			}
			err = putValue(objects, kb, rec)
			if j.treeBytes >= 0 {
				j.treeBytes += int64(len(rec))
			}
			if err == nil && versions != nil {
				err = c.putVersion(versions, key, ch, rec)
			}
		}
		if err == nil && ch.deleted && versions != nil {
			err = versions.Delete(kb)
		}
		if err != nil {
			return fmt.Errorf("key %q: %w", key, err)
		}
		for _, ib := range indexes {
			var old []string
			if raw := ib.byKey.Get(kb); raw != nil {
				if err := msgpack.Unmarshal(raw, &old); err != nil {
					return fmt.Errorf("%w: index %q of %q: %v", ErrCorruptRecord, ib.name, key, err)
				}
			}
			var values []string
			if !ch.deleted {
				values = ch.indexes[ib.name]
			}
			if err := writeIndexValues(ib.byValue, ib.byKey, key, old, values); err != nil {
				return fmt.Errorf("index %q of %q: %w", ib.name, key, err)
			}
		}
	}
	if j.treeBytes >= 0 {
		if err := writeTreeBytes(b, j.treeBytes); err != nil {
			return err
		}
	}
	return c.dropUnusedIndexes(b)
}

// appending reports whether every key of sorted keys sorts after b's last
// key, so that writing them only appends. bbolt splits a page it overfills
// at FillPercent of a page. That is half by default, which suits random
// inserts. Pages that only receive appends are better filled completely.
func appending(b *bolt.Bucket, keys []string) bool {
	if len(keys) == 0 {
		return false
	}
	last, _ := b.Cursor().Last()
	return last == nil || keys[0] > string(last)
}

// appendingEntries reports whether every byValue entry the changes to keys
// add to the named index sorts after the bucket's last entry.
func appendingEntries(byValue *bolt.Bucket, index string, keys []string, changeOf func(string) *change) bool {
	last, _ := byValue.Cursor().Last()
	for _, key := range keys {
		for _, v := range changeOf(key).indexes[index] {
			if k, _ := format.IndexEntry(v, key); last != nil && bytes.Compare(k, last) <= 0 {
				return false
			}
		}
	}
	return true
}

// writeTreeBytes records the object tree's record bytes in the meta
// bucket of the collection b.
func writeTreeBytes(b *bolt.Bucket, n int64) error {
	return b.Bucket(format.CollMetaBucket).Put(format.TreeBytesKey, strconv.AppendInt(nil, n, 10))
}
