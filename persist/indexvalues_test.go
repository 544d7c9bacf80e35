package persist_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientcache "k8s.io/client-go/tools/cache"

	"github.com/boltinformer/boltinformer/internal/format"
	"github.com/boltinformer/boltinformer/persist"
)

// byNote indexes a ConfigMap by its "note" data, which may be of any length.
func byNote(_ string, obj runtime.Object) ([]string, error) {
	if v, ok := obj.(*corev1.ConfigMap).Data["note"]; ok {
		return []string{v}, nil
	}
	return nil, nil
}

// noted returns ConfigMap name at rv with the "note" data note.
func noted(name, rv, note string) *corev1.ConfigMap {
	o := cm(name, rv)
	o.Data = map[string]string{"note": note}
	return o
}

// putNoted applies objs with their "note" index values.
func putNoted(t *testing.T, c *persist.Collection, rv string, objs ...*corev1.ConfigMap) {
	t.Helper()
	ops := make([]persist.Op, len(objs))
	for i, o := range objs {
		values, _ := byNote("note", o)
		ops[i] = persist.Op{Key: o.Namespace + "/" + o.Name, Object: o, Indexes: map[string][]string{"note": values}}
	}
	if err := c.Apply(ops, rv); err != nil {
		t.Fatal(err)
	}
}

// noteState describes what the "note" index serves for value, and the
// index's values, each long value shortened to its length and first byte.
func noteState(t *testing.T, c *persist.Collection, value string) string {
	t.Helper()
	keys, err := c.IndexKeys("note", value)
	if err != nil {
		t.Fatalf("IndexKeys: %v", err)
	}
	objs, err := c.ByIndex("note", value)
	if err != nil {
		t.Fatalf("ByIndex: %v", err)
	}
	var byIndex []string
	for _, o := range objs {
		m := o.(*corev1.ConfigMap)
		byIndex = append(byIndex, m.Name+"@"+m.ResourceVersion)
	}
	slices.Sort(byIndex)
	values, err := c.IndexValues("note")
	if err != nil {
		t.Fatalf("IndexValues: %v", err)
	}
	for i, v := range values {
		values[i] = short(v)
	}
	return "keys=" + strings.Join(keys, ",") + " objects=" + strings.Join(byIndex, ",") + " values=" + strings.Join(values, ",")
}

func short(v string) string {
	if len(v) <= 16 {
		return v
	}
	return v[:1] + "*" + strconv.Itoa(len(v))
}

