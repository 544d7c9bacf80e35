// Package gobuild builds this module's commands (and the stock Kubernetes
// ones in its build list) for the tests and benches that run them as
// processes.
package gobuild

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// rootModule is the repository's root module. go.mod replaces it with ../,
// so its directory is the repository's, which holds _output.
const rootModule = "github.com/boltinformer/boltinformer"

// Binary builds pkg of this module's build list into dir/name with the
// ordinary build flags, so the build cache that go vet and go test filled
// is reused, and returns its path. The compiler's output goes to stderr.
func Binary(dir, pkg, name string) (string, error) {
	out := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build %s: %w", pkg, err)
	}
	return out, nil
}

// OutputDir returns <repository>/_output/name, creating it: a place where
// Binary's outputs outlive the run. go build links a binary again only when
// the one already at its output path is not up to date (its build ID
// differs), so building into the same place every run links nothing after
// the first, where a new directory costs a link of each binary every time.
// Two runs at once in the same repository share the directory: one that
// links a binary there replaces it under the other, as with crsuite's
// _output/crsuite.
func OutputDir(name string) (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", rootModule)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go list -m %s: %w", rootModule, err)
	}
	root := strings.TrimSpace(string(out))
	if root == "" {
		return "", fmt.Errorf("go list -m %s: no directory", rootModule)
	}
	dir := filepath.Join(root, "_output", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return dir, nil
}
