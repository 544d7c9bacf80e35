package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/internal/testing/fixture"
	"github.com/boltinformer/boltinformer/persist"
	"github.com/boltinformer/boltinformer/persist/inspectfile"
)

// The fixture file is written through the real code path: persist.Open and
// cache.NewIndexer, one collection per informer, described as the factory
// describes them. Objects come from internal/testing/fixture (creation time
// 2025-03-14T09:26:53Z) and tests print ages against fixedNow.
var fixedNow = time.Date(2025, 3, 21, 12, 0, 0, 0, time.UTC)

var fixtureTime = metav1.Date(2025, 3, 14, 9, 26, 53, 0, time.UTC)

// podNodeIndexFunc indexes pods by node, as schedulers' informers do.
func podNodeIndexFunc(obj interface{}) ([]string, error) {
	if pod, ok := obj.(*corev1.Pod); ok && pod.Spec.NodeName != "" {
		return []string{pod.Spec.NodeName}, nil
	}
	return nil, nil
}

var namespaceIndex = cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}

// fixtureCollection is one informer's collection and what it holds.
type fixtureCollection struct {
	name        string
	description map[string]string
	indexers    cache.Indexers
	objects     []any
}

// fixtureCollections returns the collections of the fixture file. variant
// 1 is a later snapshot of the same informers, for diff.
func fixtureCollections(variant int) []fixtureCollection {
	pods := []any{fixture.Pod(0), fixture.Pod(1), crashingPod(), pendingPod()}
	secrets := []any{secret()}
	deployments := []any{fixture.Deployment(0), rollingDeployment()}
	if variant == 1 {
		p1 := fixture.Pod(1)
		p1.ResourceVersion = "48213901"
		p1.Labels["app.kubernetes.io/version"] = "2.14.4"
		p1.Status.Phase = corev1.PodFailed
		p1.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 137, Reason: "OOMKilled", StartedAt: fixtureTime, FinishedAt: metav1.NewTime(fixtureTime.Add(time.Hour)),
		}}
		p1.Status.ContainerStatuses[0].Ready = false
		// Pod 0 is gone, pod 4 is new; the crashing pod is unchanged
		// but re-encoded with its TypeMeta set, which is not a change.
		crashing := crashingPod()
		crashing.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
		pods = []any{p1, crashing, pendingPod(), fixture.Pod(4)}
		s := secret()
		s.ResourceVersion = "48150002"
		s.Data["password"] = []byte("n3w-pa55wd!") // same length as the old one
		secrets = []any{s}
		// A sidecar inserted before the two containers of checkout-api-0:
		// diff shows the inserted lines, not every later container changed.
		d0 := fixture.Deployment(0)
		d0.ResourceVersion = "48200101"
		d0.Spec.Template.Spec.Containers = append([]corev1.Container{{
			Name: "log-shipper", Image: "registry.example.com/platform/log-shipper:0.9.2",
			Args: []string{"--source=/var/log/app", "--sink=otlp://collector.observability:4317"},
		}}, d0.Spec.Template.Spec.Containers...)
		deployments = []any{d0, rollingDeployment()}
	}
	colls := []fixtureCollection{
		{
			name:        "pods",
			description: map[string]string{"resource": "pods", "version": "v1", "kind": "Pod"},
			indexers:    cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc, "node": podNodeIndexFunc},
			objects:     pods,
		},
		{
			name:        "configmaps-storefront",
			description: map[string]string{"resource": "configmaps", "version": "v1", "kind": "ConfigMap", "namespace": "storefront"},
			indexers:    namespaceIndex,
			objects:     []any{fixture.ConfigMap(0), fixture.ConfigMap(1)},
		},
		{
			name:        "deployments",
			description: map[string]string{"resource": "deployments", "group": "apps", "version": "v1", "kind": "Deployment"},
			indexers:    namespaceIndex,
			objects:     deployments,
		},
		{
			name:        "nodes",
			description: map[string]string{"resource": "nodes", "version": "v1", "kind": "Node"},
			objects:     []any{fixture.Node(0), cordonedNode()},
		},
		{
			name: "rollouts",
			description: map[string]string{"resource": "rollouts", "group": "argoproj.io", "version": "v1alpha1", "kind": "Rollout",
				"labelSelector": "app.kubernetes.io/managed-by=Helm"},
			indexers: namespaceIndex,
			objects:  []any{fixture.CustomResource(0), fixture.CustomResource(1)},
		},
		{
			name: "secrets",
			description: map[string]string{"resource": "secrets", "version": "v1", "kind": "Secret", "namespace": "storefront",
				"fieldSelector": "type=Opaque"},
			objects: secrets,
		},
		{
			// A dynamic informer's Secrets: unstructured, with stringData.
			name:        "secrets-dynamic",
			description: map[string]string{"resource": "secrets", "version": "v1", "kind": "Secret", "namespace": "payments"},
			objects:     []any{unstructuredSecret()},
		},
		{
			// Written before informers described their collections.
			name:    "legacy",
			objects: []any{service()},
		},
	}
	if variant == 1 {
		colls = append(colls, fixtureCollection{
			name:        "configmaps-payments",
			description: map[string]string{"resource": "configmaps", "version": "v1", "kind": "ConfigMap", "namespace": "payments"},
			objects:     []any{paymentsConfigMap()},
		})
	}
	return colls
}

