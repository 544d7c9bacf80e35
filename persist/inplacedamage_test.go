package persist_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
	bolt "go.etcd.io/bbolt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/boltinformer/boltinformer/internal/format"
	"github.com/boltinformer/boltinformer/persist"
)

// cacheModes are the two ways a collection reads its indexes. An unbounded
// one loads them into memory at its first full read. A bounded one reads
// them from the file at every lookup.
var cacheModes = []struct {
	name         string
	cacheObjects int
}{{"unbounded", 0}, {"bounded", 1}}

// Damage that no transaction made (a bad sector, a bit flip, a file
// copied while open) leaves no trace a writer could have recorded.
// persist/doc.go promises that damage never needs a person to repair it,
// and docs/cache.md that damaged index entries are rebuilt from the records
// at open, losing nothing. So every writable open looks for it.
//
// Here a byValue entry's length byte is changed in place in the closed file,
// as a flipped bit would change it. The entry stays the bucket's last, so
// bbolt's order holds, and it no longer decodes (CheckIndexEntry fails).
func TestIndexEntryDamagedInPlaceIsRebuiltAtOpen(t *testing.T) {
	for _, mode := range cacheModes {
		t.Run(mode.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cache.db")
			opts := persist.CollectionOptions{Indexes: map[string]string{"name": "1"}, IndexValues: byName, Provenance: map[string]string{"list": "cms"}, CacheObjects: mode.cacheObjects}
			db := openDB(t, path, persist.Options{JournalShare: -1}) // commits write the trees
			c, err := db.Collection("cms", opts)
			if err != nil {
				t.Fatal(err)
			}
			putNamed(t, c, "3", cm("a", "1"), cm("c", "2"), cm("zz", "3"))
			if err := db.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}

			// The byValue entry of value "zz" for key "ns/zz": uvarint(2) "zz" "ns/zz".
			// 0x7f says the value is 127 bytes long, more than the entry holds.
			if n := replaceInFile(t, path, []byte("\x02zzns/zz"), []byte("\x7fzzns/zz")); n == 0 {
				t.Fatal("the file holds no byValue entry of zz: the test damages nothing")
			}

			for open := 1; open <= 2; open++ {
				db := openDB(t, path, persist.Options{JournalShare: -1})
				c, err := openNoPanic(db, "cms", opts)
				if err != nil {
					t.Fatalf("open %d: %v", open, err)
				}
				values, verr := c.IndexValues("name")
				keys, kerr := c.IndexKeys("name", "zz")
				rebuilt := c.RebuiltAtOpen()
				if err := db.Close(); err != nil {
					t.Fatal(err)
				}
				if verr != nil || !slices.Equal(values, []string{"a", "c", "zz"}) || kerr != nil || !slices.Equal(keys, []string{"ns/zz"}) {
					t.Errorf("writable open %d after in-place damage: RebuiltAtOpen() = %v; IndexValues(name) = %v, %v; IndexKeys(name, zz) = %v, %v; "+
						"want the damaged entry found and rebuilt from the records: [a c zz], [ns/zz]", open, rebuilt, values, verr, keys, kerr)
				}
				if want := open == 1; (rebuilt != nil) != want || (want && !errors.Is(rebuilt, persist.ErrCorruptRecord)) {
					t.Errorf("writable open %d: RebuiltAtOpen() = %v; want the damage reported at the first open only", open, rebuilt)
				}
			}
		})
	}
}

// replaceInFile replaces every copy of old in the closed file at path with
// new, of the same length, as damage on the disk would, and returns how
// many it replaced.
func replaceInFile(t *testing.T, path string, old, new []byte) int {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := bytes.Count(raw, old)
	if err := os.WriteFile(path, bytes.ReplaceAll(raw, old, new), 0o600); err != nil {
		t.Fatal(err)
	}
	return n
}

// derivedEntry is one entry of a derived bucket, as the closed file holds
// it: a byValue entry, a byKey value or a version.
type derivedEntry struct {
	bucket string // "byValue/<index>", "byKey/<index>" or "versions"
	k, v   []byte
}

