// Package gobuild builds this module's commands (and the stock Kubernetes
// ones in its build list) for the tests and benches that run them as
// processes.
package gobuild

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

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
