package main

import (
	"context"
	"fmt"
	"log"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/boltinformer/boltinformer/components/internal/workload"
	"github.com/boltinformer/boltinformer/internal/bench/benchkit"
	"github.com/boltinformer/boltinformer/internal/bench/runstats"
	"github.com/boltinformer/boltinformer/internal/testing/apiservertest"
)

// bench is the cluster the components run against.
type bench struct {
	cs         kubernetes.Interface
	cfg        *rest.Config
	srv        *apiservertest.Server
	dir        string
	logs       string // where each start's log goes
	kubeconfig string
}

const (
	schedulerNamespace = "bench-scheduler"
	kcmNamespace       = "bench-kcm"
	// noScheduler is the scheduler the controller manager's Pods name:
	// none runs, so they stay pending and the scheduler bench's scheduler
	// leaves them alone.
	noScheduler = "restartbench-none"
)

// createWorkers is how many requests populating the cluster makes at once.
const createWorkers = 16

var commonArgs = []string{"--leader-elect=false", "--secure-port=0", "--kube-api-qps=1000", "--kube-api-burst=2000"}

var schedulerComponent = component{
	name: "kube-scheduler",
	args: func(b *bench) []string { return append([]string{"--kubeconfig=" + b.kubeconfig}, commonArgs...) },
	populate: func(ctx context.Context, b *bench, pods int) error {
		nodes, err := b.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		return benchkit.Populate(ctx, b.cfg, benchkit.PodSet{N: pods, Workers: createWorkers, Namespaces: []string{schedulerNamespace},
			Pod: func(i int) *corev1.Pod {
				pod := benchPod(fmt.Sprintf("pod-%06d", i), nil)
				pod.Namespace, pod.Spec.NodeName = schedulerNamespace, nodes.Items[i%len(nodes.Items)].Name
				return pod
			}})
	},
	probe: func(ctx context.Context, b *bench, id string) error {
		name := "probe-" + id
		if _, err := b.cs.CoreV1().Pods(schedulerNamespace).Create(ctx, benchPod(name, nil), metav1.CreateOptions{}); err != nil {
			return err
		}
		return b.waitPod(ctx, schedulerNamespace, "metadata.name="+name, "", func(p *corev1.Pod) bool { return p.Spec.NodeName != "" })
	},
}

var controllerManagerComponent = component{
	name: "kube-controller-manager",
	args: func(b *bench) []string { return append([]string{"--kubeconfig=" + b.kubeconfig}, commonArgs...) },
	populate: func(ctx context.Context, b *bench, pods int) error {
		if err := b.createNamespace(ctx, kcmNamespace); err != nil {
			return err
		}
		per := int32(pods / deployments)
		g, ctx := errgroup.WithContext(ctx)
		g.SetLimit(createWorkers)
		// The first failure cancels ctx, and no call starts after it.
		started := 0
		for i := 0; i < deployments && ctx.Err() == nil; i++ {
			started++
			g.Go(func() error {
				_, err := b.cs.AppsV1().Deployments(kcmNamespace).Create(ctx, benchDeployment(fmt.Sprintf("deploy-%04d", i), per), metav1.CreateOptions{})
				return err
			})
		}
		return benchkit.WaitStarted(g, ctx, started, deployments)
	},
	probe: func(ctx context.Context, b *bench, id string) error {
		name := "probe-" + id
		if _, err := b.cs.AppsV1().Deployments(kcmNamespace).Create(ctx, benchDeployment(name, 1), metav1.CreateOptions{}); err != nil {
			return err
		}
		return b.waitPod(ctx, kcmNamespace, "", "app="+name, func(*corev1.Pod) bool { return true })
	},
}