// TestDerivedEntriesDamagedInPlaceGenerated draws an index entry, byKey
// value or version, and changes one of its bytes in the closed file until a
// read or commit would fail on it: a byValue entry that does not decode, a
// byKey value that does not decode, a version that does not decode or that
// no server gives. Damage that leaves an entry well-formed and wrong is not
// drawn, since nothing but the records could tell. Each writable open, in
// either cache mode, must rebuild the entry from the records, serve every
// index and version as the records say, commit a change of the damaged key,
// and leave a file the next open finds sound. The seed is logged, so a
// failure can be replayed.
func TestDerivedEntriesDamagedInPlaceGenerated(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	dir := t.TempDir()
	sound := filepath.Join(dir, "sound.db")
	objs := writeDamageable(t, sound)
	entries := derivedEntries(t, sound)
	for n := 0; n < 24; n++ {
		e := entries[r.IntN(len(entries))]
		k, v, how, ok := damageEntry(r, e)
		if !ok {
			continue
		}
		raw, err := os.ReadFile(sound)
		if err != nil {
			t.Fatal(err)
		}
		old, new := slices.Concat(e.k, e.v), slices.Concat(k, v)
		if bytes.Count(raw, old) == 0 {
			t.Fatalf("the file does not hold %s entry %q=%q as one stretch of bytes", e.bucket, e.k, e.v)
		}
		damaged := bytes.ReplaceAll(raw, old, new)
		for _, mode := range cacheModes {
			path := filepath.Join(dir, fmt.Sprintf("%d-%s.db", n, mode.name))
			if err := os.WriteFile(path, damaged, 0o600); err != nil {
				t.Fatal(err)
			}
			what := fmt.Sprintf("draw %d, %s cache: %s entry %q=%q %s", n, mode.name, e.bucket, e.k, e.v, how)
			checkRebuiltFromRecords(t, path, mode.cacheObjects, objs, what)
		}
	}
}

// damageableOpts indexes configmaps by name and namespace.
func damageableOpts(cacheObjects int) persist.CollectionOptions {
	opts := twoIndexes
	opts.Provenance = map[string]string{"list": "cms"}
	opts.CacheObjects = cacheObjects
	return opts
}

// writeDamageable writes 24 configmaps into the trees of a new file at path,
// closes it, and returns them by key.
func writeDamageable(t *testing.T, path string) map[string]*corev1.ConfigMap {
	t.Helper()
	db := openDB(t, path, persist.Options{JournalShare: -1, NoSync: true})
	c, err := db.Collection("cms", damageableOpts(0))
	if err != nil {
		t.Fatal(err)
	}
	objs := map[string]*corev1.ConfigMap{}
	var ops []persist.Op
	for i := range 24 {
		o := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Namespace: fmt.Sprintf("ns%d", i%3), Name: fmt.Sprintf("cm%02d", i),
			UID: types.UID(fmt.Sprintf("uid-%02d", i)), ResourceVersion: fmt.Sprint(100 + i),
		}}
		key := o.Namespace + "/" + o.Name
		objs[key] = o
		ops = append(ops, persist.Op{Key: key, Object: o, Indexes: map[string][]string{"name": {o.Name}, "namespace": {o.Namespace}}})
	}
	if err := c.ApplyList(ops, "200"); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return objs
}