// An index value longer than bbolt's limit on a key (32 KiB) is stored and
// served like any other. Index values come from object content, so whoever
// may create an object chooses them. A value the file cannot hold as a key
// must still not fail the group commit, which writes every collection of
// the file and would be retried with it for ever. The value is looked up
// from memory, from the layers, from the journal, from the trees, and after
// a reopen.
func TestLongIndexValueIsStoredAndServed(t *testing.T) {
	for _, bound := range []int{0, 1} { // every object in memory; reads from the file
		t.Run("cache="+strconv.Itoa(bound), func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "cache.db")
			dbOpts := persist.WithJournalBytes(persist.Options{}, 1)
			opts := persist.CollectionOptions{CacheObjects: bound, Indexes: map[string]string{"note": "1"}, IndexValues: byNote}
			db := openDB(t, path, dbOpts)
			big, err := db.Collection("big", opts)
			if err != nil {
				t.Fatal(err)
			}
			other, err := db.Collection("other", opts)
			if err != nil {
				t.Fatal(err)
			}
			long1 := strings.Repeat("a", 40<<10)
			long2 := strings.Repeat("b", 40<<10)

			putNoted(t, big, "1", noted("x", "1", long1), noted("y", "1", "short"))
			if got, want := noteState(t, big, long1), "keys=ns/x objects=x@1 values=a*40960,short"; got != want {
				t.Errorf("before the commit: %s, want %s", got, want)
			}
			if err := db.Flush(ctx); err != nil {
				t.Fatalf("commit of a 40 KiB index value: %v", err)
			}
			if rv, err := big.CommittedResourceVersion(); err != nil || rv != "1" {
				t.Errorf("committed resourceVersion %q, %v; want 1", rv, err)
			}
			putNoted(t, other, "7", noted("z", "7", "z"))
			if err := db.Flush(ctx); err != nil {
				t.Fatalf("commit of another collection: %v", err)
			}
			if rv, err := other.CommittedResourceVersion(); err != nil || rv != "7" {
				t.Errorf("the other collection's committed resourceVersion %q, %v; want 7", rv, err)
			}
			if got, want := noteState(t, big, long1), "keys=ns/x objects=x@1 values=a*40960,short"; got != want {
				t.Errorf("after the commit: %s, want %s", got, want)
			}

			// Move x to another long value and y to the first: journaled,
			// then folded by the commits that follow.
			putNoted(t, big, "2", noted("x", "2", long2), noted("y", "2", long1))
			if err := db.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			want := map[string]string{
				long1: "keys=ns/y objects=y@2 values=a*40960,b*40960",
				long2: "keys=ns/x objects=x@2 values=a*40960,b*40960",
			}
			check := func(when string) {
				t.Helper()
				for _, v := range []string{long1, long2} {
					if got := noteState(t, big, v); got != want[v] {
						t.Errorf("%s: lookup of %s: %s, want %s", when, short(v), got, want[v])
					}
				}
			}
			check("journaled")
			for i := 3; i < 8; i++ {
				putNoted(t, big, strconv.Itoa(i), noted("w", strconv.Itoa(i), "w"+strconv.Itoa(i)))
				if err := db.Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
			want[long1] = "keys=ns/y objects=y@2 values=a*40960,b*40960,w7"
			want[long2] = "keys=ns/x objects=x@2 values=a*40960,b*40960,w7"
			check("folded")

			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db = openDB(t, path, dbOpts)
			if big, err = db.Collection("big", opts); err != nil {
				t.Fatal(err)
			}
			check("reopened")
			if rv, err := big.CommittedResourceVersion(); err != nil || rv != "7" {
				t.Errorf("reopened: committed resourceVersion %q, %v; want 7", rv, err)
			}

			// Deleting the objects removes their long entries.
			if err := big.Apply([]persist.Op{{Key: "ns/x", Delete: true}, {Key: "ns/y", Delete: true}}, "8"); err != nil {
				t.Fatal(err)
			}
			if err := db.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			want[long1] = "keys= objects= values=w7"
			want[long2] = want[long1]
			check("deleted")
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db = openDB(t, path, dbOpts)
			if big, err = db.Collection("big", opts); err != nil {
				t.Fatal(err)
			}
			check("deleted and reopened")
		})
	}
}

// indexValueLengths are the lengths the generator gives index values. They
// lie around the file's limits: an entry of an inline value with the
// longest key fills a bbolt key at 28669 bytes (format.MaxInlineValue), an
// older build wrote values of up to 32764 bytes inline, and bbolt refuses
// keys of more than 32768 bytes.
var indexValueLengths = []int{0, 1, 2, 255, 256, 28668, 28669, 28670, 32764, 32765, 32767, 32768, 32769, 100 << 10}

// indexValueBytes are the generator's bytes. They include the store key's
// separator, bytes a length prefix or an escape would hold, and UTF-8.
var indexValueBytes = []string{"a", "b", "/", "\x00", "\x01", "\x7f", "\x80", "\xff", "%", "\\", ",", "=", "é"}

// notesIndex indexes a ConfigMap by each of its "n*" data entries, in
// key order, duplicates included.
func notesIndex(obj interface{}) ([]string, error) {
	m := obj.(*corev1.ConfigMap)
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m.Data)) {
		if strings.HasPrefix(k, "n") {
			out = append(out, m.Data[k])
		}
	}
	return out, nil
}

// TestIndexValuesAgreeWithClientGo applies the same random changes to a
// collection and to client-go's indexer. Index values have lengths around
// the file's limits and hold separator and escape bytes. Keys hold them
// too, up to the longest a collection stores. Commits, journal folds,
// reopens and index rebuilds come in between. After every step, every
// lookup of every value must agree: IndexKeys, ByIndex and the index's
// values (ListIndexFuncValues). The commits must all succeed.
func TestIndexValuesAgreeWithClientGo(t *testing.T) {
	for _, bound := range []int{0, 1} {
		for seed := uint64(0); seed < 8; seed++ {
			t.Run(fmt.Sprintf("cache=%d/seed=%d", bound, seed), func(t *testing.T) {
				runIndexValues(t, rand.New(rand.NewPCG(seed, 11)), bound, 120)
			})
		}
	}
}

