package persist_test

import (
	"path/filepath"
	"testing"

	"github.com/boltinformer/boltinformer/persist"
)

// IndexValues is required only when Indexes names an index the file does
// not hold at that version (CollectionOptions). A damaged journal is set
// aside at open, and never makes a collection that cannot be opened. An
// owner whose file holds its index at the version it names may open
// without IndexValues. If the journal is damaged while a fold has written
// copies, the set-aside drops the indexes, and the open must still
// succeed.
func TestJournalSetAsideDuringAFoldOpensWithoutIndexValues(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	dbOpts := persist.WithFoldChunk(persist.WithJournalBytes(persist.Options{BatchInterval: 1 << 40}, 2048), 2)
	opts := persist.CollectionOptions{Indexes: map[string]string{"byLabel": "v1"}, IndexValues: journalIndexValues}
	foldInProgress(t, path, dbOpts, opts)

	// The file holds byLabel at v1, so an open naming it needs no
	// IndexValues.
	noValues := persist.CollectionOptions{Indexes: map[string]string{"byLabel": "v1"}}
	db := openDB(t, path, dbOpts)
	if _, err := db.Collection("cms", noValues); err != nil {
		t.Fatalf("the undamaged file does not open without IndexValues: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	damageNewestJournalEntry(t, path)

	db = openDB(t, path, dbOpts)
	c, err := db.Collection("cms", noValues)
	if err != nil {
		t.Fatalf("a journal damaged mid-fold makes the collection impossible to open: %v", err)
	}
	if c.JournalSetAside() == nil {
		t.Error("JournalSetAside() = nil, want the damaged journal set aside")
	}
}