// writeFixture writes the fixture file at path.
func writeFixture(t testing.TB, path string, variant int) {
	t.Helper()
	db, err := persist.Open(path, persist.Options{
		Scheme:        scheme.Scheme,
		NoSync:        true,
		BatchInterval: time.Hour, // one group commit, on Flush: the layout does not depend on timing
		BatchLimit:    1 << 30,
		PageSize:      4096, // the page size the golden stats were recorded with
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, fc := range fixtureCollections(variant) {
		idx, err := bcache.NewIndexer(bcache.IndexerOptions{DB: db, Collection: fc.name, Description: fc.description, Indexers: fc.indexers})
		if err != nil {
			t.Fatal(err)
		}
		for _, obj := range fc.objects {
			if err := idx.Add(obj); err != nil {
				t.Fatalf("collection %s: %v", fc.name, err)
			}
		}
	}
	if err := db.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// crashingPod is in CrashLoopBackOff in another namespace, with other labels.
func crashingPod() *corev1.Pod {
	p := fixture.Pod(2)
	p.Name, p.GenerateName, p.Namespace = "payments-worker-5c7d9-x2x9q", "payments-worker-5c7d9-", "payments"
	p.Labels = map[string]string{"app.kubernetes.io/name": "payments-worker", "app.kubernetes.io/part-of": "storefront", "pod-template-hash": "5c7d9"}
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions[2].Status = corev1.ConditionFalse // Ready
	p.Status.ContainerStatuses[0].Ready = false
	p.Status.ContainerStatuses[0].RestartCount = 7
	p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 5m0s restarting failed container"}}
	p.Status.ContainerStatuses[0].LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: 1, Reason: "Error", StartedAt: metav1.NewTime(fixedNow.Add(-5 * time.Minute)), FinishedAt: metav1.NewTime(fixedNow.Add(-4 * time.Minute)),
	}}
	return p
}

// pendingPod waits for a node: no IP, no container statuses.
func pendingPod() *corev1.Pod {
	p := fixture.Pod(3)
	p.Spec.NodeName = ""
	p.CreationTimestamp = metav1.NewTime(fixedNow.Add(-90 * time.Second))
	p.Status = corev1.PodStatus{
		Phase: corev1.PodPending,
		Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
			Message: "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) were unschedulable.", LastTransitionTime: metav1.NewTime(fixedNow.Add(-90 * time.Second)),
		}},
		QOSClass: corev1.PodQOSBurstable,
	}
	return p
}

// rollingDeployment is half-way through a rollout, in another namespace.
func rollingDeployment() *appsv1.Deployment {
	d := fixture.Deployment(1)
	d.Name, d.Namespace = "payments-worker", "payments"
	d.Spec.Selector.MatchLabels = map[string]string{"app.kubernetes.io/name": "payments-worker"}
	d.Labels = map[string]string{"app.kubernetes.io/name": "payments-worker"}
	d.Spec.Template.Labels = map[string]string{"app.kubernetes.io/name": "payments-worker"}
	d.Spec.Template.Spec.Containers = d.Spec.Template.Spec.Containers[:1]
	d.Spec.Template.Spec.Containers[0].Name = "worker"
	d.Spec.Template.Spec.Containers[0].Image = "registry.example.com/storefront/payments-worker:1.8.0"
	d.Spec.Replicas = ptr.To(int32(3))
	d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas = 3, 1, 2, 2
	return d
}