func runIndexValues(t *testing.T, rng *rand.Rand, bound, steps int) {
	ctx := context.Background()
	str := func(n int) string {
		var b strings.Builder
		for b.Len() < n {
			b.WriteString(indexValueBytes[rng.IntN(len(indexValueBytes))])
		}
		return b.String()[:n] // may cut a UTF-8 sequence: values are bytes
	}
	// Values: every length, some sharing long prefixes (one a prefix of
	// another), and a few of random length.
	var values []string
	for _, n := range indexValueLengths {
		values = append(values, str(n))
	}
	for i := 0; i < 4; i++ {
		base := values[rng.IntN(len(values))]
		values = append(values, base+str(1+rng.IntN(3)), str(rng.IntN(40000)))
	}
	values = slices.Compact(slices.Sorted(slices.Values(values)))
	// Names: separators, escapes, prefixes of each other, and the longest
	// a key may have (4096 bytes with its namespace).
	names := []string{"a", "ab", "a/b", "a\x00b", "\xff", "%2F", "é", strings.Repeat("n", 4093)}

	indexers := clientcache.Indexers{"notes": notesIndex, clientcache.NamespaceIndex: clientcache.MetaNamespaceIndexFunc}
	model := clientcache.NewIndexer(clientcache.MetaNamespaceKeyFunc, indexers)
	version := 1
	indexValues := func(index string, obj runtime.Object) ([]string, error) { return indexers[index](obj) }
	versions := func() map[string]string {
		return map[string]string{"notes": strconv.Itoa(version), clientcache.NamespaceIndex: "1"}
	}
	path := filepath.Join(t.TempDir(), "cache.db")
	dbOpts := persist.WithFoldChunk(persist.WithJournalBytes(persist.Options{}, 1), 2)
	db := openDB(t, path, dbOpts)
	open := func() *persist.Collection {
		t.Helper()
		c, err := db.Collection("cms", persist.CollectionOptions{CacheObjects: bound, Indexes: versions(), IndexValues: indexValues})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := open()
	rv := 0
	for step := 0; step < steps; step++ {
		var desc string
		switch op := rng.IntN(100); {
		case op < 55:
			rv++
			o := cm(names[rng.IntN(len(names))], strconv.Itoa(rv))
			o.Namespace = []string{"ns", "é/"}[rng.IntN(2)]
			if len(o.Name) > 4000 {
				o.Name = o.Name[:4096-len(o.Namespace)-1] // the key is 4096 bytes
			}
			o.Data = map[string]string{}
			for i := rng.IntN(4); i > 0; i-- {
				o.Data["n"+strconv.Itoa(rng.IntN(3))] = values[rng.IntN(len(values))]
			}
			key, _ := clientcache.MetaNamespaceKeyFunc(o)
			desc = "put " + short(key)
			idx := map[string][]string{}
			for name, fn := range indexers {
				idx[name], _ = fn(o)
			}
			if err := c.Apply([]persist.Op{{Key: key, Object: o, Indexes: idx}}, strconv.Itoa(rv)); err != nil {
				t.Fatalf("step %d %s: %v", step, desc, err)
			}
			if err := model.Add(o); err != nil {
				t.Fatal(err)
			}
		case op < 75:
			keys := model.ListKeys()
			if len(keys) == 0 {
				continue
			}
			slices.Sort(keys)
			key := keys[rng.IntN(len(keys))]
			rv++
			desc = "delete " + short(key)
			if err := c.Apply([]persist.Op{{Key: key, Delete: true}}, strconv.Itoa(rv)); err != nil {
				t.Fatalf("step %d %s: %v", step, desc, err)
			}
			obj, _, _ := model.GetByKey(key)
			if err := model.Delete(obj); err != nil {
				t.Fatal(err)
			}
		case op < 90:
			desc = "commit"
			if err := db.Flush(ctx); err != nil {
				t.Fatalf("step %d %s: %v", step, desc, err)
			}
		case op < 96:
			desc = "reopen"
			if err := db.Close(); err != nil {
				t.Fatalf("step %d %s: %v", step, desc, err)
			}
			db = openDB(t, path, dbOpts)
			c = open()
		default:
			desc = "rebuild"
			if err := db.Close(); err != nil {
				t.Fatalf("step %d %s: %v", step, desc, err)
			}
			version++
			db = openDB(t, path, dbOpts)
			c = open()
		}
		compareIndexValues(t, fmt.Sprintf("step %d (%s)", step, desc), model, c, values)
	}
	if err := db.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if rv := strconv.Itoa(rv); c.ResourceVersion() != rv {
		t.Errorf("resourceVersion %q, want %q", c.ResourceVersion(), rv)
	}
	if got, err := c.CommittedResourceVersion(); err != nil || got != c.ResourceVersion() {
		t.Errorf("committed resourceVersion %q, %v; want %q", got, err, c.ResourceVersion())
	}
}

func compareIndexValues(t *testing.T, where string, model clientcache.Indexer, c *persist.Collection, values []string) {
	t.Helper()
	for index := range model.GetIndexers() {
		want := model.ListIndexFuncValues(index)
		slices.Sort(want)
		got, err := c.IndexValues(index)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("%s: IndexValues(%s) = %v, %v; client-go %v", where, index, shorts(got), err, shorts(want))
		}
		for _, v := range slices.Concat(values, want) {
			wantKeys, _ := model.IndexKeys(index, v)
			slices.Sort(wantKeys)
			keys, err := c.IndexKeys(index, v)
			if err != nil || !slices.Equal(keys, wantKeys) {
				t.Fatalf("%s: IndexKeys(%s, %s) = %v, %v; client-go %v", where, index, short(v), shorts(keys), err, shorts(wantKeys))
			}
			wantObjs, _ := model.ByIndex(index, v)
			objs, err := c.ByIndex(index, v)
			if err != nil {
				t.Fatalf("%s: ByIndex(%s, %s): %v", where, index, short(v), err)
			}
			if a, b := stateOf(objs), stateOfAny(wantObjs); !slices.Equal(a, b) {
				t.Fatalf("%s: ByIndex(%s, %s) = %v; client-go %v", where, index, short(v), a, b)
			}
		}
	}
}

