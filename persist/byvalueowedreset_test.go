package persist_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/boltinformer/boltinformer/internal/format"
	"github.com/boltinformer/boltinformer/persist"
)

// owedResetUniverse holds the index values objects draw from: the empty value,
// short ones, and two longer than format.MaxInlineValue, stored hashed.
var owedResetUniverse = []string{"", "v1", "v2", "v3", strings.Repeat("L", format.MaxInlineValue+5), strings.Repeat("M", format.MaxInlineValue+40)}

// owedResetValues reads an object's values of index from its annotation, a JSON
// list, so that duplicates and the empty value survive.
func owedResetValues(index string, obj runtime.Object) ([]string, error) {
	raw := obj.(*corev1.ConfigMap).Annotations["idx."+index]
	if raw == "" {
		return nil, nil
	}
	var vs []string
	err := json.Unmarshal([]byte(raw), &vs)
	return vs, err
}

// owedResetObject draws up to two values of each index a, b and c for key.
func owedResetObject(rng *rand.Rand, key, rv string) (*corev1.ConfigMap, map[string][]string) {
	_, name, _ := strings.Cut(key, "/")
	obj := cm(name, rv)
	obj.Annotations = map[string]string{}
	all := map[string][]string{}
	for _, index := range []string{"a", "b", "c"} {
		var vs []string
		for range rng.IntN(3) {
			vs = append(vs, owedResetUniverse[rng.IntN(len(owedResetUniverse))])
		}
		if len(vs) > 0 {
			raw, _ := json.Marshal(vs)
			obj.Annotations["idx."+index] = string(raw)
			all[index] = vs
		}
	}
	return obj, all
}

// owedResetOps is the op storing obj with the values of the indexes in use.
func owedResetOps(obj *corev1.ConfigMap, all map[string][]string, inUse map[string]string) persist.Op {
	ix := map[string][]string{}
	for name := range inUse {
		if vs := all[name]; len(vs) > 0 {
			ix[name] = vs
		}
	}
	return persist.Op{Key: obj.Namespace + "/" + obj.Name, Object: obj, Indexes: ix}
}

// owedResetCheck checks every lookup of the indexes in use against m.
func owedResetCheck(t *testing.T, what string, c *persist.Collection, m map[string]map[string][]string, inUse map[string]string) {
	t.Helper()
	for index := range inUse {
		var present []string
		for _, value := range owedResetUniverse {
			var want []string
			for key, all := range m {
				if slices.Contains(all[index], value) {
					want = append(want, key)
				}
			}
			sort.Strings(want)
			if len(want) > 0 {
				present = append(present, value)
			}
			got, err := c.IndexKeys(index, value)
			if err != nil || (!slices.Equal(got, want) && len(got)+len(want) > 0) {
				t.Fatalf("%s: IndexKeys(%s, %.8q) = %v (%v), want %v", what, index, value, got, err, want)
			}
		}
		sort.Strings(present)
		got, err := c.IndexValues(index)
		sort.Strings(got)
		if err != nil || (!slices.Equal(got, present) && len(got)+len(present) > 0) {
			t.Fatalf("%s: IndexValues(%s) = %d values (%v), want %d", what, index, len(got), err, len(present))
		}
	}
}

// owedResetOwed counts the checks that found the byValue entries owed, so that
// the generator fails if it never exercised the mark.
var owedResetOwed int

// TestOwedIndexEntriesAcrossResetsAndIndexChanges drives fills, changes,
// deletions of every object, resets, AddIndexes, reopens with another
// index set or version, and read-only opens, unbounded and bounded. Index
// values include the empty value, duplicates and values stored hashed.
// Every lookup must agree with the objects, owed or paid.
func TestOwedIndexEntriesAcrossResetsAndIndexChanges(t *testing.T) {
	seeds := 30
	if testing.Short() {
		seeds = 6
	}
	owedResetOwed = 0
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { owedResetRun(t, uint64(seed)) })
	}
	if owedResetOwed == 0 {
		t.Error("no check found the byValue entries owed: the mark was never exercised")
	}
}

