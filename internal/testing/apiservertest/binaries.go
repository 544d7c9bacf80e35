package apiservertest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// rootModule is the module whose directory holds _output/bin.
const rootModule = "github.com/boltinformer/boltinformer"

// binDirEnv overrides where the test binaries are looked up.
const binDirEnv = "BOLTINFORMER_TEST_BIN_DIR"

// binaries are the absolute paths of the executables Start runs.
type binaries struct {
	etcd, apiserver string
}

// BinDir returns the directory holding the etcd and kube-apiserver
// binaries Start runs ($BOLTINFORMER_TEST_BIN_DIR, or <repository
// root>/_output/bin), for tests that start them another way (envtest's
// KUBEBUILDER_ASSETS). The error says how to build them.
func BinDir() (string, error) {
	b, err := findBinaries()
	if err != nil {
		return "", err
	}
	return filepath.Dir(b.apiserver), nil
}

// findBinaries locates etcd and kube-apiserver, or explains how to build them.
func findBinaries() (binaries, error) {
	dir := os.Getenv(binDirEnv)
	if dir == "" {
		root, err := repoRoot()
		if err != nil {
			return binaries{}, fmt.Errorf("%v; set %s to the directory holding etcd and kube-apiserver", err, binDirEnv)
		}
		dir = filepath.Join(root, "_output", "bin")
	}
	b := binaries{etcd: filepath.Join(dir, "etcd"), apiserver: filepath.Join(dir, "kube-apiserver")}
	for _, p := range []string{b.etcd, b.apiserver} {
		if fi, err := os.Stat(p); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return binaries{}, fmt.Errorf("test binary %s not found: run `make test-binaries` (hack/build-test-binaries.sh) first", p)
		}
	}
	return b, nil
}

// repoRoot walks up from the working directory to the directory whose go.mod
// declares rootModule. Nested modules (tools/...) are skipped on the way.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if modulePath(filepath.Join(dir, "go.mod")) == rootModule {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod for module " + rootModule + " above the working directory")
		}
		dir = parent
	}
}

// modulePath returns the module path declared in a go.mod, or "".
func modulePath(gomod string) string {
	f, err := os.Open(gomod)
	if err != nil {
		return ""
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "module"); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}
