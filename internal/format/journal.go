package format

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
	bolt "go.etcd.io/bbolt"
)

// The journal (schema 2) holds changes that are committed but not yet
// folded into ObjectsBucket and the index buckets. A group commit appends
// each change under the next sequence number, so a commit fills pages at
// the journal's end instead of rewriting a leaf of the object tree per
// changed key; the changes reach the trees later, in bulk (a fold). Since
// schema 4 a fold writes the object tree and versions afresh (tree.go).
//
// Below a collection's bucket:
//
//	journal/  <generation>/  <sequence> -> JournalEntry
//	          folded         -> the last object key a schema-3 fold folded
//	meta/journal             -> each generation and its last sequence number
//
// Generations and sequence numbers are 8-byte big-endian integers. There
// are at most two generations. The collection's state is the object and
// index trees, then every entry of the older generation in sequence order,
// then every entry of the newer one: a later entry for a key replaces all
// earlier state of that key. The older generation is being folded when a
// newer one follows it, when RebuildKey names it, or when FoldedKey is set.
// A schema-3 fold wrote the generation into the trees in place, a chunk of
// keys per commit, and FoldedKey held the last key (in key order) whose
// entry in it had reached the trees; folding an entry again is harmless,
// since the trees then hold what the entry says. Schema 4 folds such a
// generation afresh, and deletes FoldedKey with it. The folded generation
// is deleted in the transaction that ends its fold. JournalKey records, in
// the same transactions, what the journal holds, so that a lost part
// shows.
var (
	JournalBucket = []byte("journal")
	FoldedKey     = []byte("folded")
)

// JournalEntry is one change in the journal.
type JournalEntry struct {
	Key     string
	Deleted bool
	// Indexes holds the object's values for the collection's indexes, as
	// the index buckets would (so that the journal can be read without the
	// index functions).
	Indexes map[string][]string
	// Record is the object's record (see record.go); nil when Deleted.
	Record []byte
	// UID and ResourceVersion identify the object (schema 3; empty in an
	// entry a schema-2 writer appended, and in a deletion).
	UID, ResourceVersion string
	// Seq is the entry's sequence number in its generation, as WalkJournal
	// found it (not part of the encoding).
	Seq uint64
}

const (
	journalDeleted  = 1
	journalIdentity = 2 // the UID and resourceVersion follow the key
)

// AppendJournalEntry appends e's encoding to dst: a flags byte, the key,
// the UID and resourceVersion (if any: flag journalIdentity) and the
// msgpack of the index values, each preceded by its length as a uvarint,
// then the record to the end.
func AppendJournalEntry(dst []byte, e JournalEntry) ([]byte, error) {
	var flags byte
	if e.Deleted {
		flags |= journalDeleted
	}
	identity := e.UID != "" || e.ResourceVersion != ""
	if identity {
		flags |= journalIdentity
	}
	var idx []byte
	if len(e.Indexes) > 0 {
		var err error
		if idx, err = msgpack.Marshal(e.Indexes); err != nil {
			return nil, fmt.Errorf("journal entry of %q: index values: %w", e.Key, err)
		}
	}
	dst = append(dst, flags)
	dst = binary.AppendUvarint(dst, uint64(len(e.Key)))
	dst = append(dst, e.Key...)
	if identity {
		dst = binary.AppendUvarint(dst, uint64(len(e.UID)))
		dst = append(dst, e.UID...)
		dst = binary.AppendUvarint(dst, uint64(len(e.ResourceVersion)))
		dst = append(dst, e.ResourceVersion...)
	}
	dst = binary.AppendUvarint(dst, uint64(len(idx)))
	dst = append(dst, idx...)
	return append(dst, e.Record...), nil
}

