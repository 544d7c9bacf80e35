package persist_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/boltinformer/boltinformer/internal/format"
	"github.com/boltinformer/boltinformer/persist"
	"github.com/boltinformer/boltinformer/persist/inspectfile"
)

var (
	damageSeed = flag.Int64("damage.seed", 0,
		"seed of the bytes TestEveryDamageOfTheFile writes and the pairs it draws; 0 picks one from the clock (it is logged, to reproduce a failure)")
	damagePairs = flag.Int("damage.pairs", 100, "pairs of damage TestEveryDamageOfTheFile draws per fixture")
)

// TestEveryDamageOfTheFile is a generator of damage. It takes real files
// holding every kind of state a collection keeps, and damages them one
// part at a time. Every bucket below the collection goes missing, becomes
// a plain value, or is emptied. Every value goes missing, is truncated,
// emptied, garbled, replaced by a bucket, or moves to a garbled key. The
// collection's own bucket is damaged the same way.
//
// After each damage the file must keep the contract of persist/doc.go:
//   - nothing panics: no open, no read through any read API or
//     inspectfile's, no commit;
//   - a read-only open and its reads either succeed or fail with an error
//     wrapping ErrCorrupt or ErrCorruptRecord;
//   - a writable open succeeds. If it resumes the collection (a
//     resourceVersion, no must-list mark, nothing set aside), what it
//     serves is what the undamaged file served. A read that fails wraps
//     ErrCorruptRecord, and SetAsideAll, an owner's last resort, ends it;
//   - commits then succeed, this collection's and another's, and a reopen
//     finds the file whole. A resumed collection then serves the undamaged
//     state with the commits' changes. The commits write every entry of
//     the fixtures' checkpoint.
//
// Damage comes in pairs too. Each swap of a value and a bucket, which
// bbolt refuses to write over, is paired with each damage that sets the
// journal aside, since that set-aside writes before the open checks the
// rest. Further pairs are drawn at random, by the seed.
//
// The content oracle leaves out what no open can check without reading
// every record and index entry: an entry lost from, or garbled in, the
// object, versions and index trees (treeEntryDamage). It leaves out the
// checkpoints' contents too, whose loss the checkpoint contract allows.
func TestEveryDamageOfTheFile(t *testing.T) {
	seed := *damageSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("damage seed %d (rerun with -damage.seed=%d)", seed, seed)
	dir := t.TempDir()
	fixtures := []struct {
		name  string
		write func(*testing.T, string)
		// version is the version the writable open gives the index. A
		// version other than the stored one rebuilds it from the records.
		version string
	}{
		{"journaled", writeDamageFixture, "1"},
		{"folding", writeFoldingFixture, "1"},
		{"reindexed", writeDamageFixture, "2"},
	}
	for _, fx := range fixtures {
		t.Run(fx.name, func(t *testing.T) {
			fixture := filepath.Join(dir, fx.name+".db")
			fx.write(t, fixture)
			want := readEverything(t, "the undamaged fixture", fixture, false)
			if len(want.errs) > 0 {
				t.Fatalf("the undamaged fixture does not read: %v", want.errs)
			}
			sites := damageSites(t, fixture)
			for _, site := range sites {
				for _, m := range damageMutations {
					if m.value != site.value {
						continue
					}
					name := site.String() + "/" + m.name
					t.Run(name, func(t *testing.T) {
						path := filepath.Join(t.TempDir(), "cache.db")
						copyFile(t, fixture, path)
						rng := rand.New(rand.NewSource(seedFor(seed, fx.name+"/"+name)))
						applied := false
						updateFile(t, path, func(tx *bolt.Tx) error {
							var err error
							applied, err = m.apply(tx, site, rng)
							return err
						})
						if !applied {
							t.Skip("not applicable here")
						}
						wantNow := want
						if site.String() == "cms/meta/rv" {
							// A damaged resourceVersion that could be one is
							// resumed from; the server refuses it (the
							// informer's part). Content is checked all the same.
							wantNow.rv = readRV(t, path)
							if wantNow.rv != "" && !persist.PlausibleResourceVersion(wantNow.rv) {
								wantNow.rv = want.rv
							}
						}
						opts := damageOpts
						opts.Indexes = map[string]string{"name": fx.version}
						checkDamagedFile(t, path, opts, wantNow, !treeEntryDamage(site, m))
					})
				}
			}
			// Damage comes in pairs too. The set-aside of one part must
			// not trip over another's damage. Their content is not
			// checked, only the contract.
			//
			// A journal's set-aside writes before the open has checked the
			// rest of the collection. It brings the index trees in line
			// with the records, and turns acknowledgements into tombstones.
			// bbolt refuses to write a value over a bucket, or the reverse.
			// So every swap of a value and a bucket is paired with each
			// damage that sets the journal aside, whatever the seed.
			for _, setAside := range journalSetAsides(sites) {
				for _, site := range sites {
					swap := kindSwap(site)
					name := fmt.Sprintf("beside/%s/%s/%s/%s", setAside.site, setAside.m.name, site, swap.name)
					t.Run(name, func(t *testing.T) {
						path := filepath.Join(t.TempDir(), "cache.db")
						copyFile(t, fixture, path)
						rng := rand.New(rand.NewSource(seedFor(seed, fx.name+"/"+name)))
						if applyDamages(t, path, rng, siteDamage{site, swap}, setAside) < 2 {
							t.Skip("not a pair here")
						}
						opts := damageOpts
						opts.Indexes = map[string]string{"name": fx.version}
						checkDamagedFile(t, path, opts, want, false)
					})
				}
			}
			// Other pairs are drawn at random.
			rng := rand.New(rand.NewSource(seedFor(seed, fx.name+"/pairs")))
			pick := func() (damageSite, damageMutation) {
				site := sites[rng.Intn(len(sites))]
				for {
					if m := damageMutations[rng.Intn(len(damageMutations))]; m.value == site.value {
						return site, m
					}
				}
			}
			pairs := *damagePairs
			if testing.Short() {
				pairs = min(pairs, 10)
			}
			for i := range pairs {
				s1, m1 := pick()
				s2, m2 := pick()
				name := fmt.Sprintf("pair%d/%s/%s+%s/%s", i, s1, m1.name, s2, m2.name)
				t.Run(name, func(t *testing.T) {
					path := filepath.Join(t.TempDir(), "cache.db")
					copyFile(t, fixture, path)
					rng := rand.New(rand.NewSource(seedFor(seed, fx.name+"/"+name)))
					if applyDamages(t, path, rng, siteDamage{s1, m1}, siteDamage{s2, m2}) < 2 {
						t.Skip("not a pair here")
					}
					opts := damageOpts
					opts.Indexes = map[string]string{"name": fx.version}
					checkDamagedFile(t, path, opts, want, false)
				})
			}
		})
	}
}

