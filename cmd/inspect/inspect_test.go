package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"text/tabwriter"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// result is one run of inspect.
type result struct {
	stdout, stderr string
	code           int
}

// golden renders a result as its golden file holds it: stdout, then stderr
// and the exit code when there are any, with volatile strings masked.
func (r result) golden() string {
	s := r.stdout
	if r.stderr != "" {
		s += "--- stderr\n" + r.stderr
	}
	if r.code != 0 {
		s += fmt.Sprintf("--- exit code %d\n", r.code)
	}
	return mask(s)
}

func mask(s string) string {
	keys := make([]string, 0, len(fixtures.volatile))
	for k := range fixtures.volatile {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return len(keys[i]) > len(keys[j]) })
	for _, k := range keys {
		s = strings.ReplaceAll(s, k, fixtures.volatile[k])
	}
	return s
}

// runInspect runs inspect in-process with the clock at fixedNow and checks
// that the fixture file did not change, as bbolt's requireDBNoChange does.
func runInspect(t *testing.T, args ...string) result {
	t.Helper()
	root := newRootCommand(&globalOptions{now: func() time.Time { return fixedNow }})
	var stdout, stderr bytes.Buffer
	root.SetArgs(args)
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	cmd, err := root.ExecuteC()
	code := report(cmd, err, &stderr)
	requireFixtureUnchanged(t)
	return result{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

func requireFixtureUnchanged(t *testing.T) {
	t.Helper()
	if fixtures.aBytes == nil {
		return
	}
	now, err := os.ReadFile(fixtures.a)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(now, fixtures.aBytes) {
		t.Fatalf("the fixture file changed")
	}
}

// maskColumn replaces the cells of one column of the table whose header
// starts with the cells table, and realigns the table. stats needs it: a collection's
// meta bucket holds its last commit time in RFC 3339 with trailing zeros of
// the nanoseconds dropped, so the bytes in use vary by a few between runs.
func maskColumn(s string, table []string, column string) string {
	lines := strings.Split(s, "\n")
	sep := regexp.MustCompile(`\s{2,}`)
	for i := 0; i < len(lines); i++ {
		header := sep.Split(lines[i], -1)
		if len(header) < len(table) || !slices.Equal(header[:len(table)], table) {
			continue
		}
		col := slices.Index(header, column)
		end := i
		for end < len(lines) && lines[end] != "" {
			end++
		}
		var buf bytes.Buffer
		w := tabwriter.NewWriter(&buf, 6, 4, 3, ' ', 0)
		for j := i; j < end; j++ {
			cells := sep.Split(lines[j], -1)
			if j > i && col >= 0 && col < len(cells) {
				cells[col] = "(masked)"
			}
			fmt.Fprintln(w, strings.Join(cells, "\t"))
		}
		w.Flush()
		masked := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
		lines = append(lines[:i], append(masked, lines[end:]...)...)
		i += len(masked)
	}
	return strings.Join(lines, "\n")
}

// checkGolden compares got with testdata/name.golden, or rewrites it with -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (run go test -update to accept it):\n%s", path, lineDiff(string(want), got))
	}
}

// lineDiff shows the first differing lines of want and got.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < max(len(w), len(g)) && shown < 10; i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n  want: %q\n  got:  %q\n", i+1, wl, gl)
			shown++
		}
	}
	return b.String()
}