// settled waits until the controller manager has made every Pod of the
// populated Deployments (the priming run does, so that later starts all
// find the same work done).
func (b *bench) settled(ctx context.Context, pods int) error {
	for {
		list, err := b.cs.AppsV1().ReplicaSets(kcmNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		n := 0
		for _, rs := range list.Items {
			if !strings.HasPrefix(rs.Name, "probe-") {
				n += int(rs.Status.Replicas)
			}
		}
		if n >= pods {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// measure populates the cluster for c, starts the boltinformer binary
// once on a new file (cold; for the controller manager it also makes the
// Deployments' ReplicaSets and Pods), then each variant reps times,
// alternating which goes first.
func (b *bench) measure(ctx context.Context, c component, pods, reps int) ([]result, error) {
	start := time.Now()
	if err := c.populate(ctx, b, pods); err != nil {
		return nil, err
	}
	log.Printf("%s: populated in %v", c.name, time.Since(start).Round(time.Second))
	cacheFile := filepath.Join(b.dir, c.name+".db")
	boltArgs := append(c.args(b), "--boltinformer-cache-file="+cacheFile)
	var settle func(context.Context) error
	if c.name == controllerManagerComponent.name {
		settle = func(ctx context.Context) error { return b.settled(ctx, pods) }
	}
	cold, err := b.start(ctx, c, "boltinformer cold", c.bolt, boltArgs, 0, settle)
	if err != nil {
		return nil, err
	}
	results := []result{cold}
	for rep := 1; rep <= reps; rep++ {
		for _, v := range benchkit.Rotate([]struct{ name, bin string }{{"stock", c.stock}, {"boltinformer", c.bolt}}, rep-1) {
			args := c.args(b)
			if v.name == "boltinformer" {
				args = boltArgs
			}
			r, err := b.start(ctx, c, v.name, v.bin, args, rep, nil)
			if err != nil {
				return nil, err
			}
			results = append(results, r)
		}
	}
	return results, nil
}

// start runs one start of bin and measures it (see the package doc); settle,
// if not nil, runs after the measurement, before the process is stopped.
func (b *bench) start(ctx context.Context, c component, variant, bin string, args []string, rep int, settle func(context.Context) error) (result, error) {
	id := fmt.Sprintf("%s-%d", strings.ReplaceAll(variant, " ", "-"), rep)
	apiserverPID, _ := b.srv.PIDs()
	listsBefore, bytesBefore, err := benchkit.ServerLists(ctx, b.cs)
	if err != nil {
		return result{}, err
	}
	cpu := benchkit.StartCPUMeter(apiserverPID)
	p, err := startProcess(bin, filepath.Join(b.logs, c.name+"-"+id+".log"), args)
	if err != nil {
		return result{}, err
	}
	defer p.Stop(stopGrace)
	if _, err := b.probes(ctx, []component{c}, []*benchkit.Child{p}, []string{p.LogPath}, id); err != nil {
		return result{}, fmt.Errorf("%s: %w", variant, err)
	}
	r := result{Component: c.name, Variant: variant, Rep: rep, Ready: time.Since(p.Started).Seconds(), APIServerCPU: cpu.Used()[0]}
	r.PrivateBytes, _ = runstats.Status(p.Pid(), "RssAnon")
	listsAfter, bytesAfter, err := benchkit.ServerLists(ctx, b.cs)
	if err != nil {
		return result{}, err
	}
	r.Lists, r.ListBytes = listsAfter-listsBefore, bytesAfter-bytesBefore
	log.Print(r)
	if settle != nil {
		start := time.Now()
		if err := settle(ctx); err != nil {
			return result{}, err
		}
		log.Printf("%s %s: settled in %v", c.name, variant, time.Since(start).Round(time.Second))
	}
	return r, nil
}

// waitPod watches Pods of ns (with the field or label selector) until one
// satisfies done. A watch, not a LIST, so the LIST counts are the
// component's.
func (b *bench) waitPod(ctx context.Context, ns, fieldSelector, labelSelector string, done func(*corev1.Pod) bool) error {
	for {
		w, err := b.cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: fieldSelector, LabelSelector: labelSelector})
		if err != nil {
			return err
		}
		for ev := range w.ResultChan() {
			if pod, ok := ev.Object.(*corev1.Pod); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) && done(pod) {
				w.Stop()
				return nil
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

func (b *bench) createNamespace(ctx context.Context, name string) error {
	_, err := b.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// createNodes creates n Ready, untainted Nodes with room for 110 Pods.
func (b *bench) createNodes(ctx context.Context, n int) error {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("1000"),
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(createWorkers)
	// The first failure cancels ctx, and no call starts after it.
	started := 0
	for i := 0; i < n && ctx.Err() == nil; i++ {
		started++
		g.Go(func() error {
			name := fmt.Sprintf("node-%04d", i)
			node, err := b.cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name: name, Labels: map[string]string{corev1.LabelHostname: name},
			}}, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			node.Spec.Taints = nil // the not-ready taint, lifted as a node lifecycle controller would
			if node, err = b.cs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
				return err
			}
			node.Status = corev1.NodeStatus{Capacity: capacity, Allocatable: capacity, Conditions: []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
			}}}
			_, err = b.cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
			return err
		})
	}
	return benchkit.WaitStarted(g, ctx, started, n)
}

func benchPod(name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: workload.PodSpec()}
}

func benchDeployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	spec := workload.PodSpec()
	spec.SchedulerName = noScheduler
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
}
