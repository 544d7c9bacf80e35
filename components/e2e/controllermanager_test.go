package e2e

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/boltinformer/boltinformer/components/internal/workload"
)

var flagSeed = flag.Uint64("e2e.seed", 0, "seed of the controller manager test's kill points (0: a new one, logged)")

// The namespaces of the controller manager scenario.
var kcmNamespaces = []string{"apps", "doomed", "orphans", "gc"}

// controllerManagerArgs runs the controller manager alone (no leader
// election, no serving port) with every default controller, on kubeconfig.
func controllerManagerArgs(kubeconfig string, extra ...string) []string {
	return append([]string{
		"--kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
		"-v=2",
	}, extra...)
}

// kcmStep is one step of the scenario: an action, and the state (as
// clusterWatch.state(false)) the controllers must reach after it.
type kcmStep struct {
	name   string
	action func(t testing.TB, ctx context.Context, cs kubernetes.Interface)
	want   []string
}

// replicated is the state of a Deployment ns/name of n replicas whose
// rollout is done: one ReplicaSet of n, n Pods.
func replicated(ns, name string, n int32) []string {
	lines := []string{
		fmt.Sprintf("deployment %s/%s replicas=%d", ns, name, n),
		fmt.Sprintf("replicaset %s/<%s> owner=%s replicas=%d", ns, name, name, n),
	}
	if n > 0 {
		lines = append(lines, fmt.Sprintf("pods %s replicaset-of=%s count=%d", ns, name, n))
	}
	return lines
}

func join(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func ns(name string) []string { return []string{"namespace " + name} }

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// kcmScenario is the controller manager scenario: Deployments created,
// scaled and deleted (deployment and replicaset controllers, garbage
// collector), a namespace deleted with its contents (namespace
// controller), a Deployment deleted with its dependents orphaned, and Pods
// owned by a ConfigMap, one of them by a ConfigMap that does not exist
// (garbage collector).
func kcmScenario() []kcmStep {
	base := join(ns("apps"), ns("orphans"), ns("gc"))
	return []kcmStep{
		{"create web, api, worker", func(t testing.TB, ctx context.Context, cs kubernetes.Interface) {
			for name, n := range map[string]int32{"web": 3, "api": 2, "worker": 4} {
				_, err := cs.AppsV1().Deployments("apps").Create(ctx, deployment(name, n), metav1.CreateOptions{})
				must(t, err)
			}
		}, join(base, ns("doomed"), replicated("apps", "web", 3), replicated("apps", "api", 2), replicated("apps", "worker", 4))},

		{"scale web to 6, api to 1", func(t testing.TB, ctx context.Context, cs kubernetes.Interface) {
			for name, n := range map[string]int32{"web": 6, "api": 1} {
				_, err := cs.AppsV1().Deployments("apps").Patch(ctx, name, types.MergePatchType,
					fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n), metav1.PatchOptions{})
				must(t, err)
			}
		}, join(base, ns("doomed"), replicated("apps", "web", 6), replicated("apps", "api", 1), replicated("apps", "worker", 4))},

		{"delete worker", func(t testing.TB, ctx context.Context, cs kubernetes.Interface) {
			must(t, cs.AppsV1().Deployments("apps").Delete(ctx, "worker",
				metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}))
		}, join(base, ns("doomed"), replicated("apps", "web", 6), replicated("apps", "api", 1))},

		{"fill doomed", func(t testing.TB, ctx context.Context, cs kubernetes.Interface) {
			_, err := cs.AppsV1().Deployments("doomed").Create(ctx, deployment("d", 2), metav1.CreateOptions{})
			must(t, err)
		}, join(base, ns("doomed"), replicated("apps", "web", 6), replicated("apps", "api", 1), replicated("doomed", "d", 2))},

		{"delete namespace doomed", func(t testing.TB, ctx context.Context, cs kubernetes.Interface) {
			must(t, cs.CoreV1().Namespaces().Delete(ctx, "doomed", metav1.DeleteOptions{}))
		}, join(base, replicated("apps", "web", 6), replicated("apps", "api", 1))},

		{"create orphans/o", func(t testing.TB, ctx context.Context, cs kubernetes.Interface) {
			_, err := cs.AppsV1().Deployments("orphans").Create(ctx, deployment("o", 2), metav1.CreateOptions{})
			must(t, err)
		}, join(base, replicated("apps", "web", 6), replicated("apps", "api", 1), replicated("orphans", "o", 2))},

		{"delete orphans/o, orphaning its dependents", func(t testing.TB, ctx context.Context, cs kubernetes.Interface) {
			must(t, cs.AppsV1().Deployments("orphans").Delete(ctx, "o",
				metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationOrphan)}))
		}, join(base, replicated("apps", "web", 6), replicated("apps", "api", 1),
			[]string{"replicaset orphans/<-> owner=- replicas=2", "pods orphans replicaset-of=- count=2"})},

		{"Pods owned by a ConfigMap, and by one that does not exist", func(t testing.TB, ctx context.Context, cs kubernetes.Interface) {
			owner, err := cs.CoreV1().ConfigMaps("gc").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
			must(t, err)
			ghost := corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ghost", UID: "00000000-0000-0000-0000-000000000001"}}
			for name, o := range map[string]*corev1.ConfigMap{"dep-1": owner, "dep-2": owner, "dangling": &ghost} {
				pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{{
					APIVersion: "v1", Kind: "ConfigMap", Name: o.Name, UID: o.UID,
				}}}, Spec: workload.PodSpec()}
				_, err := cs.CoreV1().Pods("gc").Create(ctx, pod, metav1.CreateOptions{})
				must(t, err)
			}
		}, join(base, replicated("apps", "web", 6), replicated("apps", "api", 1),
			[]string{"replicaset orphans/<-> owner=- replicas=2", "pods orphans replicaset-of=- count=2",
				"pods gc owner=ConfigMap/owner count=2"})},

		{"delete the owner ConfigMap", func(t testing.TB, ctx context.Context, cs kubernetes.Interface) {
			must(t, cs.CoreV1().ConfigMaps("gc").Delete(ctx, "owner", metav1.DeleteOptions{}))
		}, join(base, replicated("apps", "web", 6), replicated("apps", "api", 1),
			[]string{"replicaset orphans/<-> owner=- replicas=2", "pods orphans replicaset-of=- count=2"})},
	}
}