// DecodeJournalEntry decodes an entry. Key and Record alias raw.
func DecodeJournalEntry(raw []byte) (JournalEntry, error) {
	var e JournalEntry
	bad := func(what string) (JournalEntry, error) {
		return JournalEntry{}, fmt.Errorf("%w: journal entry: %s", ErrCorruptRecord, what)
	}
	if len(raw) < 1 {
		return bad("empty")
	}
	flags := raw[0]
	if flags&^(journalDeleted|journalIdentity) != 0 {
		return bad(fmt.Sprintf("unknown flags %#x", flags))
	}
	e.Deleted = flags&journalDeleted != 0
	rest := raw[1:]
	n, w := binary.Uvarint(rest)
	if w <= 0 || uint64(len(rest)-w) < n {
		return bad("key length")
	}
	e.Key = string(rest[w : w+int(n)])
	rest = rest[w+int(n):]
	if flags&journalIdentity != 0 {
		for _, field := range []*string{&e.UID, &e.ResourceVersion} {
			n, w = binary.Uvarint(rest)
			if w <= 0 || uint64(len(rest)-w) < n {
				return bad(fmt.Sprintf("identity of %q", e.Key))
			}
			*field = string(rest[w : w+int(n)])
			rest = rest[w+int(n):]
		}
	}
	n, w = binary.Uvarint(rest)
	if w <= 0 || uint64(len(rest)-w) < n {
		return bad(fmt.Sprintf("index values length of %q", e.Key))
	}
	if n > 0 {
		if err := msgpack.Unmarshal(rest[w:w+int(n)], &e.Indexes); err != nil {
			return bad(fmt.Sprintf("index values of %q: %v", e.Key, err))
		}
	}
	rest = rest[w+int(n):]
	if e.Deleted {
		if len(rest) != 0 {
			return bad(fmt.Sprintf("deletion of %q carries a record", e.Key))
		}
	} else {
		if len(rest) == 0 {
			return bad(fmt.Sprintf("%q has no record", e.Key))
		}
		e.Record = rest
	}
	return e, nil
}

// JournalSeq encodes a generation or sequence number as a bucket key.
func JournalSeq(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }

// ParseJournalSeq decodes a key made by JournalSeq.
func ParseJournalSeq(k []byte) (uint64, error) {
	if len(k) != 8 {
		return 0, fmt.Errorf("%w: journal key %x is not 8 bytes", ErrCorruptRecord, k)
	}
	return binary.BigEndian.Uint64(k), nil
}

// Journal describes a collection's journal as WalkJournal found it.
type Journal struct {
	// Generations lists the generations present, oldest first (at most two).
	Generations []uint64
	// Folded is FoldedKey's value: nil unless a schema-3 fold of the
	// oldest generation is in progress.
	Folded []byte
	// Entries and Bytes count each generation's entries and their encoded
	// size, in Generations' order.
	Entries []int
	Bytes   []int64
}

