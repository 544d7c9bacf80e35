package main

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/boltinformer/boltinformer/persist"
)

func TestLockedFile(t *testing.T) {
	path := copyFixture(t)
	// A running informer holds the file for writing.
	db, err := persist.Open(path, persist.Options{Scheme: scheme.Scheme, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	for _, args := range [][]string{
		{"ls", path, "--lock-timeout", "200ms"},
		{"get", "pods", "-f", path, "--lock-timeout", "200ms"},
		{"verify", path, "--lock-timeout", "200ms"},
	} {
		start := time.Now()
		r := runInspect(t, args...)
		elapsed := time.Since(start)
		if r.code != 1 {
			t.Errorf("%v: exit code %d, want 1", args, r.code)
		}
		// The holder is this test's process, which persist refuses at once
		// (persist.ErrOpenInProcess); inspect run as its own process waits
		// --lock-timeout for another's lock (persist's
		// TestLockedFileFailsWithinTimeout holds one in a child process).
		if elapsed > 3*time.Second {
			t.Errorf("%v: gave up after %v, want at most about 200ms", args, elapsed)
		}
		for _, want := range []string{path + " is held by a running informer", "after 200ms", "db.SnapshotFile(ctx,", "--lock-timeout"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("%v: error does not say %q:\n%s", args, want, r.stderr)
			}
		}
		if r.stdout != "" {
			t.Errorf("%v: printed %q on stdout", args, r.stdout)
		}
	}
	checkGolden(t, "locked", strings.ReplaceAll(runInspect(t, "ls", path, "--lock-timeout", "200ms").golden(), path, "$COPY"))

	// The way out the message gives: a hot snapshot taken by the holder.
	snap := filepath.Join(t.TempDir(), "snapshot.db")
	if err := db.SnapshotFile(context.Background(), snap); err != nil {
		t.Fatal(err)
	}
	r := runInspect(t, "ls", snap, "--lock-timeout", "200ms")
	want := runInspect(t, "ls", fixtureFile(t))
	if r.code != 0 || r.stdout != want.stdout {
		t.Errorf("ls of the hot snapshot: exit %d\n%s%s\nwant\n%s", r.code, r.stdout, r.stderr, want.stdout)
	}
}

func TestMissingFile(t *testing.T) {
	r := runInspect(t, "ls", filepath.Join(t.TempDir(), "nope.db"))
	if r.code != 1 || !strings.Contains(r.stderr, "nope.db: no such file") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
	r = runInspect(t, "get", "pods")
	if r.code != 1 || !strings.Contains(r.stderr, "no cache file given") || !strings.Contains(r.stderr, "inspect get --help") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
	r = runInspect(t, "ls", "-f", "a.db", "b.db")
	if r.code != 1 || !strings.Contains(r.stderr, "the file is given twice") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestHelpListsCommandsAndExamples(t *testing.T) {
	r := runInspect(t, "--help")
	for _, name := range []string{"ls", "get", "index", "stats", "verify", "export", "diff", "completion"} {
		if !strings.Contains(r.stdout, "\n  "+name+" ") {
			t.Errorf("--help does not list %q:\n%s", name, r.stdout)
		}
	}
	for _, name := range []string{"ls", "get", "index", "stats", "verify", "export", "diff"} {
		r := runInspect(t, name, "--help")
		if !strings.Contains(r.stdout, "Examples:\n") {
			t.Errorf("%s --help has no examples:\n%s", name, r.stdout)
		}
	}
	r = runInspect(t, "verify", "--help")
	if !strings.Contains(r.stdout, "cannot recompute") {
		t.Errorf("verify --help does not say that it cannot recompute indexes:\n%s", r.stdout)
	}
}

func TestShellCompletion(t *testing.T) {
	r := runInspect(t, "completion", "bash")
	if r.code != 0 || !strings.Contains(r.stdout, "__start_inspect") {
		t.Errorf("completion bash: exit %d\n%.200s", r.code, r.stdout)
	}
	r = runInspect(t, "__complete", "get", "-f", fixtureFile(t), "")
	for _, want := range []string{"pods\n", "deployments\n", "configmaps-storefront\n", "configmaps\n", ":4\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("completing get's resource: no %q in\n%s", want, r.stdout)
		}
	}
}

func TestExportDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "export")
	r := runInspect(t, "export", "-f", fixtureFile(t), "-d", dir)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var b strings.Builder
	b.WriteString(strings.ReplaceAll(r.golden(), dir, "$EXPORT"))
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		if info.Mode().Perm() != want {
			t.Errorf("%s has mode %v, want %v", path, info.Mode().Perm(), want)
		}
		if !d.IsDir() {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	for _, path := range files {
		rel, _ := filepath.Rel(dir, path)
		b.WriteString("=== " + rel + "\n")
		if strings.Contains(rel, "secret") || strings.HasPrefix(rel, "legacy") {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(data)
		}
	}
	checkGolden(t, "export-dir", b.String())

	r = runInspect(t, "export", "-f", fixtureFile(t), "-d", dir)
	if r.code != 1 || !strings.Contains(r.stderr, "is not empty") {
		t.Errorf("export into a non-empty directory: exit %d, %s", r.code, r.stderr)
	}
}

