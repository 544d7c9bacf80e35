package benchkit

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/boltinformer/boltinformer/internal/testing/apiservertest"
	"github.com/boltinformer/boltinformer/internal/testing/fixture"
)

// PodSet is the Pods a bench measures: Pod(i) for i in [0, N).
type PodSet struct {
	N int
	// Workers is how many creates run at once.
	Workers int
	// Namespaces are created first; every Pod is in one of them.
	Namespaces []string
	Pod        func(i int) *corev1.Pod
	// Selector picks the set's Pods. With it, Pods that exist are listed
	// (metadata only) and not created again; without it every create runs
	// and a conflict counts as done.
	Selector string
	// Log gets progress every 5 s; nil: none.
	Log io.Writer
}

// Populate makes sure every Pod of s exists. cfg should talk protobuf
// (Protobuf): creating 100k Pods in JSON takes twice as long.
func Populate(ctx context.Context, cfg *rest.Config, s PodSet) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, name := range s.Namespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", name, err)
		}
	}
	have := map[string]bool{}
	if s.Selector != "" {
		if have, err = ExistingPods(ctx, cfg, s.Selector); err != nil {
			return err
		}
	}
	var todo []*corev1.Pod
	for i := range s.N {
		if p := s.Pod(i); !have[p.Namespace+"/"+p.Name] {
			todo = append(todo, p)
		}
	}
	if len(todo) == 0 {
		logf(s.Log, "populate: %d Pods already there\n", s.N)
		return nil
	}
	logf(s.Log, "populate: creating %d Pods (%d exist) with %d workers…\n", len(todo), s.N-len(todo), s.Workers)
	var done atomic.Int64
	defer progress(s.Log, &done, len(todo))()
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(max(s.Workers, 1))
	// The first failure cancels ctx, and no call starts after it.
	started := 0
	for k := 0; k < len(todo) && ctx.Err() == nil; k++ {
		started++
		g.Go(func() error {
			p := todo[k]
			_, err := cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
			done.Add(1)
			if err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating pod %s/%s: %w", p.Namespace, p.Name, err)
			}
			return nil
		})
	}
	return WaitStarted(g, ctx, started, len(todo))
}

// WaitStarted waits for g and returns its first error. If no call failed
// but fewer than n calls started, the caller's context ended first, and it
// returns that context's cause: the work was not all done. ctx is g's
// context, which carries the caller's cause.
func WaitStarted(g *errgroup.Group, ctx context.Context, started, n int) error {
	if err := g.Wait(); err != nil {
		return err
	}
	if started < n {
		return context.Cause(ctx)
	}
	return nil
}

// ExistingPods returns namespace/name of the Pods selector picks.
func ExistingPods(ctx context.Context, cfg *rest.Config, selector string) (map[string]bool, error) {
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	pods := mc.Resource(corev1.SchemeGroupVersion.WithResource("pods"))
	have := map[string]bool{}
	opts := metav1.ListOptions{LabelSelector: selector, Limit: 10000}
	for {
		list, err := pods.List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("listing existing pods: %w", err)
		}
		for _, p := range list.Items {
			have[p.Namespace+"/"+p.Name] = true
		}
		if list.Continue == "" {
			return have, nil
		}
		opts.Continue = list.Continue
	}
}

// progress prints done/total every 5 s until the returned func is called,
// which prints the final line and waits for the printer to exit.
func progress(log io.Writer, done *atomic.Int64, total int) (stop func()) {
	if log == nil {
		return func() {}
	}
	start, stopc, finished := time.Now(), make(chan struct{}), make(chan struct{})
	line := func() {
		d, el := done.Load(), time.Since(start)
		fmt.Fprintf(log, "  %d/%d (%.0f/s, %v)\n", d, total, float64(d)/el.Seconds(), el.Round(time.Second))
	}
	go func() {
		defer close(finished)
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				line()
			case <-stopc:
				line()
				return
			}
		}
	}()
	return func() { close(stopc); <-finished }
}

func logf(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format, args...)
	}
}

// FixturePod is fixture.Pod(i) in namespace as a create sends it: without
// status and server-owned metadata. Pods are created as a scheduler leaves
// them (spec.nodeName set, phase Pending): setting status too would double
// the requests.
func FixturePod(i int, namespace string) *corev1.Pod {
	p := fixture.Pod(i)
	p.Namespace, p.Status = namespace, corev1.PodStatus{}
	p.UID, p.ResourceVersion, p.CreationTimestamp = "", "", metav1.Time{}
	return p
}

// LaunchWithPods starts etcd and kube-apiserver (Launch), populates s and
// returns the server, for the caller to stop, and a protobuf config.
func LaunchWithPods(ctx context.Context, s PodSet) (*apiservertest.Server, *rest.Config, error) {
	srv, err := Launch(ctx, s.Log)
	if err != nil {
		return nil, nil, err
	}
	cfg := Protobuf(srv.Config())
	if err := Populate(ctx, cfg, s); err != nil {
		srv.Stop()
		return nil, nil, err
	}
	return srv, cfg, nil
}

// FixtureNamespace is the namespace of Pod i of a set spread over count.
func FixtureNamespace(i, count int) string { return fmt.Sprintf("bench-%02d", i%count) }

// FixturePods is n FixturePods spread over namespaces, created with
// workers at once, progress to log.
func FixturePods(n, workers, namespaces int, log io.Writer) PodSet {
	s := PodSet{N: n, Workers: workers, Log: log,
		Pod: func(i int) *corev1.Pod { return FixturePod(i, FixtureNamespace(i, namespaces)) }}
	for i := range namespaces {
		s.Namespaces = append(s.Namespaces, FixtureNamespace(i, namespaces))
	}
	return s
}
