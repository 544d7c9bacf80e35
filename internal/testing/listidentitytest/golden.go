// Package listidentitytest holds what the golden tests of the list
// identities (factory, boltcr) share.
package listidentitytest

import (
	"os"
	"path/filepath"
	"testing"
)

// CompareGolden is for the golden tests that pin the collection names and
// list identities the factories and boltcr record: it fails t unless got
// is the content of the golden file at path, or, with update, rewrites the
// file first. A difference means existing cache files would start cold.
func CompareGolden(t testing.TB, path, got string, update bool) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("names changed; existing cache files would start cold.\n--- got\n%s\n--- want (%s)\n%s", got, path, want)
	}
}