// TestGolden runs each read command on the fixture file and compares its
// output (stdout, stderr, exit code) with testdata/<name>.golden.
func TestGolden(t *testing.T) {
	file := fixtureFile(t)
	tests := []struct {
		name string
		args []string
		code int
	}{
		{"ls", []string{"ls", file}, 0},
		{"ls-wide", []string{"ls", "-f", file, "-o", "wide"}, 0},
		{"ls-json", []string{"ls", file, "-o", "json"}, 0},

		{"get-pods", []string{"get", "pods", "-f", file}, 0},
		{"get-pods-wide", []string{"get", "po", "-f", file, "-o", "wide"}, 0},
		{"get-pods-namespace", []string{"get", "pods", "-f", file, "-n", "storefront"}, 0},
		{"get-pods-all-namespaces", []string{"get", "pods", "-f", file, "-A", "-n", "ignored"}, 0},
		{"get-pods-selector", []string{"get", "pods", "-f", file, "-l", "app.kubernetes.io/name in (payments-worker),pod-template-hash", "--show-labels"}, 0},
		{"get-pods-name", []string{"get", "pods", "-f", file, "-o", "name"}, 0},
		{"get-pod-yaml", []string{"get", "pod", "-f", file, "-n", "storefront", "checkout-api-7d9c8b6f5-00000", "-o", "yaml"}, 0},
		{"get-pod-json", []string{"get", "pods", "-f", file, "payments-worker-5c7d9-x2x9q", "-o", "json"}, 0},
		{"get-pods-yaml-list", []string{"get", "pods", "-f", file, "-n", "payments", "-o", "yaml"}, 0},
		{"get-pods-json-list", []string{"get", "pods", "-f", file, "-l", "app.kubernetes.io/name=payments-worker", "-o", "json"}, 0},
		{"get-pods-none", []string{"get", "pods", "-f", file, "-l", "app=nothing"}, 0},
		{"get-pods-none-json", []string{"get", "pods", "-f", file, "-n", "nowhere", "-o", "json"}, 0},
		{"get-pod-not-found", []string{"get", "pods", "-f", file, "-n", "storefront", "checkout-api-7d9c8b6f5-00000", "no-such-pod"}, 1},
		{"get-configmaps", []string{"get", "cm", "-f", file}, 0},
		{"get-deployments", []string{"get", "deployments.apps", "-f", file}, 0},
		{"get-deployments-wide", []string{"get", "deploy", "-f", file, "-o", "wide"}, 0},
		{"get-nodes", []string{"get", "nodes", "-f", file}, 0},
		{"get-nodes-wide", []string{"get", "node", "-f", file, "-o", "wide"}, 0},
		{"get-rollouts", []string{"get", "rollouts.argoproj.io", "-f", file}, 0},
		{"get-rollout-yaml", []string{"get", "rollouts", "-f", file, "checkout-api-1", "-o", "yaml"}, 0},
		{"get-secrets", []string{"get", "secrets", "-f", file}, 0},
		{"get-secret-yaml", []string{"get", "secrets", "-f", file, "checkout-db", "-o", "yaml"}, 0},
		{"get-secret-json", []string{"get", "secrets", "-f", file, "checkout-db", "-o", "json"}, 0},
		{"get-secret-json-shown", []string{"get", "secrets", "-f", file, "checkout-db", "-o", "json", "--show-secrets"}, 0},
		{"get-secret-unstructured-yaml", []string{"get", "secrets-dynamic", "-f", file, "-o", "yaml"}, 0},
		{"get-secret-ambiguous", []string{"get", "secret", "-f", file}, 1},
		{"get-legacy", []string{"get", "services", "-f", file}, 0},
		{"get-unknown-resource", []string{"get", "jobs", "-f", file}, 1},
		{"get-bad-output", []string{"get", "pods", "-f", file, "-o", "xml"}, 1},
		{"get-bad-jsonpath", []string{"get", "pods", "-f", file, "-o", "jsonpath={.items[*"}, 1},
		{"get-pods-jsonpath", []string{"get", "pods", "-f", file, "-o", `jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name}{"\t"}{.spec.nodeName}{"\n"}{end}`}, 0},
		{"get-pod-jsonpath", []string{"get", "pods", "-f", file, "-n", "payments", "payments-worker-5c7d9-x2x9q", "-o", "jsonpath={.status.containerStatuses[*].restartCount}"}, 0},
		{"get-pods-go-template", []string{"get", "pods", "-f", file, "-n", "storefront", "-o", `go-template={{range .items}}{{.metadata.name}} {{.status.podIP}}{{"\n"}}{{end}}`}, 0},
		{"get-nodes-show-labels", []string{"get", "nodes", "-f", file, "--show-labels"}, 0},
		{"get-pods-no-headers", []string{"get", "pods", "-f", file, "-n", "storefront", "--no-headers", "-o", "wide"}, 0},
		{"get-rollout-yaml-managed-fields", []string{"get", "rollouts", "-f", file, "checkout-api-1", "-o", "yaml", "--show-managed-fields"}, 0},

		{"index-list", []string{"index", "pods", "-f", file}, 0},
		{"index-values", []string{"index", "pods", "node", "-f", file}, 0},
		{"index-objects", []string{"index", "pods", "namespace", "storefront", "-f", file}, 0},
		{"index-objects-wide", []string{"index", "pods", "node", "ip-10-0-1-11.eu-west-1.compute.internal", "-f", file, "-o", "wide"}, 0},
		{"index-keys", []string{"index", "pods", "namespace", "storefront", "-f", file, "-o", "key"}, 0},
		{"index-missing", []string{"index", "pods", "owner", "-f", file}, 1},

		{"stats", []string{"stats", file}, 0},
		{"verify", []string{"verify", file}, 0},
		{"export", []string{"export", "-f", file}, 0},
		{"export-filtered", []string{"export", "deployments", "secrets", "-f", file, "-n", "storefront", "--keep-server-fields"}, 0},
		{"diff", []string{"diff", file, laterFixtureFile(t)}, 1},
		{"diff-show", []string{"diff", file, laterFixtureFile(t), "--show"}, 1},
		{"diff-inserted-container", []string{"diff", file, laterFixtureFile(t), "deployments", "--show"}, 1},
		{"diff-same", []string{"diff", file, file, "pods", "secrets"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runInspect(t, tt.args...)
			if r.code != tt.code {
				t.Errorf("exit code %d, want %d; stderr:\n%s", r.code, tt.code, r.stderr)
			}
			got := r.golden()
			if tt.name == "stats" {
				got = maskColumn(got, []string{"COLLECTION", "OBJECTS"}, "IN USE")
			}
			checkGolden(t, tt.name, got)
		})
	}
}