// derivedEntries returns every entry of the derived buckets of the
// collection in the closed file at path.
func derivedEntries(t *testing.T, path string) []derivedEntry {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	var out []derivedEntry
	err = bdb.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(format.CollectionsBucket).Bucket([]byte("cms"))
		collect := func(name string, bucket *bolt.Bucket) error {
			return bucket.ForEach(func(k, v []byte) error {
				out = append(out, derivedEntry{name, bytes.Clone(k), bytes.Clone(v)})
				return nil
			})
		}
		for _, index := range []string{"name", "namespace"} {
			ib := b.Bucket(format.IndexesBucket).Bucket([]byte(index))
			if err := collect("byValue/"+index, ib.Bucket(format.ByValueBucket)); err != nil {
				return err
			}
			if err := collect("byKey/"+index, ib.Bucket(format.ByKeyBucket)); err != nil {
				return err
			}
		}
		return collect("versions", b.Bucket(format.VersionsBucket))
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// damageEntry changes one byte of e's bbolt key (a byValue entry) or value
// (a byKey value or a version) so that the entry no longer reads. It gives
// up after a few draws that leave it readable.
func damageEntry(r *rand.Rand, e derivedEntry) (k, v []byte, how string, ok bool) {
	for range 64 {
		k, v = bytes.Clone(e.k), bytes.Clone(e.v)
		target := v
		if len(e.bucket) > 7 && e.bucket[:7] == "byValue" {
			target = k
		}
		at := r.IntN(min(len(target), 4)) // the headers: lengths and codes
		if r.IntN(2) == 0 {
			at = r.IntN(len(target))
		}
		was := target[at]
		target[at] = byte(r.IntN(256))
		if !entryReads(e.bucket, k, v) {
			return k, v, fmt.Sprintf("with byte %d changed from %#x to %#x", at, was, target[at]), true
		}
	}
	return nil, nil, "", false
}

// entryReads reports whether a read or commit accepts the entry: a byValue
// entry decodes, a byKey value decodes as a commit decodes it, and a
// version decodes to a UID and resourceVersion of printable ASCII.
func entryReads(bucket string, k, v []byte) bool {
	switch {
	case bucket == "versions":
		uid, rv, err := format.DecodeVersion(v)
		return err == nil && printableASCII(uid) && printableASCII(rv)
	case bucket[:5] == "byKey":
		var values []string
		return msgpack.Unmarshal(v, &values) == nil
	default:
		_, _, _, err := format.DecodeIndexEntry(k, v)
		return err == nil
	}
}

func printableASCII(s string) bool {
	for _, c := range []byte(s) {
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// checkRebuiltFromRecords opens the damaged file at path for writing twice.
// The first open must report a rebuild, serve what the records say, and
// commit a change of every key. The second must find nothing to rebuild.
func checkRebuiltFromRecords(t *testing.T, path string, cacheObjects int, objs map[string]*corev1.ConfigMap, what string) {
	t.Helper()
	for open := 1; open <= 2; open++ {
		db := openDB(t, path, persist.Options{JournalShare: -1, NoSync: true})
		c, err := openNoPanic(db, "cms", damageableOpts(cacheObjects))
		if err != nil {
			t.Fatalf("%s: open %d: %v", what, open, err)
		}
		rebuilt := c.RebuiltAtOpen()
		if want := open == 1; (rebuilt != nil) != want || (want && !errors.Is(rebuilt, persist.ErrCorruptRecord)) {
			t.Errorf("%s: open %d: RebuiltAtOpen() = %v; want the damage reported at the first open only", what, open, rebuilt)
		}
		if err := servesRecords(c, objs); err != nil {
			t.Errorf("%s: open %d: %v", what, open, err)
		}
		if open == 1 {
			// A commit of every key reads every byKey value it replaces.
			var ops []persist.Op
			for _, key := range slices.Sorted(maps.Keys(objs)) {
				o := objs[key]
				ops = append(ops, persist.Op{Key: key, Object: o, Indexes: map[string][]string{"name": {o.Name}, "namespace": {o.Namespace}}})
			}
			if err := c.Apply(ops, "201"); err != nil {
				t.Fatal(err)
			}
			if err := db.Flush(context.Background()); err != nil {
				t.Errorf("%s: a commit after the rebuild: %v", what, err)
			}
		}
		if err := db.Close(); err != nil {
			t.Errorf("%s: open %d: Close: %v", what, open, err)
		}
	}
}

// servesRecords returns an error unless c's indexes and versions are those
// of objs.
func servesRecords(c *persist.Collection, objs map[string]*corev1.ConfigMap) error {
	want := map[string]map[string][]string{"name": {}, "namespace": {}}
	wantVersions := map[string]persist.Version{}
	for key, o := range objs {
		want["name"][o.Name] = append(want["name"][o.Name], key)
		want["namespace"][o.Namespace] = append(want["namespace"][o.Namespace], key)
		wantVersions[key] = persist.Version{UID: o.UID, ResourceVersion: o.ResourceVersion}
	}
	for index, byValue := range want {
		values, err := c.IndexValues(index)
		if err != nil || !slices.Equal(values, slices.Sorted(maps.Keys(byValue))) {
			return fmt.Errorf("IndexValues(%s) = %v, %v; want %v", index, values, err, slices.Sorted(maps.Keys(byValue)))
		}
		for value, keys := range byValue {
			slices.Sort(keys)
			got, err := c.IndexKeys(index, value)
			if err != nil || !slices.Equal(got, keys) {
				return fmt.Errorf("IndexKeys(%s, %s) = %v, %v; want %v", index, value, got, err, keys)
			}
		}
	}
	versions, err := c.Versions()
	if err != nil || !maps.Equal(versions, wantVersions) {
		return fmt.Errorf("Versions() = %v, %v; want %v", versions, err, wantVersions)
	}
	return nil
}