// WalkJournal calls fn for every journal entry of the collection bucket
// coll, oldest first (in the order they apply), until fn returns an error,
// which it returns. The entry aliases the transaction's memory. A
// collection without a journal (schema 1) has none.
//
// A journal that is not as commits write it is an error wrapping
// ErrCorruptRecord: a plain value where a generation's bucket belongs, a
// bucket where an entry or FoldedKey belongs, a key that is no generation
// or sequence number, or a generation whose sequence numbers do not run
// from 1 without a gap. Commits append each generation's entries from 1 on
// and delete only whole generations, so a gap is a lost entry.
func WalkJournal(coll *bolt.Bucket, fn func(gen uint64, e JournalEntry) error) (Journal, error) {
	var j Journal
	jb := coll.Bucket(JournalBucket)
	if jb == nil {
		return j, nil
	}
	err := jb.ForEach(func(k, v []byte) error {
		if bytes.Equal(k, FoldedKey) {
			if v == nil {
				return fmt.Errorf("%w: journal: a bucket stands where the last folded key belongs", ErrCorruptRecord)
			}
			j.Folded = append([]byte(nil), v...)
			return nil
		}
		gen, err := ParseJournalSeq(k)
		if err != nil {
			return err
		}
		if v != nil {
			return fmt.Errorf("%w: journal: a plain value stands where generation %d's bucket belongs", ErrCorruptRecord, gen)
		}
		j.Generations = append(j.Generations, gen)
		j.Entries = append(j.Entries, 0)
		j.Bytes = append(j.Bytes, 0)
		i := len(j.Generations) - 1
		return jb.Bucket(k).ForEach(func(seqKey, raw []byte) error {
			seq, err := ParseJournalSeq(seqKey)
			if err != nil {
				return fmt.Errorf("generation %d: %w", gen, err)
			}
			if want := uint64(j.Entries[i]) + 1; seq != want {
				return fmt.Errorf("%w: journal generation %d lacks entries %d to %d", ErrCorruptRecord, gen, want, seq-1)
			}
			if raw == nil {
				return fmt.Errorf("%w: journal generation %d: a bucket stands where entry %d belongs", ErrCorruptRecord, gen, seq)
			}
			e, err := DecodeJournalEntry(raw)
			if err != nil {
				return fmt.Errorf("generation %d: %w", gen, err)
			}
			e.Seq = seq
			j.Entries[i]++
			j.Bytes[i] += int64(len(raw))
			if fn == nil {
				return nil
			}
			return fn(gen, e)
		})
	})
	if err == nil && len(j.Generations) > 2 {
		err = fmt.Errorf("%w: journal has %d generations, at most 2 are written", ErrCorruptRecord, len(j.Generations))
	}
	if err == nil && j.Folded != nil && len(j.Generations) == 0 {
		err = fmt.Errorf("%w: journal records a fold in progress, but holds no generation", ErrCorruptRecord)
	}
	return j, err
}

// JournalKey, in CollMetaBucket, records the generations the journal holds
// and the last sequence number of each (AppendJournalRecord). Every
// transaction that changes the journal rewrites it. So a journal that lost
// a generation or its newest entries no longer matches it. An empty value
// records that there is no journal. A collection last written by a build
// before it has none; its journal is then taken as it is.
var JournalKey = []byte("journal")

// JournalGeneration is one generation of a journal: its number and its
// last sequence number (0 for none).
type JournalGeneration struct {
	Gen, Last uint64
}

// AppendJournalRecord appends the encoding of gens to dst: 16 bytes per
// generation, its number and last sequence number, big-endian.
func AppendJournalRecord(dst []byte, gens []JournalGeneration) []byte {
	for _, g := range gens {
		dst = binary.BigEndian.AppendUint64(dst, g.Gen)
		dst = binary.BigEndian.AppendUint64(dst, g.Last)
	}
	return dst
}

// ParseJournalRecord decodes a value made by AppendJournalRecord.
func ParseJournalRecord(raw []byte) ([]JournalGeneration, error) {
	if len(raw)%16 != 0 || len(raw) > 16*2 {
		return nil, fmt.Errorf("%w: the journal's record (%x) is not one or two generations", ErrCorruptRecord, raw)
	}
	var out []JournalGeneration
	for ; len(raw) > 0; raw = raw[16:] {
		out = append(out, JournalGeneration{Gen: binary.BigEndian.Uint64(raw), Last: binary.BigEndian.Uint64(raw[8:])})
	}
	return out, nil
}

// JournalRecord returns the record of the entry at gen/seq of the
// collection bucket coll, aliasing the transaction's memory; ok is false if
// the entry is not there (its generation was folded and deleted).
func JournalRecord(coll *bolt.Bucket, gen, seq uint64) (rec []byte, ok bool, err error) {
	jb := coll.Bucket(JournalBucket)
	if jb == nil {
		return nil, false, nil
	}
	gb := jb.Bucket(JournalSeq(gen))
	if gb == nil {
		return nil, false, nil
	}
	raw := gb.Get(JournalSeq(seq))
	if raw == nil {
		return nil, false, nil
	}
	e, err := DecodeJournalEntry(raw)
	if err != nil {
		return nil, false, fmt.Errorf("generation %d entry %d: %w", gen, seq, err)
	}
	return e.Record, true, nil
}
