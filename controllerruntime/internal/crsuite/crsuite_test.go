package crsuite_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/boltinformer/boltinformer/internal/testing/apiservertest"
)

// upstream is the controller-runtime the patch and the hook are made for;
// controllerruntime/go.mod must require it.
const (
	upstreamModule  = "sigs.k8s.io/controller-runtime"
	upstreamVersion = "v0.25.2"
)

// seed fixes Ginkgo's spec order, so that a warm run hands files from spec
// to spec the same way every time.
const seed = 1

// suites are the packages of controller-runtime whose suites run through
// boltcr.
var suites = []string{"cache", "controller"}

// exceptions are the specs a persistent cache cannot pass, by suite and
// mode, each with the reason (also in doc.go). Every other spec must pass.
var exceptions = map[string]map[string]string{
	"cache/cold":      {},
	"cache/warm":      {},
	"controller/cold": {},
}

// racing are pkg/cache's specs, by their own text, whose outcome depends on
// scheduling, with controller-runtime's own cache too. Each cancels a
// context, then asks for an informer not yet built. It expects a timeout
// because the new informer has not synced. GetInformer checks HasSynced once
// after starting it. If building the informer took longer than its list,
// it has synced and no error comes. Ginkgo runs a failed spec again, once,
// and only these may pass on the second attempt.
var racing = map[string]bool{
	"should return an error when context is cancelled":                       true,
	"should allow for get informer to be cancelled":                          true,
	"should allow getting an informer by group/version/kind to be cancelled": true,
}

// TestControllerRuntimeSuites runs controller-runtime's own Ginkgo suites
// with every cache they build routed through boltcr: pkg/controller's cold
// (each cache on a new file: its specs are about controllers, and two of
// them check that a manager leaks no goroutine, never started or stopped),
// then pkg/cache's cold and warm (each cache on the first file whose cache
// stopped, so it resumes what earlier specs' caches stored, against the
// same apiserver).
func TestControllerRuntimeSuites(t *testing.T) {
	binDir, err := apiservertest.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	work, tests := buildSuites(t)
	// Alone: its goroutine leak specs allow a second for goroutines to end.
	t.Run("controller", func(t *testing.T) {
		runSuite(t, work, "controller", tests["controller"], binDir, "cold")
	})
	t.Run("cache", func(t *testing.T) {
		// The two runs are independent (each has its own apiserver and
		// directory) and mostly wait on the apiserver: run them together.
		for _, mode := range []string{"cold", "warm"} {
			t.Run(mode, func(t *testing.T) {
				t.Parallel()
				runSuite(t, work, "cache", tests["cache"], binDir, mode)
			})
		}
	})
}