// siteDamage is a damage of one site.
type siteDamage struct {
	site damageSite
	m    damageMutation
}

// applyDamages applies damages to the file at path in order, each in its
// own transaction, and returns how many changed it. A damage whose site an
// earlier one took changes nothing.
func applyDamages(t *testing.T, path string, rng *rand.Rand, damages ...siteDamage) int {
	t.Helper()
	applied := 0
	for _, d := range damages {
		updateFile(t, path, func(tx *bolt.Tx) error {
			if !siteExists(tx, d.site) {
				return nil // an earlier damage took it
			}
			ok, err := d.m.apply(tx, d.site, rng)
			if ok {
				applied++
			}
			return err
		})
	}
	return applied
}

// journalSetAsides returns the damages among sites that set the journal
// aside at open: each journal generation emptied.
func journalSetAsides(sites []damageSite) []siteDamage {
	var out []siteDamage
	for _, s := range sites {
		if len(s.path) == 2 && bytes.Equal(s.path[0], format.JournalBucket) && !s.value {
			out = append(out, siteDamage{s, mutation("emptied", false)})
		}
	}
	return out
}

// kindSwap returns the mutation that swaps site's kind: a value becomes a
// bucket, and a bucket a plain value.
func kindSwap(site damageSite) damageMutation {
	if site.value {
		return mutation("bucket", true)
	}
	return mutation("plain", false)
}