// restartWindow is one restarted run of the controller manager: when it
// started, and what its cache file let it resume (resumable, read while no
// process had the file open).
type restartWindow struct {
	start     time.Time
	resumable map[string][]string
}

// runKCMScenario runs the scenario on a new cluster with the controller
// manager bin, SIGKILLing and restarting it after the steps in kills, some
// changes into the step (a random point between the action and the state
// it leads to). cacheFile, if not "", is the controller manager's cache
// file. It returns the final full state, the cluster, and the restarts.
func runKCMScenario(t *testing.T, name, bin, cacheFile string, kills map[int]int) (final []string, c *cluster, restarts []restartWindow, last *component) {
	c = startCluster(t)
	ctx := context.Background()
	for _, n := range kcmNamespaces {
		createNamespace(t, c.cs, n)
	}
	w := watchCluster(t, c.cs, kcmNamespaces...)
	var extra []string
	if cacheFile != "" {
		extra = []string{"--boltinformer-cache-file=" + cacheFile}
	}
	run := 1
	kcm := startComponent(t, c.dir, fmt.Sprintf("%s-%d", name, run), bin, controllerManagerArgs(c.kubeconfig, extra...)...)
	for i, step := range kcmScenario() {
		step.action(t, ctx, c.cs)
		if changes, ok := kills[i]; ok {
			w.waitChanges(t, changes, kcm, step.want)
			kcm.kill()
			run++
			window := restartWindow{start: time.Now()}
			if cacheFile != "" {
				window.resumable = resumable(t, cacheFile)
			}
			restarts = append(restarts, window)
			t.Logf("step %d (%s): killed after %d changes, restarting", i, step.name, changes)
			kcm = startComponent(t, c.dir, fmt.Sprintf("%s-%d", name, run), bin, controllerManagerArgs(c.kubeconfig, extra...)...)
		}
		start := time.Now()
		w.waitState(t, 2*time.Minute, fmt.Sprintf("step %d (%s)", i, step.name), kcm, step.want)
		t.Logf("step %d (%s): done in %v", i, step.name, time.Since(start).Round(time.Millisecond))
	}
	return w.state(true), c, restarts, kcm
}

// TestControllerManagerKillUnderChurn runs the same scenario twice, each on
// its own new cluster: with the stock kube-controller-manager, and with
// this module's, SIGKILLed at random points of three steps and restarted
// warm on its cache file each time. Both must reach every step's state and
// end in the same objects; the restarted controller managers must make no
// LIST of any resource they persist (counted at the apiserver).
func TestControllerManagerKillUnderChurn(t *testing.T) {
	seed := *flagSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("kill points from seed %d (rerun with -e2e.seed=%d)", seed, seed)
	r := rand.New(rand.NewPCG(seed, seed))
	steps := len(kcmScenario())
	kills := map[int]int{}
	for _, i := range r.Perm(steps)[:3] {
		kills[i] = r.IntN(12)
	}

	var stock []string
	t.Run("stock", func(t *testing.T) {
		stock, _, _, _ = runKCMScenario(t, "stock-kube-controller-manager", stockControllerManager, "", nil)
	})
	if t.Failed() {
		return
	}
	t.Run("boltinformer", func(t *testing.T) {
		cacheFile := filepath.Join(t.TempDir(), "kube-controller-manager.db")
		final, c, restarts, last := runKCMScenario(t, "kube-controller-manager", boltControllerManager, cacheFile, kills)
		last.kill()

		if got, want := strings.Join(final, "\n"), strings.Join(stock, "\n"); got != want {
			t.Errorf("final state differs from the stock controller manager's\nstock:\n  %s\nboltinformer:\n  %s",
				strings.Join(stock, "\n  "), strings.Join(final, "\n  "))
		}

		all := informerLists(readAudit(t, c.auditLog, "kube-controller-manager/", time.Time{}))
		t.Logf("informer LISTs, all runs: %s", describeLists(all))
		if len(all) == 0 {
			t.Error("the audit log shows no informer LIST at all: the cold start must have listed")
		}
		// Each restarted run lists nothing its file let it resume. A run
		// killed before its first commit leaves nothing to resume (a kill
		// point at the very start); at least one restart must have resumed,
		// or the test shows nothing.
		resumed := 0
		for i, r := range restarts {
			var events []auditEvent
			for _, e := range readAudit(t, c.auditLog, "kube-controller-manager/", r.start) {
				if i+1 < len(restarts) && !e.RequestReceived.Before(restarts[i+1].start) {
					break
				}
				events = append(events, e)
			}
			lists := informerLists(events)
			t.Logf("run %d: resumable %d resources; informer LISTs: %s", i+2, len(r.resumable), describeLists(lists))
			if len(r.resumable) > 0 {
				resumed++
			}
			for gr, n := range lists {
				if _, ok := r.resumable[gr]; ok {
					t.Errorf("run %d listed %s %d times; its file let it resume %v", i+2, gr, n, r.resumable[gr])
				}
			}
		}
		if resumed == 0 {
			t.Errorf("none of the %d restarts had anything to resume: every kill came before a commit", len(restarts))
		}
	})
}