func cordonedNode() *corev1.Node {
	n := fixture.Node(1)
	n.Spec.Unschedulable = true
	n.Labels["node-role.kubernetes.io/ingress"] = ""
	n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "203.0.113.17"})
	return n
}

func secret() *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: "checkout-db", Namespace: "storefront", UID: "5eed0042-0000-4006-a000-c0ffee000042",
			ResourceVersion: "48150001", CreationTimestamp: fixtureTime,
			Labels: map[string]string{"app.kubernetes.io/name": "checkout-api"},
			Annotations: map[string]string{
				lastApplied: `{"apiVersion":"v1","data":{"password":"czNjcjN0LXBhNTU=","username":"Y2hlY2tvdXQ="},"kind":"Secret","metadata":{"annotations":{},"name":"checkout-db","namespace":"storefront"},"type":"Opaque"}` + "\n",
			},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"password": []byte("s3cr3t-pa55"), "username": []byte("checkout")},
	}
}

func unstructuredSecret() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "Secret",
		"metadata": map[string]any{
			"name": "psp-api-key", "namespace": "payments", "uid": "5eed0043-0000-4006-a000-c0ffee000043",
			"resourceVersion": "48150101", "creationTimestamp": "2025-03-14T09:26:53Z",
		},
		"type":       "Opaque",
		"data":       map[string]any{"api-key": "c2tfbGl2ZV81MWFiY2RlZg=="},
		"stringData": map[string]any{"webhook-secret": "whsec_0123456789"},
	}}
}

func service() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: "checkout-api", Namespace: "storefront", UID: "5eed0044-0000-4006-a000-c0ffee000044",
			ResourceVersion: "48160001", CreationTimestamp: fixtureTime,
			Labels: map[string]string{"app.kubernetes.io/name": "checkout-api"},
		},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.14.2", ClusterIPs: []string{"10.96.14.2"},
			Selector: map[string]string{"app.kubernetes.io/name": "checkout-api"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP}},
		},
	}
}

func paymentsConfigMap() *corev1.ConfigMap {
	cm := fixture.ConfigMap(7)
	cm.Name, cm.Namespace = "payments-worker-config", "payments"
	return cm
}

// fixtures are written once per test binary, into a directory TestMain
// removes.
var fixtures struct {
	dir  string
	once sync.Once
	// a is the fixture file, b a later snapshot of it (for diff).
	a, b string
	// aBytes is a's content, which no command may change.
	aBytes []byte
	// volatile maps strings that differ between runs (commit and creation
	// times) to the same-length masks golden files hold.
	volatile map[string]string
}

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	flag.Parse()
	dir, err := os.MkdirTemp("", "inspect-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	fixtures.dir = dir
	return m.Run()
}

// fixtureFile returns the fixture file's path, writing it (and its later
// snapshot) on first use.
func fixtureFile(t testing.TB) string {
	t.Helper()
	fixtures.once.Do(func() {
		fixtures.a = filepath.Join(fixtures.dir, "cache.db")
		fixtures.b = filepath.Join(fixtures.dir, "cache-later.db")
		writeFixture(t, fixtures.a, 0)
		writeFixture(t, fixtures.b, 1)
		fixtures.volatile = map[string]string{fixtures.dir: "$DIR"}
		for _, path := range []string{fixtures.a, fixtures.b} {
			db, err := inspectfile.Open(path, inspectfile.Options{Scheme: scheme.Scheme})
			if err != nil {
				t.Fatal(err)
			}
			infos, err := db.DB().Collections()
			if err != nil {
				t.Fatal(err)
			}
			fs, err := db.Stats()
			if err != nil {
				t.Fatal(err)
			}
			times := []time.Time{fs.Created}
			for _, info := range infos {
				times = append(times, info.Committed)
			}
			for _, tm := range times {
				fixtures.volatile[tm.UTC().Format(time.RFC3339Nano)] = "<volatile time>"
				fixtures.volatile[tm.UTC().Format(time.RFC3339)] = "<MASKED-TIMESTAMP-Z>"
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		}
		var err error
		if fixtures.aBytes, err = os.ReadFile(fixtures.a); err != nil {
			t.Fatal(err)
		}
	})
	if fixtures.aBytes == nil {
		t.Fatal("the fixture file could not be written (see the first failing test)")
	}
	return fixtures.a
}

// laterFixtureFile returns the later snapshot of the fixture file.
func laterFixtureFile(t testing.TB) string {
	fixtureFile(t)
	return fixtures.b
}