// stateOf renders ConfigMaps as sorted key@resourceVersion strings.
func stateOf(objs []runtime.Object) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		m := o.(*corev1.ConfigMap)
		out = append(out, short(m.Namespace+"/"+m.Name)+"@"+m.ResourceVersion)
	}
	slices.Sort(out)
	return out
}

func stateOfAny(objs []interface{}) []string {
	ro := make([]runtime.Object, len(objs))
	for i, o := range objs {
		ro[i] = o.(runtime.Object)
	}
	return stateOf(ro)
}

func shorts(vs []string) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = short(v)
	}
	return out
}

// A key the file cannot store is refused by Apply, with the batch, and
// nothing is applied. So are names of checkpoints and collections the file
// cannot store. Accepted, each would fail the group commit, which writes
// every collection of the file and would be retried with it for ever. The
// longest key a Kubernetes object has (63 + 1 + 253 bytes) is stored.
func TestNamesTheFileCannotStoreAreRefused(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "cache.db")
	db := openDB(t, path, persist.Options{})
	c, err := db.Collection("cms", persist.CollectionOptions{CacheObjects: 1})
	if err != nil {
		t.Fatal(err)
	}
	longest := cm(strings.Repeat("n", 253), "1")
	longest.Namespace = strings.Repeat("s", 63)
	longestKey := longest.Namespace + "/" + longest.Name
	for name, key := range map[string]string{"empty": "", "40 KiB": strings.Repeat("k", 40<<10)} {
		err := c.Apply([]persist.Op{{Key: longestKey, Object: longest}, {Key: key, Object: cm("x", "1")}}, "1")
		if !errors.Is(err, persist.ErrUnencodable) {
			t.Errorf("Apply of an object under the %s key: %v, want ErrUnencodable", name, err)
		}
		if err := db.Flush(ctx); err != nil {
			t.Fatalf("commit after the %s key: %v", name, err)
		}
		if _, ok, err := c.Get(longestKey); ok || err != nil {
			t.Errorf("after the refused batch with the %s key, its other object is stored (%v, %v)", name, ok, err)
		}
	}
	if _, err := c.Checkpoint(strings.Repeat("c", 40<<10)); err == nil {
		t.Error("a checkpoint with a 40 KiB name opened")
	}
	if _, err := db.Collection(strings.Repeat("c", 40<<10), persist.CollectionOptions{}); err == nil {
		t.Error("a collection with a 40 KiB name opened")
	}
	put(t, c, "2", longest)
	cp, err := c.Checkpoint("handler")
	if err != nil {
		t.Fatal(err)
	}
	ack(t, cp, longestKey, "1")
	if err := db.Flush(ctx); err != nil {
		t.Fatalf("commit of the longest Kubernetes key: %v", err)
	}
	if rv, err := c.CommittedResourceVersion(); err != nil || rv != "2" {
		t.Errorf("committed resourceVersion %q, %v; want 2", rv, err)
	}
}

