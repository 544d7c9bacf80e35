package apiservertest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRepoRootSkipsNestedModules(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if got := modulePath(filepath.Join(root, "go.mod")); got != rootModule {
		t.Fatalf("repoRoot() = %s with module %q, want %q", root, got, rootModule)
	}
	// tools/apiserver is a nested module; from inside it the root is the same.
	t.Chdir(filepath.Join(root, "tools", "apiserver"))
	if got, err := repoRoot(); err != nil || got != root {
		t.Fatalf("repoRoot() from tools/apiserver = %q, %v; want %q", got, err, root)
	}
}

func TestMissingBinariesSayHowToBuild(t *testing.T) {
	t.Setenv(binDirEnv, t.TempDir())
	_, err := findBinaries()
	if err == nil || !strings.Contains(err.Error(), "make test-binaries") {
		t.Fatalf("findBinaries() error = %v, want a hint to run make test-binaries", err)
	}
	if err := os.WriteFile(filepath.Join(os.Getenv(binDirEnv), "etcd"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := findBinaries(); err == nil || !strings.Contains(err.Error(), "kube-apiserver") {
		t.Fatalf("findBinaries() with only etcd: error = %v, want kube-apiserver missing", err)
	}
}