// owedResetRun runs one seed of TestOwedIndexEntriesAcrossResetsAndIndexChanges.
func owedResetRun(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 19))
	dir := t.TempDir()
	path := filepath.Join(dir, "cache.db")
	dbOpts := persist.Options{BatchInterval: time.Hour, PageSize: 4096, Scheme: scheme.Scheme}
	dbOpts = persist.WithWriteAhead(dbOpts, 3+rng.IntN(10), nil)
	if rng.IntN(2) == 0 {
		dbOpts = persist.WithJournalBytes(dbOpts, int64(1000+rng.IntN(10000)))
	}
	var db *persist.DB
	var c *persist.Collection
	inUse := map[string]string{"a": "1", "b": "1"}
	open := func() {
		var err error
		if db, err = persist.Open(path, dbOpts); err != nil {
			t.Fatal(err)
		}
		copts := persist.CollectionOptions{Indexes: maps.Clone(inUse), IndexValues: owedResetValues}
		if rng.IntN(3) == 0 {
			copts.CacheObjects = 1 + rng.IntN(5)
		}
		if c, err = db.Collection("cms", copts); err != nil {
			t.Fatal(err)
		}
	}
	open()
	defer func() { db.Close() }()
	m := map[string]map[string][]string{}
	next, rv := 0, 0
	apply := func(ops []persist.Op) {
		arg := ""
		if rng.IntN(3) == 0 {
			rv++
			arg = fmt.Sprint(rv)
		}
		if err := c.Apply(ops, arg); err != nil {
			t.Fatal(err)
		}
	}
	for step := range 80 {
		what := fmt.Sprintf("step %d", step)
		switch r := rng.IntN(24); {
		case r < 7:
			var ops []persist.Op
			for range 1 + rng.IntN(30) {
				key := fmt.Sprintf("ns/k-%05d", next)
				next++
				obj, all := owedResetObject(rng, key, "1")
				ops = append(ops, owedResetOps(obj, all, inUse))
				m[key] = all
			}
			apply(ops)
		case r < 10:
			var ops []persist.Op
			for _, key := range slices.Sorted(maps.Keys(m)) { // sorted: a seed replays
				if rng.IntN(3) > 0 {
					continue
				}
				if rng.IntN(2) == 0 {
					ops = append(ops, persist.Op{Key: key, Delete: true})
					delete(m, key)
					continue
				}
				obj, all := owedResetObject(rng, key, "2")
				ops = append(ops, owedResetOps(obj, all, inUse))
				m[key] = all
			}
			apply(ops)
		case r < 11: // every object deleted
			var ops []persist.Op
			for key := range m {
				ops = append(ops, persist.Op{Key: key, Delete: true})
			}
			clear(m)
			apply(ops)
		case r < 14:
			if err := c.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
		case r < 15:
			if err := c.Reset(context.Background(), c.Provenance()); err != nil {
				t.Fatal(err)
			}
			clear(m)
		case r < 16:
			if _, ok := inUse["c"]; !ok {
				if err := c.AddIndexes(context.Background(), map[string]string{"c": "1"}, owedResetValues); err != nil {
					t.Fatal(err)
				}
				inUse["c"] = "1"
			}
		case r < 20:
			if owed, _ := persist.ByValueOwed(c); owed {
				owedResetOwed++
			}
			owedResetCheck(t, what, c, m, inUse)
		default:
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			switch rng.IntN(4) {
			case 0:
				delete(inUse, "c")
			case 1:
				inUse["c"] = "1"
			case 2:
				inUse["b"] = fmt.Sprint(1 + rng.IntN(2))
			}
			// Read-only, unbounded and bounded.
			for _, bound := range []int{0, 2} {
				rdb, err := persist.Open(path, persist.Options{ReadOnly: true, Scheme: scheme.Scheme})
				if err != nil {
					t.Fatal(err)
				}
				rc, err := rdb.Collection("cms", persist.CollectionOptions{CacheObjects: bound})
				if err != nil {
					t.Fatal(err)
				}
				stored := map[string]string{"a": "1"}
				owedResetCheck(t, what+" read-only", rc, fileIdx(t, rc), stored)
				rdb.Close()
			}
			open()
			owedResetCheck(t, what+", reopened", c, m, inUse)
		}
	}
	owedResetCheck(t, "end", c, m, inUse)
}

// fileIdx returns the index values of c's objects.
func fileIdx(t *testing.T, c *persist.Collection) map[string]map[string][]string {
	m := map[string]map[string][]string{}
	err := c.ForEach(func(key string, obj runtime.Object) error {
		m[key] = map[string][]string{}
		for _, index := range []string{"a", "b", "c"} {
			vs, _ := owedResetValues(index, obj)
			m[key][index] = vs
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}