// A value this build hashes may have been written inline by an older
// build, whose entries held any value that fit bbolt's key limit. Such an
// entry is still found, and removed when its object changes.
func TestInlineEntryOfALongValueFromAnOlderBuild(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "cache.db")
	long := strings.Repeat("v", 30000) // hashed now; an older build wrote it inline
	opts := persist.CollectionOptions{CacheObjects: 1, Indexes: map[string]string{"note": "1"}, IndexValues: byNote}
	db := openDB(t, path, persist.Options{})
	c, err := db.Collection("cms", opts)
	if err != nil {
		t.Fatal(err)
	}
	putNoted(t, c, "1", noted("x", "1", long), noted("y", "1", "short"))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// Rewrite the entry as an older build wrote it:
	// uvarint(len(value)) + value + key -> nil.
	inline := append(binary.AppendUvarint(nil, uint64(len(long))), long+"ns/x"...)
	rewrite := func(tx *bolt.Tx) error {
		byValue := tx.Bucket(format.CollectionsBucket).Bucket([]byte("cms")).Bucket(format.IndexesBucket).Bucket([]byte("note")).Bucket(format.ByValueBucket)
		var hashed [][]byte
		if err := byValue.ForEach(func(k, v []byte) error {
			if len(v) > 0 {
				hashed = append(hashed, bytes.Clone(k))
			}
			return nil
		}); err != nil {
			return err
		}
		if len(hashed) != 1 {
			return fmt.Errorf("%d hashed entries, want 1", len(hashed))
		}
		if err := byValue.Delete(hashed[0]); err != nil {
			return err
		}
		return byValue.Put(inline, nil)
	}
	updateFile(t, path, rewrite)

	for _, bound := range []int{1, 0} { // from the file, then from memory
		opts.CacheObjects = bound
		db = openDB(t, path, persist.Options{})
		if c, err = db.Collection("cms", opts); err != nil {
			t.Fatal(err)
		}
		if got, want := noteState(t, c, long), "keys=ns/x objects=x@1 values=short,v*30000"; got != want {
			t.Errorf("cache=%d: the older build's entry serves %s, want %s", bound, got, want)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	db = openDB(t, path, persist.Options{JournalShare: -1}) // commits write the trees
	if c, err = db.Collection("cms", opts); err != nil {
		t.Fatal(err)
	}
	putNoted(t, c, "2", noted("x", "2", "other"))
	if err := db.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := noteState(t, c, long), "keys= objects= values=other,short"; got != want {
		t.Errorf("after x changed: %s, want %s", got, want)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	updateFile(t, path, func(tx *bolt.Tx) error {
		byValue := tx.Bucket(format.CollectionsBucket).Bucket([]byte("cms")).Bucket(format.IndexesBucket).Bucket([]byte("note")).Bucket(format.ByValueBucket)
		if k, _ := byValue.Cursor().Seek(inline); bytes.Equal(k, inline) {
			return errors.New("the older build's entry is still in the file")
		}
		return nil
	})
}

// updateFile runs fn in a write transaction of the closed cache file.
func updateFile(t *testing.T, path string, fn func(*bolt.Tx) error) {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	if err := bdb.Update(fn); err != nil {
		t.Fatal(err)
	}
}
