package simulation

import (
	"bytes"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/boltinformer/boltinformer/internal/format"
)

// Damage to a closed cache file, made through bbolt directly as a disk or a
// buggy writer would: the file stays a sound bbolt file, what it holds does
// not decode. persist must set such state aside and the informer relist.

func collBucket(tx *bolt.Tx) *bolt.Bucket {
	cb := tx.Bucket(format.CollectionsBucket)
	if cb == nil {
		return nil
	}
	return cb.Bucket([]byte(collection))
}

// damageJournal overwrites the collection's oldest journal entry with bytes
// that are no entry. It returns what it did ("" if there is no journal).
func damageJournal(path string) (string, error) {
	return damage(path, func(b *bolt.Bucket) (string, error) {
		jb := b.Bucket(format.JournalBucket)
		if jb == nil {
			return "", nil
		}
		c := jb.Cursor()
		for gen, v := c.First(); gen != nil; gen, v = c.Next() {
			if v != nil {
				continue
			}
			gb := jb.Bucket(gen)
			seq, _ := gb.Cursor().First()
			if seq == nil {
				continue
			}
			what := fmt.Sprintf("journal entry %x/%x damaged", gen, seq)
			return what, gb.Put(bytes.Clone(seq), []byte{0xff, 0xff, 0xff})
		}
		return "", nil
	})
}

// damageRecord damages the payload of the n-th stored record (modulo their
// number) of the object tree, keeping its header.
func damageRecord(path string, n int) (string, error) {
	return damage(path, func(b *bolt.Bucket) (string, error) {
		ob := b.Bucket(format.ObjectsBucket)
		if ob == nil {
			return "", nil
		}
		var keys [][]byte
		if err := ob.ForEach(func(k, v []byte) error {
			if v != nil {
				keys = append(keys, bytes.Clone(k))
			}
			return nil
		}); err != nil {
			return "", err
		}
		if len(keys) == 0 {
			return "", nil
		}
		k := keys[n%len(keys)]
		rec := bytes.Clone(ob.Get(k))
		for i := max(len(rec)-8, 0); i < len(rec); i++ {
			rec[i] = 0xff
		}
		return fmt.Sprintf("record %s damaged", k), ob.Put(k, rec)
	})
}

// damage opens the closed file at path and runs fn on the collection's
// bucket in one write transaction; fn says what it damaged ("" if
// nothing). A file without the collection is left as it is.
func damage(path string, fn func(b *bolt.Bucket) (string, error)) (string, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return "", fmt.Errorf("damage: %w", err)
	}
	defer db.Close()
	what := ""
	err = db.Update(func(tx *bolt.Tx) error {
		b := collBucket(tx)
		if b == nil {
			return nil
		}
		var err error
		what, err = fn(b)
		return err
	})
	return what, err
}

// readCheckpoint returns the named checkpoint's committed acknowledgements
// (key → resourceVersion) and tombstones' keys from a closed file. With
// journalSetAside it returns them as a set-aside of the journal leaves
// them: an acknowledgement of a key the object tree lacks is a tombstone.
func readCheckpoint(path, name string, journalSetAside bool) (map[string]string, []string, error) {
	acks := map[string]string{}
	var tombstones []string
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return nil, nil, fmt.Errorf("reading the checkpoint: %w", err)
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		b := collBucket(tx)
		if b == nil {
			return nil
		}
		if cb := b.Bucket(format.CheckpointsBucket); cb != nil {
			if nb := cb.Bucket([]byte(name)); nb != nil {
				_ = nb.ForEach(func(k, v []byte) error { acks[string(k)] = string(v); return nil })
			}
		}
		if journalSetAside {
			ob := b.Bucket(format.ObjectsBucket)
			for k := range acks {
				if ob == nil || ob.Get([]byte(k)) == nil {
					delete(acks, k)
					tombstones = append(tombstones, k)
				}
			}
		}
		if tb := b.Bucket(format.TombstonesBucket); tb != nil {
			if nb := tb.Bucket([]byte(name)); nb != nil {
				_ = nb.ForEach(func(k, _ []byte) error { tombstones = append(tombstones, string(k)); return nil })
			}
		}
		return nil
	})
	return acks, tombstones, err
}