// mutation returns the damage mutation of that name for a value or a
// bucket.
func mutation(name string, value bool) damageMutation {
	for _, m := range damageMutations {
		if m.name == name && m.value == value {
			return m
		}
	}
	panic(fmt.Sprintf("no damage mutation %q (value %t)", name, value))
}

// readRV returns the resourceVersion stored in the file at path.
func readRV(t *testing.T, path string) string {
	t.Helper()
	var rv string
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	_ = bdb.View(func(tx *bolt.Tx) error {
		if meta := tx.Bucket(format.CollectionsBucket).Bucket([]byte("cms")).Bucket(format.CollMetaBucket); meta != nil {
			rv = string(meta.Get(format.RVKey))
		}
		return nil
	})
	return rv
}

// writeFoldingFixture writes a collection whose journal has two
// generations, the older being folded, beside a dormant index, a
// checkpoint's acknowledgement and a description.
func writeFoldingFixture(t *testing.T, path string) {
	t.Helper()
	ctx := context.Background()
	opts := persist.CollectionOptions{CacheObjects: 1, Indexes: map[string]string{"name": "1", "old": "1"}, IndexValues: byName, Provenance: map[string]string{"list": "cms"}, Description: fixtureDescription}
	db := openDB(t, path, persist.WithFoldChunk(persist.WithJournalBytes(persist.Options{NoSync: true}, 1), 2))
	c, err := db.Collection("cms", opts)
	if err != nil {
		t.Fatal(err)
	}
	apply := func(rv string, objs ...*corev1.ConfigMap) {
		t.Helper()
		ops := make([]persist.Op, len(objs))
		for i, o := range objs {
			ops[i] = persist.Op{Key: "ns/" + o.Name, Object: o, Indexes: map[string][]string{"name": {o.Name}, "old": {o.Name}}}
		}
		if err := c.Apply(ops, rv); err != nil {
			t.Fatal(err)
		}
		if err := db.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	apply("1", cm("a", "1"), cm("b", "1"), cm("c", "1"), cm("d", "1")) // the trees
	apply("2", cm("a", "2"), cm("c", "2"))                             // a generation, sealed
	cp, err := c.Checkpoint("handler")
	if err != nil {
		t.Fatal(err)
	}
	ack(t, cp, "ns/c", "2")
	// A new generation. The fold copies ns/a from the sealed one, and ns/b
	// from the trees, which only the copy holds then.
	apply("3", cm("d", "3"))
	cp.Close()
	if gens, folding := persist.JournalState(c); gens != 2 || !folding {
		t.Fatalf("the fixture's journal has %d generations (folding %t), want 2, folding", gens, folding)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// damageSite is a bucket or a value below the collection "cms".
type damageSite struct {
	// path leads from the collection's bucket to the site. An empty path
	// is the collection's bucket itself.
	path  [][]byte
	value bool
}

func (s damageSite) String() string {
	if len(s.path) == 0 {
		return "cms"
	}
	parts := []string{"cms"}
	for _, p := range s.path {
		parts = append(parts, printable(p))
	}
	return strings.Join(parts, "/")
}

// printable names a bucket key in a subtest name.
func printable(k []byte) string {
	for _, r := range string(k) {
		if r < 0x21 || r > 0x7e || r == '/' {
			return fmt.Sprintf("%x", k)
		}
	}
	return string(k)
}

// damageSites lists every bucket and value below the collection "cms" of
// the file at path, and its bucket.
func damageSites(t *testing.T, path string) []damageSite {
	t.Helper()
	sites := []damageSite{{}}
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	var walk func(b *bolt.Bucket, path [][]byte) error
	walk = func(b *bolt.Bucket, path [][]byte) error {
		return b.ForEach(func(k, v []byte) error {
			p := append(slices.Clone(path), bytes.Clone(k))
			if v != nil {
				sites = append(sites, damageSite{path: p, value: true})
				return nil
			}
			sites = append(sites, damageSite{path: p})
			return walk(b.Bucket(k), p)
		})
	}
	err = bdb.View(func(tx *bolt.Tx) error {
		return walk(tx.Bucket(format.CollectionsBucket).Bucket([]byte("cms")), nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	return sites
}

// siteExists reports whether site is in the file as the kind it was found.
func siteExists(tx *bolt.Tx, site damageSite) bool {
	b := tx.Bucket(format.CollectionsBucket)
	key := []byte("cms")
	for _, p := range site.path {
		if b = b.Bucket(key); b == nil {
			return false
		}
		key = p
	}
	if site.value {
		return b.Get(key) != nil
	}
	return b.Bucket(key) != nil
}

// parentOf returns the bucket holding site, and site's key in it.
func parentOf(tx *bolt.Tx, site damageSite) (*bolt.Bucket, []byte) {
	b := tx.Bucket(format.CollectionsBucket)
	key := []byte("cms")
	for _, p := range site.path {
		b = b.Bucket(key)
		key = p
	}
	return b, key
}

// treeEntryDamage reports whether m at site damages entries of the object,
// versions or index trees, or of a fold's copies of them, rather than
// their structure.
func treeEntryDamage(site damageSite, m damageMutation) bool {
	if len(site.path) == 0 {
		return false
	}
	path := site.path
	if string(path[0]) == string(format.RebuildBucket) && len(path) > 1 {
		path = path[1:] // a fold's copy of a tree
	}
	switch string(path[0]) {
	case string(format.ObjectsBucket), string(format.VersionsBucket), string(format.IndexesBucket):
		return site.value || m.name == "emptied"
	}
	return false
}

// damageMutation damages a site of its kind (a bucket, or a value). apply
// reports whether it changed anything.
type damageMutation struct {
	name  string
	value bool
	apply func(tx *bolt.Tx, site damageSite, rng *rand.Rand) (bool, error)
}

var damageMutations = []damageMutation{
	{"missing", false, func(tx *bolt.Tx, s damageSite, _ *rand.Rand) (bool, error) {
		parent, key := parentOf(tx, s)
		return true, parent.DeleteBucket(key)
	}},
	{"plain", false, func(tx *bolt.Tx, s damageSite, rng *rand.Rand) (bool, error) {
		parent, key := parentOf(tx, s)
		if err := parent.DeleteBucket(key); err != nil {
			return false, err
		}
		return true, parent.Put(key, randomBytes(rng, 1+rng.Intn(16)))
	}},
	{"emptied", false, func(tx *bolt.Tx, s damageSite, _ *rand.Rand) (bool, error) {
		parent, key := parentOf(tx, s)
		if k, _ := parent.Bucket(key).Cursor().First(); k == nil {
			return false, nil
		}
		if err := parent.DeleteBucket(key); err != nil {
			return false, err
		}
		_, err := parent.CreateBucket(key)
		return true, err
	}},
	{"missing", true, func(tx *bolt.Tx, s damageSite, _ *rand.Rand) (bool, error) {
		parent, key := parentOf(tx, s)
		return true, parent.Delete(key)
	}},
	{"truncated", true, func(tx *bolt.Tx, s damageSite, _ *rand.Rand) (bool, error) {
		parent, key := parentOf(tx, s)
		v := parent.Get(key)
		if len(v) < 2 {
			return false, nil
		}
		return true, parent.Put(key, bytes.Clone(v[:len(v)/2]))
	}},
	{"empty", true, func(tx *bolt.Tx, s damageSite, _ *rand.Rand) (bool, error) {
		parent, key := parentOf(tx, s)
		if len(parent.Get(key)) == 0 {
			return false, nil
		}
		return true, parent.Put(key, []byte{})
	}},
	{"garbled", true, func(tx *bolt.Tx, s damageSite, rng *rand.Rand) (bool, error) {
		parent, key := parentOf(tx, s)
		return true, parent.Put(key, randomBytes(rng, max(len(parent.Get(key)), 1)))
	}},
	{"maxed", true, func(tx *bolt.Tx, s damageSite, _ *rand.Rand) (bool, error) {
		parent, key := parentOf(tx, s)
		return true, parent.Put(key, bytes.Repeat([]byte{0xff}, max(len(parent.Get(key)), 1)))
	}},
	{"bucket", true, func(tx *bolt.Tx, s damageSite, _ *rand.Rand) (bool, error) {
		parent, key := parentOf(tx, s)
		if err := parent.Delete(key); err != nil {
			return false, err
		}
		_, err := parent.CreateBucket(key)
		return true, err
	}},
	{"rekeyed", true, func(tx *bolt.Tx, s damageSite, rng *rand.Rand) (bool, error) {
		parent, key := parentOf(tx, s)
		moved := randomBytes(rng, len(key))
		if parent.Get(moved) != nil || parent.Bucket(moved) != nil {
			return false, nil
		}
		v := bytes.Clone(parent.Get(key))
		if err := parent.Delete(key); err != nil {
			return false, err
		}
		return true, parent.Put(moved, v)
	}},
}

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	rng.Read(b)
	return b
}

// damageOpts are the options every open of the fixtures' collection uses.
var damageOpts = persist.CollectionOptions{CacheObjects: 1, Indexes: map[string]string{"name": "1"}, IndexValues: byName, Provenance: map[string]string{"list": "cms"}}

// checkDamagedFile runs the contract's checks (see TestEveryDamageOfTheFile)
// on the damaged file at path, opening its collection for writing with
// opts; want is what the undamaged file served. With checkContent, a
// resumed collection must serve it.
func checkDamagedFile(t *testing.T, path string, opts persist.CollectionOptions, want served, checkContent bool) {
	ctx := context.Background()

	// A read-only open, as inspect's.
	readEverything(t, "read-only", path, true)
	inspectEverything(t, path)
	checkIdleOpen(t, path, opts)

	db, err := openDBNoPanic(path, persist.Options{NoSync: true, Scheme: scheme.Scheme})
	if err != nil {
		t.Fatalf("open for writing: %v", err)
	}
	defer db.Close()
	other, err := db.Collection("other", persist.CollectionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := openNoPanic(db, "cms", opts)
	if err != nil {
		t.Fatalf("open of the collection for writing: %v", err)
	}
	got := readCollection(t, "after the open", c)
	if err := c.DamageSetAside(); err != nil {
		if len(got.keys) != 0 || got.rv != "" {
			t.Errorf("DamageSetAside = %v, yet the collection holds %v at resourceVersion %q", err, got.keys, got.rv)
		}
	}
	if err := c.JournalSetAside(); err != nil && !got.mustList && got.rv != "" {
		// Emptied afterwards (damage, another provenance), it lists anyway.
		t.Errorf("JournalSetAside = %v, yet the collection carries no must-list mark and resumes at %q", err, got.rv)
	}
	resumed := checkContent && len(got.errs) == 0 && got.rv != "" && !got.mustList
	if resumed && got.content() != want.content() {
		t.Errorf("the collection resumes at resourceVersion %q with nothing set aside, but serves\n%s\nwhere the undamaged file served\n%s", got.rv, got.content(), want.content())
	}
	if len(got.errs) > 0 {
		// An owner that cannot read the collection back sets it all aside.
		if err := c.SetAsideAll(ctx); err != nil {
			t.Fatalf("SetAsideAll after read errors: %v", err)
		}
		if again := readCollection(t, "after SetAsideAll", c); len(again.errs) > 0 {
			t.Errorf("reads still fail after SetAsideAll: %v", again.errs)
		}
	}

	// The commits write every entry of the checkpoint the fixtures hold.
	// Each stored key is acknowledged, each deletion still to be told is,
	// and ns/c's acknowledgement becomes a tombstone.
	cp, err := c.Checkpoint("handler")
	if err != nil {
		t.Fatalf("Checkpoint: %v", err)
	}
	for _, key := range []string{"ns/a", "ns/b", "ns/c", "ns/d"} {
		obj, ok, err := c.Get(key)
		if err != nil || !ok {
			continue
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			t.Fatal(err)
		}
		ack(t, cp, key, m.GetResourceVersion())
	}
	for key := range cp.Deleted() {
		if err := cp.AckDeleted(key); err != nil {
			t.Fatal(err)
		}
	}
	putNamed(t, c, "4", cm("a", "4"), cm("d", "4"))
	if err := c.Apply([]persist.Op{{Key: "ns/c", Delete: true, DeletedAt: "4"}}, "4"); err != nil {
		t.Fatal(err)
	}
	put(t, other, "9", cm("x", "9"))
	if err := db.Flush(ctx); err != nil {
		t.Fatalf("commit after the open: %v", err)
	}
	ack(t, cp, "ns/d", "4")
	cp.Close()
	put(t, other, "10", cm("y", "10"))
	if err := db.Flush(ctx); err != nil {
		t.Fatalf("a later commit: %v", err)
	}
	// What a resumed collection serves after the commits.
	wantAfter := want
	wantAfter.rv = "4"
	wantAfter.keys = slices.Sorted(slices.Values(append(slices.DeleteFunc(slices.Clone(want.keys), func(k string) bool { return k == "ns/c" || k == "ns/d" }), "ns/d")))
	wantAfter.objects = maps.Clone(want.objects)
	wantAfter.objects["ns/a"], wantAfter.objects["ns/d"] = "4", "4"
	delete(wantAfter.objects, "ns/c")
	wantAfter.index = maps.Clone(want.index)
	wantAfter.index["a"], wantAfter.index["d"] = []string{"ns/a"}, []string{"ns/d"}
	delete(wantAfter.index, "c")
	after := readCollection(t, "after the commits", c)
	switch {
	case len(after.errs) > 0:
		t.Errorf("reads fail after the commits: %v", after.errs)
	case resumed && after.content() != wantAfter.content():
		t.Errorf("after the commits, the resumed collection serves\n%s\nwant\n%s", after.content(), wantAfter.content())
	case after.objects["ns/d"] != "4" || !slices.Contains(after.index["d"], "ns/d") || after.objects["ns/c"] != "" || slices.Contains(after.index["c"], "ns/c"):
		t.Errorf("after the commits, the collection serves %s, without ns/d at 4 or with ns/c", after.content())
	}
	if err := db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	// The file is whole again.
	for _, readOnly := range []bool{false, true} {
		what := fmt.Sprintf("reopen (read-only %t)", readOnly)
		re := readEverything(t, what, path, readOnly)
		switch {
		case len(re.errs) > 0:
			t.Errorf("%s: %v", what, re.errs)
		case re.rv != "4" || re.mustList != after.mustList:
			t.Errorf("%s: resourceVersion %q, must-list %t; want 4, %t", what, re.rv, re.mustList, after.mustList)
		case resumed && re.content() != wantAfter.content():
			t.Errorf("%s: the collection serves\n%s\nwant\n%s", what, re.content(), wantAfter.content())
		}
	}
}

// checkIdleOpen opens a copy of the damaged file at path for writing,
// opens its collection with opts, changes nothing, and closes it. What the
// open did not set aside it repaired, so the file is described again:
// DB.Collections, where inspect starts, succeeds. A commit would rewrite
// much of the collection's meta; an owner may have nothing to commit.
func checkIdleOpen(t *testing.T, path string, opts persist.CollectionOptions) {
	t.Helper()
	idle := filepath.Join(t.TempDir(), "idle.db")
	copyFile(t, path, idle)
	db, err := openDBNoPanic(idle, persist.Options{NoSync: true, Scheme: scheme.Scheme})
	if err != nil {
		t.Fatalf("idle open for writing: %v", err)
	}
	if _, err := openNoPanic(db, "cms", opts); err != nil {
		t.Fatalf("idle open of the collection for writing: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("idle Close: %v", err)
	}
	ro, err := openDBNoPanic(idle, persist.Options{ReadOnly: true, NoSync: true, Scheme: scheme.Scheme})
	if err != nil {
		t.Fatalf("after an idle open and a clean close, a read-only open: %v", err)
	}
	defer ro.Close()
	noPanic(t, "Collections after an idle open", func() { _, err = ro.Collections() })
	if err != nil {
		t.Errorf("after an idle open and a clean close, Collections: %v", err)
	}
}

// inspectEverything reads the file at path through inspectfile, as inspect
// does. Its errors must tell of damage.
func inspectEverything(t *testing.T, path string) {
	t.Helper()
	check := func(what string, err error) {
		t.Helper()
		if err != nil && !errors.Is(err, persist.ErrNoCollection) {
			checkDamageErr(t, "inspectfile: "+what, err)
		}
	}
	var f *inspectfile.File
	var err error
	noPanic(t, "inspectfile.Open", func() { f, err = inspectfile.Open(path, inspectfile.Options{}) })
	if err != nil {
		check("Open", err)
		return
	}
	defer f.Close()
	noPanic(t, "inspectfile", func() {
		_, err := f.Stats()
		check("Stats", err)
		check("Check", f.Check(func(error) {}))
		check("Records", f.Records("cms", func(string, []byte) error { return nil }))
		check("View", f.View("cms", func(c *inspectfile.Collection) error {
			_, err := c.Journal()
			check("Journal", err)
			_, err = c.Record("ns/a")
			check("Record", err)
			check("ForEachRecord", c.ForEachRecord(func(string, []byte) error { return nil }))
			names, err := c.IndexNames()
			check("IndexNames", err)
			for _, name := range append(names, "name") {
				check("ForEachIndexEntry", c.ForEachIndexEntry(name, func(string, string, []byte, error) error { return nil }))
				check("ForEachIndexedKey", c.ForEachIndexedKey(name, func(string, []string, error) error { return nil }))
				_, err = c.HasIndexEntry(name, "a", "ns/a")
				check("HasIndexEntry", err)
				_, _, err = c.IndexedValues(name, "ns/a")
				check("IndexedValues", err)
			}
			_, err = c.Stats()
			check("Stats", err)
			return nil
		}))
	})
}

// served is what a collection served through every read API.
type served struct {
	rv       string
	mustList bool
	keys     []string          // Keys
	objects  map[string]string // key -> resourceVersion, by Get
	index    map[string][]string
	errs     []error
}

// content describes what is served, except errors.
func (s served) content() string {
	return fmt.Sprintf("resourceVersion %q must-list %t keys %v objects %v index %v", s.rv, s.mustList, s.keys, s.objects, s.index)
}

// readEverything opens the file at path, and its collection "cms", and
// reads it through every read API. Errors of the opens and reads must wrap
// ErrCorrupt or ErrCorruptRecord; they are returned in errs.
func readEverything(t *testing.T, what, path string, readOnly bool) served {
	t.Helper()
	db, err := openDBNoPanic(path, persist.Options{ReadOnly: readOnly, NoSync: true, Scheme: scheme.Scheme})
	if err != nil {
		checkDamageErr(t, what+": Open", err)
		return served{errs: []error{err}}
	}
	defer func() {
		if err := db.Close(); err != nil {
			t.Errorf("%s: Close: %v", what, err)
		}
	}()
	noPanic(t, what+": Collections", func() {
		_, err = db.Collections()
	})
	checkDamageErr(t, what+": Collections", err)
	c, err := openNoPanic(db, "cms", damageOpts)
	if err != nil {
		if !readOnly || !errors.Is(err, persist.ErrNoCollection) {
			checkDamageErr(t, what+": Collection", err)
		}
		return served{errs: []error{err}}
	}
	s := readCollection(t, what, c)
	if err := c.Close(context.Background()); err != nil && !readOnly {
		t.Errorf("%s: Collection.Close: %v", what, err)
	}
	return s
}

// readCollection reads c through every read API. Every error must wrap
// ErrCorruptRecord; errors are returned in errs.
func readCollection(t *testing.T, what string, c *persist.Collection) served {
	t.Helper()
	s := served{rv: c.ResourceVersion(), mustList: c.MustList(), objects: map[string]string{}, index: map[string][]string{}}
	read := func(api string, fn func() error) {
		t.Helper()
		var err error
		noPanic(t, what+": "+api, func() { err = fn() })
		if err != nil {
			checkDamageErr(t, what+": "+api, err)
			s.errs = append(s.errs, fmt.Errorf("%s: %w", api, err))
		}
	}
	rvOf := func(obj runtime.Object) string {
		m, err := meta.Accessor(obj)
		if err != nil {
			return "?"
		}
		return m.GetResourceVersion()
	}
	probe := []string{"ns/a", "ns/b", "ns/c", "ns/d", "ns/zz"}
	read("Keys", func() (err error) {
		s.keys, err = c.Keys()
		slices.Sort(s.keys)
		return err
	})
	for _, key := range probe {
		read("Get", func() error {
			obj, ok, err := c.Get(key)
			if ok {
				s.objects[key] = rvOf(obj)
			}
			return err
		})
	}
	read("List", func() error { _, err := c.List(); return err })
	read("AppendList", func() error { _, err := c.AppendList(nil); return err })
	read("Len", func() error { _, err := c.Len(); return err })
	read("ResourceVersions", func() error { _, err := c.ResourceVersions(); return err })
	read("Versions", func() error { _, err := c.Versions(); return err })
	read("GetMany", func() error { _, err := c.GetMany(probe); return err })
	read("ForEach", func() error { return c.ForEach(func(string, runtime.Object) error { return nil }) })
	read("StoredIndexValues", func() error { _, err := c.StoredIndexValues(probe); return err })
	read("CommittedResourceVersion", func() error { _, err := c.CommittedResourceVersion(); return err })
	read("Checkpoints", func() error { _, err := c.Checkpoints(); return err })
	read("CheckpointAcks", func() error { _, err := c.CheckpointAcks("handler"); return err })
	read("Checkpoint", func() error {
		cp, err := c.Checkpoint("handler")
		if err != nil {
			return err
		}
		defer cp.Close()
		_ = cp.Deleted()
		_, _, err = cp.Unacknowledged()
		return err
	})
	if _, ok := c.Indexes()["name"]; !ok {
		// A read-only open serves the indexes the file records, and an
		// index without a record does not exist.
		s.index = nil
		return s
	}
	read("IndexValues", func() error { _, err := c.IndexValues("name"); return err })
	for _, v := range []string{"a", "b", "c", "d", "zz"} {
		read("IndexKeys", func() error {
			keys, err := c.IndexKeys("name", v)
			if len(keys) > 0 {
				s.index[v] = keys
			}
			return err
		})
		read("ByIndex", func() error { _, err := c.ByIndex("name", v); return err })
		read("AppendByIndex", func() error { _, err := c.AppendByIndex(nil, "name", v); return err })
	}
	return s
}

// checkDamageErr fails the test unless err is nil or tells of damage.
func checkDamageErr(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil && !errors.Is(err, persist.ErrCorrupt) && !errors.Is(err, persist.ErrCorruptRecord) {
		t.Errorf("%s: %v, want an error wrapping ErrCorrupt or ErrCorruptRecord", what, err)
	}
}

// noPanic runs fn and turns a panic into a test error.
func noPanic(t *testing.T, what string, fn func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s panicked: %v\n%s", what, r, debug.Stack())
		}
	}()
	fn()
}

// openDBNoPanic is persist.Open, with a panic returned as an error.
func openDBNoPanic(path string, opts persist.Options) (db *persist.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("Open panicked: %v\n%s", r, debug.Stack())
		}
	}()
	return persist.Open(path, opts)
}
