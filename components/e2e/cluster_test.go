package e2e

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/boltinformer/boltinformer/components/internal/workload"
	"github.com/boltinformer/boltinformer/internal/testing/apiservertest"
	"github.com/boltinformer/boltinformer/persist"
)

// testAgent is the user agent of the tests' own clients, so that the audit
// log tells their requests from the components'.
const testAgent = "components-e2e"

// cluster is a test apiserver with an audit log, a kubeconfig for the
// components, and a heartbeat standing in for a live cluster's background
// writes (apiservertest.Heartbeat: kubelets' node Leases, which a warm
// informer's catch-up relies on).
type cluster struct {
	server     *apiservertest.Server
	dir        string
	kubeconfig string
	auditLog   string
	cs         kubernetes.Interface
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	dir := t.TempDir()
	args, auditLog := auditArgs(t, dir)
	s := apiservertest.Start(t, apiservertest.Options{ExtraArgs: args})
	c := &cluster{server: s, dir: dir, kubeconfig: filepath.Join(dir, "kubeconfig"), auditLog: auditLog}
	if err := s.WriteKubeconfig(c.kubeconfig); err != nil {
		t.Fatal(err)
	}
	c.cs = kubernetes.NewForConfigOrDie(c.config())
	stop, err := apiservertest.Heartbeat(context.Background(), c.cs, testAgent)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop() })
	return c
}

// config is an admin config with the tests' user agent.
func (c *cluster) config() *rest.Config {
	cfg := c.server.Config()
	cfg.UserAgent = testAgent
	return cfg
}

// createNodes creates n Ready Nodes with room for 110 Pods each, standing
// in for kubelets (nothing runs the Pods bound to them).
func createNodes(t testing.TB, cs kubernetes.Interface, n int) {
	t.Helper()
	ctx := context.Background()
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("8"),
		corev1.ResourceMemory: resource.MustParse("32Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	for i := range n {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name:   fmt.Sprintf("node-%03d", i),
			Labels: map[string]string{corev1.LabelHostname: fmt.Sprintf("node-%03d", i)},
		}}
		node, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// The apiserver taints a new Node not-ready (admission plugin
		// TaintNodesByCondition) until its kubelet reports Ready; the
		// node lifecycle controller would lift it, so do it here.
		node.Spec.Taints = nil
		if node, err = cs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		node.Status = corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity,
			Conditions: []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: corev1.ConditionTrue,
				LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
				Reason: "KubeletReady",
			}},
		}
		if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// createNamespace creates a namespace.
func createNamespace(t testing.TB, cs kubernetes.Interface, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// createPods creates Pods ns/pod-<from>..pod-<to-1>, 8 at a time.
func createPods(t testing.TB, cs kubernetes.Interface, ns string, from, to int) {
	t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, to-from)
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%04d", i)}, Spec: workload.PodSpec()}
				if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := from; i < to; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// resumable reads the cache file at path (no component may have it open)
// and returns the resources ("resource" or "resource.group") of the
// collections a restart resumes: those holding a committed list's
// resourceVersion and not marked to be listed again. A component killed
// before it committed a collection's first list must list it again.
func resumable(t testing.TB, path string) map[string][]string {
	t.Helper()
	if st, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) || (err == nil && st.Size() == 0) {
		// Killed before it had created the file: nothing to resume.
		t.Logf("cache file %s not created yet: nothing is resumable", path)
		return map[string][]string{}
	}
	db, err := persist.Open(path, persist.Options{ReadOnly: true, LockTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	infos, err := db.Collections()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, info := range infos {
		if info.ResourceVersion == "" || info.MustList {
			continue
		}
		gr := info.Description["resource"]
		if g := info.Description["group"]; g != "" {
			gr += "." + g
		}
		out[gr] = append(out[gr], info.Name)
	}
	return out
}

// sortedKeys returns m's keys, sorted.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// informerLists counts, by resource, the informer LISTs (auditEvent.informerList)
// among events.
func informerLists(events []auditEvent) map[string]int {
	out := map[string]int{}
	for _, e := range events {
		if e.informerList() {
			out[e.groupResource()]++
		}
	}
	return out
}

// describeLists is counts as "resource ×n, ...".
func describeLists(counts map[string]int) string {
	var parts []string
	for _, k := range sortedKeys(counts) {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, counts[k]))
	}
	return strings.Join(parts, ", ")
}