// runSuite runs the binary test of pkg/<suite>'s suite in mode with its
// own envtest (binDir's kube-apiserver and etcd) and checks Ginkgo's report.
func runSuite(t *testing.T, work, suite, test, binDir, mode string) {
	run := suite + "/" + mode
	dir := filepath.Join(work, suite+"-"+mode)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(dir, "report.json")
	logPath := filepath.Join(dir, "suite.log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	// Ginkgo's timeout comes first, so that it still writes the report.
	cmd := exec.Command(test, "-test.run=^TestSource$", "-test.timeout=50m", "-ginkgo.timeout=45m",
		fmt.Sprintf("-ginkgo.seed=%d", seed), "-ginkgo.no-color", "-ginkgo.json-report="+report,
		"-ginkgo.flake-attempts=2")
	cmd.Dir = filepath.Join(work, "controller-runtime", "pkg", suite)
	cmd.Env = append(os.Environ(),
		"KUBEBUILDER_ASSETS="+binDir,
		"BOLTCR_SUITE_MODE="+mode,
		"BOLTCR_SUITE_DIR="+dir,
	)
	cmd.Stdout, cmd.Stderr = log, log
	start := time.Now()
	runErr := cmd.Run()
	elapsed := time.Since(start).Round(time.Second)

	specs, err := readReport(report)
	if err != nil || len(specs) == 0 {
		t.Fatalf("the suite (exit: %v) reported no spec (%v); its output is in %s", runErr, err, logPath)
	}
	var passed, failed, skipped []string
	var unexpected []spec
	for _, s := range specs {
		switch s.State {
		case "passed":
			passed = append(passed, s.name())
			if s.NumAttempts > 1 {
				if racing[s.LeafNodeText] {
					t.Logf("passed on attempt %d, as a spec racing the informer's sync may: %s", s.NumAttempts, s.name())
				} else {
					s.State = fmt.Sprintf("passed only on attempt %d", s.NumAttempts)
					unexpected = append(unexpected, s)
				}
			}
		case "skipped", "pending":
			skipped = append(skipped, s.name())
		default: // failed, panicked, timedout, interrupted, aborted
			failed = append(failed, s.name())
			if _, ok := exceptions[run][s.name()]; !ok {
				unexpected = append(unexpected, s)
			}
		}
	}
	t.Logf("controller-runtime %s pkg/%s suite, %s: %d specs: %d passed, %d failed, %d skipped, in %v (output: %s)",
		upstreamVersion, suite, mode, len(specs), len(passed), len(failed), len(skipped), elapsed, logPath)
	if r, err := readRouting(filepath.Join(dir, "routing.json")); err != nil {
		t.Errorf("the hook's routing.json: %v", err)
	} else {
		t.Logf("caches built: %d on boltcr over a new file, %d on boltcr over a file an earlier cache left, %d on controller-runtime's cache (Options.NewInformer set); %d specs built none on boltcr",
			r.New, r.Reopened, r.Default, len(specs)-r.specs)
		if r.New+r.Reopened == 0 {
			t.Errorf("the suite built no cache on boltcr")
		}
		if mode == "warm" && r.Reopened == 0 {
			t.Errorf("the warm run reopened no file")
		}
	}
	for _, name := range failed {
		if reason, ok := exceptions[run][name]; ok {
			t.Logf("failed as documented: %s: %s", name, reason)
		}
	}
	report1 := t.Errorf
	for _, s := range unexpected {
		msg := s.Failure.Message
		if len(msg) > 2000 {
			msg = msg[:2000] + "…"
		}
		report1("%s: %s\n%s:%d\n%s", s.State, s.name(), s.Failure.Location.FileName, s.Failure.Location.LineNumber, msg)
	}
	if runErr != nil && len(failed) == 0 {
		t.Errorf("the suite failed (%v) with no failed spec; see %s", runErr, logPath)
	}
	for name := range exceptions[run] {
		if !slices.Contains(failed, name) {
			t.Errorf("%s passed; remove it from the documented exceptions (exceptions and doc.go)", name)
		}
	}
}

// spec is one entry of Ginkgo's JSON report.
type spec struct {
	ContainerHierarchyTexts []string
	LeafNodeType            string
	LeafNodeText            string
	State                   string
	NumAttempts             int
	Failure                 struct {
		Message  string
		Location struct {
			FileName   string
			LineNumber int
		}
	}
}

// name is how Ginkgo names a spec: its containers' texts and its own.
func (s spec) name() string {
	return strings.Join(append(append([]string{}, s.ContainerHierarchyTexts...), s.LeafNodeText), " ")
}

// readReport returns the It specs of Ginkgo's JSON report, sorted by name.
func readReport(path string) ([]spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var suites []struct{ SpecReports []spec }
	if err := json.Unmarshal(b, &suites); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var specs []spec
	for _, s := range suites {
		for _, r := range s.SpecReports {
			if r.LeafNodeType == "It" {
				specs = append(specs, r)
			}
		}
	}
	sort.Slice(specs, func(i, j int) bool { return specs[i].name() < specs[j].name() })
	return specs, nil
}

// routing sums the hook's routing.json over the specs.
type routing struct {
	New      int `json:"boltcrNewFile"`
	Reopened int `json:"boltcrReopenedFile"`
	Default  int `json:"controllerRuntime"`
	specs    int // specs that built a cache on boltcr
}

func readRouting(path string) (routing, error) {
	var sum routing
	b, err := os.ReadFile(path)
	if err != nil {
		return sum, err
	}
	var bySpec map[string]routing
	if err := json.Unmarshal(b, &bySpec); err != nil {
		return sum, fmt.Errorf("%s: %w", path, err)
	}
	for _, r := range bySpec {
		sum.New += r.New
		sum.Reopened += r.Reopened
		sum.Default += r.Default
		if r.New+r.Reopened > 0 {
			sum.specs++
		}
	}
	return sum, nil
}

// buildSuites makes the patched copy of controller-runtime in
// <repository>/_output/crsuite (a fixed place, so that the build cache
// serves the next run), with the hook beside each suite and boltcr as a
// dependency through replace directives, and builds the suites' test
// binaries. It returns the work directory and the binaries by suite.
func buildSuites(t *testing.T) (work string, tests map[string]string) {
	t.Helper()
	var upstream struct{ Version, Dir, Error string }
	if err := json.Unmarshal([]byte(goCmd(t, ".", "mod", "download", "-json", upstreamModule)), &upstream); err != nil || upstream.Error != "" {
		t.Fatalf("go mod download %s: %v %s", upstreamModule, err, upstream.Error)
	}
	if upstream.Version != upstreamVersion {
		t.Fatalf("controllerruntime/go.mod requires %s %s; the harness's patch and hook are made for %s: update testdata/ and this test", upstreamModule, upstream.Version, upstreamVersion)
	}
	ours := strings.Fields(goCmd(t, ".", "list", "-m", "-f", "{{.Dir}}",
		"github.com/boltinformer/boltinformer", "github.com/boltinformer/boltinformer/controllerruntime"))
	if len(ours) != 2 {
		t.Fatalf("go list -m: the directories of boltinformer's modules: %q", ours)
	}
	root, crDir := ours[0], ours[1]

	work = filepath.Join(root, "_output", "crsuite")
	copyDir := filepath.Join(work, "controller-runtime")
	if err := os.RemoveAll(copyDir); err != nil {
		t.Fatal(err)
	}
	if err := copyTree(upstream.Dir, copyDir); err != nil {
		t.Fatalf("copying %s: %v", upstream.Dir, err)
	}
	patch, err := os.ReadFile(filepath.Join("testdata", "cache-new-hook.patch"))
	if err != nil {
		t.Fatal(err)
	}
	if err := applyPatch(copyDir, string(patch)); err != nil {
		t.Fatalf("testdata/cache-new-hook.patch: %v", err)
	}
	hook, err := os.ReadFile(filepath.Join("testdata", "zz_boltinformer_hook_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, suite := range suites {
		// The hook is written as package cache_test; each suite's test
		// package is <suite>_test.
		b := strings.Replace(string(hook), "\npackage cache_test\n", "\npackage "+suite+"_test\n", 1)
		if !strings.Contains(b, "\npackage "+suite+"_test\n") {
			t.Fatalf("testdata/zz_boltinformer_hook_test.go: no package clause to rename for pkg/%s", suite)
		}
		if err := os.WriteFile(filepath.Join(copyDir, "pkg", suite, "zz_boltinformer_hook_test.go"), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// boltcr (and through it boltinformer) from this repository; their
	// checksums beside controller-runtime's. -mod=mod below completes
	// go.mod with what they need.
	goCmd(t, copyDir, "mod", "edit",
		"-require=github.com/boltinformer/boltinformer/controllerruntime@v0.0.0",
		"-replace=github.com/boltinformer/boltinformer/controllerruntime="+crDir,
		"-replace=github.com/boltinformer/boltinformer="+root)
	var sums []string
	for _, f := range []string{filepath.Join(copyDir, "go.sum"), filepath.Join(crDir, "go.sum"), filepath.Join(root, "go.sum")} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, strings.Split(strings.TrimSpace(string(b)), "\n")...)
	}
	sort.Strings(sums)
	sums = compact(sums)
	if err := os.WriteFile(filepath.Join(copyDir, "go.sum"), []byte(strings.Join(sums, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	tests = map[string]string{}
	for _, suite := range suites {
		tests[suite] = filepath.Join(work, suite+".test")
		args := []string{"test", "-mod=mod", "-c", "-o", tests[suite]}
		if raceEnabled {
			args = append(args, "-race")
		}
		start := time.Now()
		goCmd(t, copyDir, append(args, "./pkg/"+suite)...)
		t.Logf("built controller-runtime %s pkg/%s's suite with the hook (race: %v) in %v", upstreamVersion, suite, raceEnabled, time.Since(start).Round(time.Second))
	}
	return work, tests
}

func compact(sorted []string) []string {
	out := sorted[:0]
	for i, s := range sorted {
		if s != "" && (i == 0 || s != sorted[i-1]) {
			out = append(out, s)
		}
	}
	return out
}

// copyTree copies the regular files under src to dst, writable (the
// module cache's are read-only).
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
}

// goCmd runs the go command in dir, outside any workspace, and returns its
// standard output; it fails the test with the command's output if it fails.
func goCmd(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go %s (in %s): %v\n%s%s", strings.Join(args, " "), dir, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}