// TestExportListApplies checks what kubectl apply needs of the List: every
// item has apiVersion, kind and a name, and none carries the fields the
// apiserver refuses on create.
func TestExportListApplies(t *testing.T) {
	r := runInspect(t, "export", "-f", fixtureFile(t), "--show-secrets")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	data, err := yaml.YAMLToJSON([]byte(r.stdout))
	if err != nil {
		t.Fatal(err)
	}
	var list unstructured.UnstructuredList
	if err := list.UnmarshalJSON(data); err != nil {
		t.Fatal(err)
	}
	if got := list.GetKind(); got != "List" {
		t.Errorf("kind %q", got)
	}
	kinds := map[string]int{}
	for _, item := range list.Items {
		if item.GetAPIVersion() == "" || item.GetKind() == "" || item.GetName() == "" {
			t.Errorf("item without apiVersion, kind or name: %v", item.Object["metadata"])
		}
		if item.GetResourceVersion() != "" || item.GetUID() != "" || item.GetManagedFields() != nil || item.GetGeneration() != 0 {
			t.Errorf("%s %s keeps server-set fields", item.GetKind(), item.GetName())
		}
		kinds[item.GetAPIVersion()+" "+item.GetKind()]++
	}
	want := map[string]int{"v1 ConfigMap": 2, "apps/v1 Deployment": 2, "v1 Service": 1, "v1 Node": 2, "v1 Pod": 4,
		"argoproj.io/v1alpha1 Rollout": 2, "v1 Secret": 2}
	if !reflect.DeepEqual(kinds, want) {
		t.Errorf("exported %v, want %v", kinds, want)
	}
	for _, item := range list.Items {
		if item.GetName() == "checkout-db" {
			data, _, _ := unstructured.NestedStringMap(item.Object, "data")
			if data["password"] != "czNjcjN0LXBhNTU=" {
				t.Errorf("--show-secrets exported password %q", data["password"])
			}
		}
	}
}

func TestProgressOnlyOnTerminal(t *testing.T) {
	if p := newProgress(&bytes.Buffer{}, "verify", 10); p != nil {
		t.Error("progress on a buffer, want none")
	}
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if p := newProgress(f, "verify", 10); p != nil {
		t.Error("progress on a regular file, want none")
	}

	var buf bytes.Buffer
	p := newProgressTo(&buf, "verify", 200)
	now := time.Unix(0, 0)
	p.now = func() time.Time { now = now.Add(60 * time.Millisecond); return now }
	for i := 0; i < 200; i++ {
		p.add(1)
	}
	p.finish()
	want := "\rverify: 64/200 records (32%)\rverify: 192/200 records (96%)\r\033[K"
	if buf.String() != want {
		t.Errorf("progress wrote %q, want %q", buf.String(), want)
	}
}

// TestTableOfUnstructured checks that objects of a dynamic informer get
// their kind's kubectl table, like typed ones.
func TestTableOfUnstructured(t *testing.T) {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crashingPod())
	if err != nil {
		t.Fatal(err)
	}
	f := &cacheFile{scheme: scheme.Scheme}
	o := &object{Key: "payments/payments-worker-5c7d9-x2x9q", Obj: &unstructured.Unstructured{Object: content}, GVK: corev1.SchemeGroupVersion.WithKind("Pod")}
	def, obj := f.tableFor(o)
	var columns, cells []string
	for _, c := range def.columns {
		if c.Priority == 0 {
			columns = append(columns, c.Name)
		}
	}
	if got := strings.Join(columns, " "); got != "Name Ready Status Restarts Age" {
		t.Fatalf("columns %q", got)
	}
	for _, c := range def.row(obj, fixedNow, false).Cells {
		cells = append(cells, fmt.Sprint(c))
	}
	got := strings.Join(cells, " | ")
	if want := "payments-worker-5c7d9-x2x9q | 1/2 | CrashLoopBackOff | 7 (4m ago) | 7d2h"; got != want {
		t.Errorf("row %q, want %q", got, want)
	}
}
