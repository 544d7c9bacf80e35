package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCompact: compact writes a new file that verifies and lists the same
// collections as the original, leaves the original unchanged, and refuses
// to overwrite an existing file.
func TestCompact(t *testing.T) {
	path := copyFixture(t)
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "compact.db")
	r := runInspect(t, "compact", path, dst)
	if r.code != 0 || !strings.Contains(r.stdout, dst) {
		t.Fatalf("compact: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if after, err := os.ReadFile(path); err != nil || string(after) != string(before) {
		t.Errorf("compact changed its source (err %v)", err)
	}
	if v := runInspect(t, "verify", dst); v.code != 0 {
		t.Errorf("verify of the compacted file: exit %d\n%s%s", v.code, v.stdout, v.stderr)
	}
	if a, b := runInspect(t, "ls", path), runInspect(t, "ls", dst); a.code != 0 || b.code != 0 || strings.ReplaceAll(a.stdout, path, "F") != strings.ReplaceAll(b.stdout, dst, "F") {
		t.Errorf("ls differs after compaction:\n%s\n---\n%s", a.stdout, b.stdout)
	}
	if again := runInspect(t, "compact", path, dst); again.code == 0 || !strings.Contains(again.stderr, "exists") {
		t.Errorf("compact onto an existing file: exit %d, stderr %q; want a refusal", again.code, again.stderr)
	}
}
