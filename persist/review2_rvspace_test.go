package persist_test

import (
	"path/filepath"
	"testing"

	"github.com/boltinformer/boltinformer/persist"
)

// c3e89c9 refuses at open a stored resourceVersion "with bytes outside
// printable ASCII" (docs/persist.md, plausibleResourceVersion's comment:
// "other servers give tokens of printable characters"), as damage: the
// collection is emptied and starts cold (DamageSetAside), and a read-only
// open fails. The check is c < 0x21 || c > 0x7e, which also refuses the
// space (0x20), a printable ASCII character. resourceVersions are opaque
// strings; a server whose versions hold a space (a timestamp, say) has its
// collection found damaged and emptied at every open: every restart is a
// cold start, reported as damage. Apply stores such a version without a
// word, so the file this build wrote is the one it calls damaged.
func TestAResourceVersionWithASpaceIsNotDamage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	opts := persist.CollectionOptions{Indexes: map[string]string{"name": "1"}, IndexValues: byName, Provenance: map[string]string{"list": "cms"}}
	rv := "2026-11-29 10:20:48.123"

	db := openDB(t, path, persist.Options{})
	c, err := db.Collection("cms", opts)
	if err != nil {
		t.Fatal(err)
	}
	putNamed(t, c, rv, cm("a", rv))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = openDB(t, path, persist.Options{})
	if c, err = db.Collection("cms", opts); err != nil {
		t.Fatal(err)
	}
	if err := c.DamageSetAside(); err != nil {
		t.Errorf("the collection this build wrote at resourceVersion %q was found damaged and emptied: %v", rv, err)
	}
	if got := c.ResourceVersion(); got != rv {
		t.Errorf("ResourceVersion() = %q after reopening, want %q", got, rv)
	}
}
