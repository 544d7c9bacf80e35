package e2e

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// schedulerArgs runs the scheduler alone (no leader election, no serving
// port) on kubeconfig, with cacheFile as its cache file.
func schedulerArgs(kubeconfig, cacheFile string) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
		"--boltinformer-cache-file=" + cacheFile,
		"-v=2",
	}
}

// TestSchedulerKillWhileBinding: the scheduler binds pending Pods; it is
// SIGKILLed while it binds, Pods are created while it is down, and it is
// started again on its cache file. The restarted scheduler must make no
// LIST of any resource it persists (counted at the apiserver), and every
// Pod must be bound exactly once, with no binding refused: a restart that
// served a stale cache would try to bind Pods already bound and get a
// conflict.
func TestSchedulerKillWhileBinding(t *testing.T) {
	c := startCluster(t)
	const ns = "sched"
	createNodes(t, c.cs, 20)
	createNamespace(t, c.cs, ns)
	pods := watchPods(t, c.cs, ns)
	cacheFile := filepath.Join(c.dir, "kube-scheduler.db")

	// A cold start binds the first 100.
	createPods(t, c.cs, ns, 0, 100)
	first := startComponent(t, c.dir, "kube-scheduler-1", boltScheduler, schedulerArgs(c.kubeconfig, cacheFile)...)
	pods.waitFor(t, 2*time.Minute, "the first 100 Pods bound", first, func(n, bound int) bool { return bound == 100 })

	// 300 more; SIGKILL once 50 of them are bound.
	createPods(t, c.cs, ns, 100, 400)
	pods.waitFor(t, 2*time.Minute, "50 of the next 300 bound", first, func(n, bound int) bool { return bound >= 150 })
	first.kill()
	killed := time.Now() // after the process is gone: it sends nothing later
	_, boundAtKill := pods.counts()
	t.Logf("killed the scheduler with %d of 400 Pods bound", boundAtKill)

	// What the file lets a restart resume.
	persisted := resumable(t, cacheFile)

	// 100 more while it is down, then a warm restart.
	createPods(t, c.cs, ns, 400, 500)
	restart := time.Now()
	second := startComponent(t, c.dir, "kube-scheduler-2", boltScheduler, schedulerArgs(c.kubeconfig, cacheFile)...)
	pods.waitFor(t, 2*time.Minute, "all 500 Pods bound", second, func(n, bound int) bool { return n == 500 && bound == 500 })
	t.Logf("all 500 Pods bound %v after the restart", time.Since(restart).Round(time.Millisecond))
	second.kill()

	events := readAudit(t, c.auditLog, "kube-scheduler/", time.Time{})

	// Every Pod bound once: exactly one binding accepted per Pod, none refused.
	// A binding in flight at the SIGKILL loses its client. The apiserver
	// answers it 504 and may still have committed it, so its Pod is allowed
	// no accepted binding. A stale restart would still show as a 409.
	accepted := map[string]int{}
	cut := map[string]bool{}
	for _, e := range events {
		if e.Verb != "create" || e.ObjectRef == nil || e.ObjectRef.Resource != "pods" || e.ObjectRef.Subresource != "binding" {
			continue
		}
		if e.ResponseStatus != nil && e.ResponseStatus.Code == 504 && e.RequestReceived.Before(killed) {
			t.Logf("binding of %s/%s was in flight at the kill: %+v", e.ObjectRef.Namespace, e.ObjectRef.Name, e.ResponseStatus)
			cut[e.ObjectRef.Name] = true
			continue
		}
		if e.ResponseStatus == nil || e.ResponseStatus.Code >= 300 {
			t.Errorf("binding of %s/%s refused: %+v", e.ObjectRef.Namespace, e.ObjectRef.Name, e.ResponseStatus)
			continue
		}
		accepted[e.ObjectRef.Name]++
	}
	for i := range 500 {
		name := fmt.Sprintf("pod-%04d", i)
		if cut[name] && accepted[name] <= 1 {
			continue
		}
		if accepted[name] != 1 {
			t.Errorf("%s: %d bindings accepted, want 1", name, accepted[name])
		}
	}

	// No LIST of a resource the restart could resume.
	if len(persisted) == 0 {
		t.Fatal("the cache file holds no resumable collection")
	}
	before := informerLists(readAudit(t, c.auditLog, "kube-scheduler/", time.Time{}))
	after := informerLists(readAudit(t, c.auditLog, "kube-scheduler/", restart))
	t.Logf("persisted: %v", sortedKeys(persisted))
	t.Logf("informer LISTs, both runs: %s", describeLists(before))
	t.Logf("informer LISTs after the restart: %s", describeLists(after))
	for gr, n := range after {
		if _, ok := persisted[gr]; ok {
			t.Errorf("the restarted scheduler listed %s %d times; it persists %v", gr, n, persisted[gr])
		}
	}
	if len(before) == 0 {
		t.Error("the audit log shows no informer LIST at all: the cold start must have listed")
	}
}
