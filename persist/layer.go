package persist

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
)

// Op is one change to a collection.
type Op struct {
	// Key is the store key (namespace/name). An object's key must be 1 to
	// 4096 bytes long (format.MaxObjectKey), or Apply refuses it with
	// ErrUnencodable. A Kubernetes namespace/name key is at most 317 bytes.
	Key string
	// Object is the new state. It is nil with Delete.
	Object runtime.Object
	// Indexes holds the object's values for every index of the collection.
	// An index missing from the map has no values for this object. Values
	// may be of any length. One too long for a bbolt key is stored under
	// its hash (internal/format/index.go).
	Indexes map[string][]string
	// Delete removes Key.
	Delete bool
	// Payload, if set, is Object's protobuf message as the server encoded
	// it. Object was decoded from it, and is unchanged since. The record
	// stores it instead of marshalling Object. Ignored for an object the codec
	// does not store as protobuf.
	Payload []byte
	// DeletedAt, for a Delete, is the resourceVersion of the object as
	// deleted, if known. A watch's DELETED event carries it. A consumer's
	// OnDelete is given this version. A checkpoint's acknowledgement at it
	// settles the deletion (see Checkpoint.Ack). It is empty for a deletion
	// found by a relist.
	DeletedAt string
}

// change is an Op after encoding, as held in a layer.
type change struct {
	// obj is nil when deleted, and may be nil in the journal's layers
	// (decoded when read).
	obj runtime.Object
	// record is nil when deleted, and once the change is in the journal.
	// gen and seq (seq > 0) then say where the file holds it. Reads take it
	// from there as they take the trees' records (changeRecordTx). So the
	// journal costs memory per key, not per record byte.
	record   []byte
	gen, seq uint64
	// uid and rv identify the object (see Versions). They are empty when
	// deleted, and in a journal entry written before schema 3.
	uid, rv string
	indexes map[string][]string
	deleted bool
	// deletedAt is Op.DeletedAt of a deletion.
	deletedAt string
	// replaced, for a deletion, is the record of the object it deleted
	// within the same layer. An object created and deleted between two
	// commits has no committed state. A checkpoint that acknowledged it
	// needs one for its tombstone.
	replaced []byte
}

// layer is a set of applied changes not in the trees. It holds the latest
// change per key and an index of those changes. It also holds the resource
// version, must-list mark and acknowledgements that came with them. A
// collection has up to four layers, one per state a change passes through
// before the trees. The states are pending, committing, journaled and
// folding (see the table in commit.go).
type layer struct {
	changes map[string]*change
	// byValue indexes the non-deleted changes, from index name to value to
	// keys.
	byValue map[string]map[string]map[string]struct{}
	rv      string
	rvSet   bool
	// mustList, if mustListSet, is written as the collection's must-list
	// mark with the layer (see mustlist.go).
	mustList, mustListSet bool
	// acks holds checkpoint acknowledgements, from checkpoint to key to rv.
	// clearedAcks names checkpoints cleared before those acks.
	acks        map[string]map[string]string
	clearedAcks map[string]bool
	// ackedDeletions marks acknowledgements of deletions this layer holds
	// (checkpoint -> key), made after the deletion was applied.
	ackedDeletions map[string]map[string]bool
	// seen stamps checkpoints as open at a time of the collection's in-use
	// clock (see Options.CheckpointRetention).
	seen map[string]time.Time
	// writtenAhead, in a committing layer, is the last key written into
	// the trees ahead of the commit's transaction (see writeahead.go). It
	// is empty if none.
	writtenAhead string
}

func newLayer() *layer {
	return &layer{changes: map[string]*change{}, byValue: map[string]map[string]map[string]struct{}{}}
}

func (l *layer) empty() bool {
	return len(l.changes) == 0 && !l.rvSet && !l.mustListSet && len(l.acks) == 0 && len(l.clearedAcks) == 0 && len(l.seen) == 0
}

// put records ch for key, replacing an earlier change to the same key.
func (l *layer) put(key string, ch *change) {
	if old := l.changes[key]; old != nil {
		l.unindex(key, old)
		if ch.deleted {
			if old.deleted {
				ch.replaced = old.replaced
			} else {
				ch.replaced = old.record
			}
		}
	}
	l.forgetAckedDeletions(key)
	l.changes[key] = ch
	if ch.deleted {
		return
	}
	for name, values := range ch.indexes {
		byValue := l.byValue[name]
		if byValue == nil {
			byValue = map[string]map[string]struct{}{}
			l.byValue[name] = byValue
		}
		for _, v := range values {
			keys := byValue[v]
			if keys == nil {
				keys = map[string]struct{}{}
				byValue[v] = keys
			}
			keys[key] = struct{}{}
		}
	}
}

func (l *layer) unindex(key string, ch *change) {
	for name, values := range ch.indexes {
		byValue := l.byValue[name]
		for _, v := range values {
			if keys := byValue[v]; keys != nil {
				delete(keys, key)
				if len(keys) == 0 {
					delete(byValue, v)
				}
			}
		}
	}
}

