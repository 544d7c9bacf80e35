package persist_test

import (
	"path/filepath"
	"testing"

	"github.com/boltinformer/boltinformer/internal/format"
	"github.com/boltinformer/boltinformer/persist"
	"github.com/boltinformer/boltinformer/persist/inspectfile"
)

// inspectfile's Journal describes "how far the oldest has been folded",
// and `inspect stats` prints it as FOLDED THROUGH while a generation is
// being folded. A fold that writes the trees afresh stands at its copies'
// last key. A file whose fold has copied records must say how far it got,
// as a file mid-fold in place did.
func TestInspectJournalSaysHowFarAFoldGot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	dbOpts := persist.WithFoldChunk(persist.WithJournalBytes(persist.Options{BatchInterval: 1 << 40}, 2048), 2)
	opts := persist.CollectionOptions{Indexes: map[string]string{"byLabel": "v1"}, IndexValues: journalIndexValues}
	foldInProgress(t, path, dbOpts, opts)

	f, err := inspectfile.Open(path, inspectfile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.View("cms", func(r *inspectfile.Collection) error {
		j, err := r.Journal()
		if err != nil {
			return err
		}
		if stats, err := r.Stats(); err == nil {
			for _, s := range stats {
				if s.Bucket == string(format.RebuildBucket)+"/"+string(format.ObjectsBucket) && s.KeyN == 0 {
					t.Fatalf("the fixture's fold has copied nothing")
				}
			}
		}
		if j.Folded == nil {
			t.Errorf("Journal() of a file whose fold of generation %v has copied records says Folded = nil (inspect stats: FOLDED THROUGH none); want the copies' last key", j.Generations)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
