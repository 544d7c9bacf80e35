package internal

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const modulePath = "github.com/boltinformer/boltinformer"

// kind is where a package sits in the layering internal/doc.go describes.
type kind int

const (
	ships kind = iota
	testSupport
	benchSupport
)

func (k kind) String() string {
	return [...]string{"shipping", "test support", "benchmark support"}[k]
}

// kindOf sorts a slash-separated directory of the root module. Directories
// outside internal/ count as shipping: library packages, whose non-test
// files must not reach test or benchmark support.
func kindOf(dir string) kind {
	switch {
	case dir == "internal/testing" || strings.HasPrefix(dir, "internal/testing/"),
		dir == "simulation" || strings.HasPrefix(dir, "simulation/"),
		dir == "e2e" || strings.HasPrefix(dir, "e2e/"):
		return testSupport
	case dir == "internal/bench" || strings.HasPrefix(dir, "internal/bench/"):
		return benchSupport
	}
	return ships
}

// importKind sorts an import path of this module; ok is false for others.
func importKind(path string) (k kind, ok bool) {
	rest, ok := strings.CutPrefix(path, modulePath+"/")
	if !ok {
		return ships, false
	}
	return kindOf(rest), true
}

// layoutViolations lists the non-test imports of the root module's Go files
// under root that point back up: shipping code importing test or benchmark
// support, or test support importing benchmark support.
func layoutViolations(t *testing.T, root string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			if rel != "." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata") {
				return filepath.SkipDir
			}
			// Another module's packages are not the root module's.
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		from := kindOf(filepath.ToSlash(filepath.Dir(rel)))
		for _, spec := range f.Imports {
			p, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				return err
			}
			if to, ok := importKind(p); ok && to > from {
				found = append(found, rel+" ("+from.String()+") imports "+p+" ("+to.String()+")")
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// TestLayout keeps the arrows of internal/doc.go pointing down, over every
// non-test Go file of the root module.
func TestLayout(t *testing.T) {
	for _, v := range layoutViolations(t, "..") {
		t.Errorf("%s: an import back up; internal/doc.go says which folder may import which", v)
	}
	// The root's test-only packages stay unimportable.
	for _, dir := range []string{"simulation", "e2e"} {
		files, err := filepath.Glob(filepath.Join("..", dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) == 0 {
			t.Errorf("%s/ holds no Go file; update internal/doc.go if it moved", dir)
		}
		for _, f := range files {
			if name := filepath.Base(f); name != "doc.go" && !strings.HasSuffix(name, "_test.go") {
				t.Errorf("%s/%s: %s/ holds only _test.go files and doc.go, so that nothing imports it", dir, name, dir)
			}
		}
	}
}

// TestLayoutSeesViolations builds a small tree with one import of each wrong
// direction, so that a walk which saw nothing would fail here.
func TestLayoutSeesViolations(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"go.mod":                        "module " + modulePath + "\n",
		"cache/bad.go":                  `package cache; import _ "` + modulePath + `/internal/testing/poll"`,
		"cache/ok_test.go":              `package cache; import _ "` + modulePath + `/internal/bench/runstats"`,
		"internal/wire/bad.go":          `package wire; import _ "` + modulePath + `/internal/bench/benchkit"`,
		"internal/testing/poll/bad.go":  `package poll; import _ "` + modulePath + `/internal/bench/runstats"`,
		"internal/testing/poll/ok.go":   `package poll; import _ "` + modulePath + `/internal/wire"`,
		"internal/bench/benchkit/ok.go": `package benchkit; import _ "` + modulePath + `/internal/testing/poll"`,
		"bench/go.mod":                  "module " + modulePath + "/bench\n",
		"bench/ok.go":                   `package bench; import _ "` + modulePath + `/internal/bench/benchkit"`,
	}
	for name, content := range files {
		path := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := layoutViolations(t, root)
	want := []string{
		"cache/bad.go (shipping) imports " + modulePath + "/internal/testing/poll (test support)",
		"internal/testing/poll/bad.go (test support) imports " + modulePath + "/internal/bench/runstats (benchmark support)",
		"internal/wire/bad.go (shipping) imports " + modulePath + "/internal/bench/benchkit (benchmark support)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