// absorb folds newer on top of l (used when a failed commit is retried
// together with what was applied since).
func (l *layer) absorb(newer *layer) {
	if len(newer.changes) > 0 {
		l.writtenAhead = "" // a key written ahead may have changed: write them all
	}
	for key, ch := range newer.changes {
		l.put(key, ch)
	}
	if newer.rvSet {
		l.rv, l.rvSet = newer.rv, true
	}
	if newer.mustListSet {
		l.mustList, l.mustListSet = newer.mustList, true
	}
	for name, t := range newer.seen {
		l.see(name, t)
	}
	l.absorbAcks(newer)
}

// A layer carries checkpoint stamps and acknowledgements. Checkpoint
// records them in the pending layer. writeAcks (commit.go) writes them with
// the layer's changes.

// see stamps the named checkpoint as open at t.
func (l *layer) see(name string, t time.Time) {
	if l.seen == nil {
		l.seen = map[string]time.Time{}
	}
	l.seen[name] = t
}

// ack records an acknowledgement in the layer. rv "" acknowledges the key's
// deletion, which drops its tombstone.
func (l *layer) ack(name, key, rv string) {
	if l.acks == nil {
		l.acks = map[string]map[string]string{}
	}
	m := l.acks[name]
	if m == nil {
		m = map[string]string{}
		l.acks[name] = m
	}
	m[key] = rv
	if ch := l.changes[key]; ch != nil && ch.deleted && (rv == "" || rv == ch.deletedAt) {
		// This acknowledges the deletion this layer holds, so its
		// tombstone need not be written. A later change to the key undoes this
		// (forgetAckedDeletions).
		if l.ackedDeletions == nil {
			l.ackedDeletions = map[string]map[string]bool{}
		}
		if l.ackedDeletions[name] == nil {
			l.ackedDeletions[name] = map[string]bool{}
		}
		l.ackedDeletions[name][key] = true
	}
}

// forgetAckedDeletions is called when the layer gets a new change to key. An
// acknowledgement of an earlier deletion does not cover what follows.
func (l *layer) forgetAckedDeletions(key string) {
	for _, m := range l.ackedDeletions {
		delete(m, key)
	}
}

// clearAcks records that the named checkpoint is cleared before the layer's
// later acknowledgements.
func (l *layer) clearAcks(name string) {
	if l.clearedAcks == nil {
		l.clearedAcks = map[string]bool{}
	}
	l.clearedAcks[name] = true
	delete(l.acks, name)
	delete(l.ackedDeletions, name)
}

// absorbAcks folds newer's acknowledgements on top of l's.
func (l *layer) absorbAcks(newer *layer) {
	for name := range newer.clearedAcks {
		l.clearAcks(name)
	}
	for name, m := range newer.acks {
		for key, rv := range m {
			l.ack(name, key, rv)
		}
	}
	for name, m := range newer.ackedDeletions {
		for key := range m {
			if l.ackedDeletions == nil {
				l.ackedDeletions = map[string]map[string]bool{}
			}
			if l.ackedDeletions[name] == nil {
				l.ackedDeletions[name] = map[string]bool{}
			}
			l.ackedDeletions[name][key] = true
		}
	}
}

// recordPool holds record buffers of committed layers (*[]byte) for Apply
// to encode into. On a busy collection, a record lives for one group commit.
// Recycling it spares the garbage collector most of the bytes a write
// allocates besides the object itself.
var recordPool sync.Pool

// recycledRecord returns a record buffer from the pool, or nil.
func recycledRecord() []byte {
	if p, ok := recordPool.Get().(*[]byte); ok {
		return *p
	}
	return nil
}

// recycleRecords gives l's record buffers to the pool. It is called only
// once l is committed and unreachable. Its records are then copied into the
// file's pages, and no reader holds the layer any more. Buffers far larger
// than a typical record are left to the garbage collector, not pinned by
// the pool. So are all but maxRecycledPerCommit of a commit's buffers. A
// watch stream commits a few hundred records at a time, and a burst of
// events up to DefaultBatchLimit. A list applied whole commits the whole
// collection at once. The pool would otherwise keep those buffers beside
// the decoded objects, because a sync.Pool frees only after two
// collections. That cost 570 MiB more private memory at 100,000 Pods.
func (l *layer) recycleRecords() {
	if l == nil {
		return
	}
	n := 0
	for _, ch := range l.changes {
		if n == maxRecycledPerCommit {
			return
		}
		if ch.record != nil && cap(ch.record) <= maxRecycledRecord {
			p := ch.record[:0]
			recordPool.Put(&p)
			ch.record = nil
			n++
		}
	}
}

// maxRecycledRecord is the largest record buffer recycledRecord hands out.
const maxRecycledRecord = 64 << 10

// maxRecycledPerCommit is how many record buffers one commit gives back.
// It is a commit's worth at the default batch limit. So the records of a
// burst reuse the buffers of the commit before. A cold start's paged list
// flushes a thousand objects at a time (cache's pagedFlushEvery).
const maxRecycledPerCommit = DefaultBatchLimit
