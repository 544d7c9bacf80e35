package main

import (
	"regexp"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/boltinformer/boltinformer/internal/format"
	"github.com/boltinformer/boltinformer/persist"
)

// addPodsJournal adds one journal generation to the fixture's pods with raw
// bbolt, leaving the trees as they are: pod 0 moves to another node (and
// its node entry in the tree is removed, an inconsistency the journal
// supersedes), pod 1 is deleted, and a copy of pod 0 is created under a key
// sorting between them.
func addPodsJournal(t *testing.T, path string) {
	t.Helper()
	const (
		pod0    = "storefront/checkout-api-7d9c8b6f5-00000"
		pod1    = "storefront/checkout-api-7d9c8b6f5-00001"
		created = "storefront/checkout-api-7d9c8b6f5-00000x"
		node    = "ip-10-0-9-99.eu-west-1.compute.internal"
	)
	codec := persist.NewCodec(scheme.Scheme)
	damage(t, path, "pods", func(coll *bolt.Bucket) error {
		obj, err := codec.Decode(coll.Bucket([]byte("objects")).Get([]byte(pod0)))
		if err != nil {
			return err
		}
		old := obj.(*corev1.Pod)
		if err := index(coll, "node", "byValue").Delete(indexEntry(old.Spec.NodeName, pod0)); err != nil {
			return err
		}
		put := func(name, rv string) format.JournalEntry {
			p := old.DeepCopy()
			p.Name, p.ResourceVersion, p.Spec.NodeName = name, rv, node
			rec, err := codec.Encode(p)
			if err != nil {
				t.Fatal(err)
			}
			return format.JournalEntry{Key: p.Namespace + "/" + name, Record: rec,
				Indexes: map[string][]string{"namespace": {p.Namespace}, "node": {node}}}
		}
		gen, err := firstJournalGeneration(coll)
		if err != nil {
			return err
		}
		for i, e := range []format.JournalEntry{
			put("checkout-api-7d9c8b6f5-00000", "49000001"),
			{Key: pod1, Deleted: true},
			put(strings.TrimPrefix(created, "storefront/"), "49000002"),
		} {
			raw, err := format.AppendJournalEntry(nil, e)
			if err != nil {
				return err
			}
			if err := gen.Put(format.JournalSeq(uint64(i+1)), raw); err != nil {
				return err
			}
		}
		return nil
	})
}

// TestCommandsReadTheJournal checks that verify, get, index and stats read
// a collection as its trees with its journal applied.
func TestCommandsReadTheJournal(t *testing.T) {
	path := copyFixture(t)
	addPodsJournal(t, path)

	r := runInspect(t, "verify", path)
	if r.code != 0 || !strings.Contains(r.stdout, "collection pods: 4 records; journal: 3 entries applied; index namespace: 4 entries; index node: 3 entries; ok") {
		t.Errorf("verify: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	r = runInspect(t, "get", "pods", "-f", path, "-A", "-o", "name")
	want := "pod/payments-worker-5c7d9-x2x9q\npod/checkout-api-7d9c8b6f5-00000\npod/checkout-api-7d9c8b6f5-00000x\npod/checkout-api-7d9c8b6f5-00003\n"
	if r.code != 0 || r.stdout != want {
		t.Errorf("get: exit %d\n%s%s\nwant\n%s", r.code, r.stdout, r.stderr, want)
	}

	r = runInspect(t, "index", "pods", "node", "-f", path)
	if r.code != 0 || !regexp.MustCompile(`(?m)^ip-10-0-9-99\.eu-west-1\.compute\.internal +2$`).MatchString(r.stdout) {
		t.Errorf("index: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	r = runInspect(t, "stats", path)
	for _, re := range []string{
		`(?m)^pods +\d+ +\S+ +7 `, // index entries with the journal applied
		`(?m)^COLLECTION +JOURNAL GENERATION +ENTRIES +BYTES +FOLDED THROUGH$`,
		`(?m)^pods +1 +3 +\S+ +<none>$`,
		`(?m)^pods +journal/1 +3 `,
	} {
		if !regexp.MustCompile(re).MatchString(r.stdout) {
			t.Errorf("stats output does not match %s:\n%s", re, r.stdout)
		}
	}
}

// TestVerifyDetectsCorruptJournal checks that a journal entry that does not
// decode fails verify: as a problem when persist.DB.Collections does not
// read the journal, as an error opening the file when it does.
func TestVerifyDetectsCorruptJournal(t *testing.T) {
	path := copyFixture(t)
	damage(t, path, "pods", func(coll *bolt.Bucket) error {
		gen, err := firstJournalGeneration(coll)
		if err != nil {
			return err
		}
		return gen.Put(format.JournalSeq(1), []byte{0x80})
	})
	r := runInspect(t, "verify", path)
	want := `generation 1: corrupt record: journal entry: unknown flags 0x80`
	if r.code != 1 || !strings.Contains(r.stdout+r.stderr, want) {
		t.Errorf("verify: exit %d\n%s%s\nwant exit 1 and %s", r.code, r.stdout, r.stderr, want)
	}
}

// firstJournalGeneration creates generation 1 of coll's journal, as a
// commit that starts a journal does.
func firstJournalGeneration(coll *bolt.Bucket) (*bolt.Bucket, error) {
	jb, err := coll.CreateBucketIfNotExists(format.JournalBucket)
	if err != nil {
		return nil, err
	}
	return jb.CreateBucket(format.JournalSeq(1))
}
