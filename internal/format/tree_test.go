package format

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// A Tree split between a fold's copy and what is left of its tree reads as
// the one tree they make: every cursor move, Get, ForEach and KeyN, over
// random keys split at random places, both parts possibly empty or absent.
func TestTreeReadsItsPartsAsOne(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "tree.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 4))
		var keys []string
		for range rng.IntN(40) {
			keys = append(keys, fmt.Sprintf("k%03d", rng.IntN(500)))
		}
		slices.Sort(keys)
		keys = slices.Compact(keys)
		split := 0
		if len(keys) > 0 {
			split = rng.IntN(len(keys) + 1)
		}
		copyAbsent := split == 0 && rng.IntN(2) == 0
		err := db.Update(func(tx *bolt.Tx) error {
			_ = tx.DeleteBucket([]byte("coll"))
			coll, err := tx.CreateBucket([]byte("coll"))
			if err != nil {
				return err
			}
			live, err := coll.CreateBucket(ObjectsBucket)
			if err != nil {
				return err
			}
			rebuilt := live
			if !copyAbsent {
				rb, err := coll.CreateBucket(RebuildBucket)
				if err != nil {
					return err
				}
				if rebuilt, err = rb.CreateBucket(ObjectsBucket); err != nil {
					return err
				}
			}
			for i, k := range keys {
				b := live
				if i < split {
					b = rebuilt
				}
				if err := b.Put([]byte(k), []byte("v"+k)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		_ = db.View(func(tx *bolt.Tx) error {
			tree := CollectionTree(tx.Bucket([]byte("coll")), ObjectsBucket)
			checkTree(t, fmt.Sprintf("seed %d (%d keys, %d copied)", seed, len(keys), split), rng, tree, keys)
			return nil
		})
	}
}

func checkTree(t *testing.T, what string, rng *rand.Rand, tree Tree, keys []string) {
	t.Helper()
	if !tree.Exists() || !tree.CheckOrder() {
		t.Fatalf("%s: Exists %v, CheckOrder %v", what, tree.Exists(), tree.CheckOrder())
	}
	var walked []string
	_ = tree.ForEach(func(k, v []byte) error {
		if string(v) != "v"+string(k) {
			t.Fatalf("%s: ForEach %s = %s", what, k, v)
		}
		walked = append(walked, string(k))
		return nil
	})
	if !slices.Equal(walked, keys) && len(walked)+len(keys) > 0 {
		t.Fatalf("%s: ForEach walked %v, want %v", what, walked, keys)
	}
	if n := tree.KeyN(); n != len(keys) {
		t.Fatalf("%s: KeyN = %d, want %d", what, n, len(keys))
	}
	// A random walk of cursor moves, against the position in keys.
	cur := tree.Cursor()
	at := -1 // -1: before the first or unpositioned; len(keys): past the last
	for range 60 {
		var k, v []byte
		var want int
		switch op := rng.IntN(5); op {
		case 0:
			k, v = cur.First()
			want = 0
		case 1:
			k, v = cur.Last()
			want = len(keys) - 1
		case 2:
			if at < 0 || at >= len(keys) {
				continue // bbolt's own cursor leaves this unspecified
			}
			k, v = cur.Next()
			want = at + 1
		case 3:
			if at < 0 || at >= len(keys) {
				continue
			}
			k, v = cur.Prev()
			want = at - 1
		case 4:
			seek := fmt.Sprintf("k%03d", rng.IntN(520))
			k, v = cur.Seek([]byte(seek))
			want, _ = slices.BinarySearch(keys, seek)
		}
		if want < 0 || want >= len(keys) {
			if k != nil {
				t.Fatalf("%s: a move to %d of %d keys gave %s", what, want, len(keys), k)
			}
			at = -1
			continue
		}
		if string(k) != keys[want] || string(v) != "v"+keys[want] {
			t.Fatalf("%s: a move to %d gave %q=%q, want %q", what, want, k, v, keys[want])
		}
		at = want
		if got := tree.Get(k); string(got) != "v"+keys[want] {
			t.Fatalf("%s: Get(%s) = %q", what, k, got)
		}
	}
	if got := tree.Get([]byte("absent")); got != nil {
		t.Fatalf("%s: Get of an absent key = %q", what, got)
	}
}
