package main

import (
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/scheme"

	"github.com/boltinformer/boltinformer/internal/testing/fixture"
	"github.com/boltinformer/boltinformer/persist"
)

// checkpoints shows, per checkpoint, what its handler skips and is given at
// its next start; --clear drops it (and is the one write inspect makes).
func TestCheckpoints(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	db, err := persist.Open(path, persist.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	c, err := db.Collection("pods", persist.CollectionOptions{Description: map[string]string{descResource: "pods", descVersion: "v1", descKind: "Pod"}})
	if err != nil {
		t.Fatal(err)
	}
	var ops []persist.Op
	for i := range 3 {
		p := fixture.Pod(i)
		ops = append(ops, persist.Op{Key: p.Namespace + "/" + p.Name, Object: p})
	}
	if err := c.Apply(ops, "100"); err != nil {
		t.Fatal(err)
	}
	cp, err := c.Checkpoint("pod-controller")
	if err != nil {
		t.Fatal(err)
	}
	p0, p1 := fixture.Pod(0), fixture.Pod(1)
	if err := cp.Ack(ops[0].Key, p0.ResourceVersion); err != nil {
		t.Fatal(err)
	}
	if err := cp.Ack(ops[1].Key, p1.ResourceVersion+"0"); err != nil { // an older state
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	run := func(args ...string) result {
		t.Helper()
		root := newRootCommand(&globalOptions{})
		var stdout, stderr strings.Builder
		root.SetArgs(args)
		root.SetOut(&stdout)
		root.SetErr(&stderr)
		cmd, err := root.ExecuteC()
		code := report(cmd, err, &stderr)
		return result{stdout: stdout.String(), stderr: stderr.String(), code: code}
	}
	r := run("checkpoints", "-f", path)
	if r.code != 0 || !strings.Contains(r.stdout, "pod-controller") {
		t.Fatalf("checkpoints: code %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	fields := strings.Fields(strings.Split(strings.TrimSpace(r.stdout), "\n")[1])
	if got := strings.Join(fields[2:], " "); got != "2 1 1" {
		t.Errorf("acknowledged, changed since, not acknowledged = %q, want 2 1 1\n%s", got, r.stdout)
	}
	r = run("checkpoints", "pods", "pod-controller", "-f", path)
	for _, want := range []string{ops[0].Key + " ", "skipped", "given (changed)", "<none>"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("checkpoints pods pod-controller lacks %q:\n%s", want, r.stdout)
		}
	}
	if r := run("checkpoints", "pods", "nope", "-f", path); r.code == 0 || !strings.Contains(r.stderr, "pod-controller") {
		t.Errorf("an unknown checkpoint: code %d, stderr %q (want an error naming the ones there are)", r.code, r.stderr)
	}

	r = run("checkpoints", "pods", "pod-controller", "-f", path, "--clear")
	if r.code != 0 || !strings.Contains(r.stdout, "2 acknowledgements dropped") {
		t.Fatalf("--clear: code %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := run("checkpoints", "-f", path); !strings.Contains(r.stdout, "No checkpoints") {
		t.Errorf("after --clear the checkpoint is still listed:\n%s", r.stdout)
	}
	// The stored objects are untouched.
	r = run("get", "pods", "-f", path, "-A", "-o", "name")
	if n := len(strings.Fields(r.stdout)); n != 3 {
		t.Errorf("after --clear, get pods lists %d, want 3:\n%s%s", n, r.stdout, r.stderr)
	}
}
