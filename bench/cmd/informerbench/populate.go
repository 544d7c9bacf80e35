package main

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/boltinformer/boltinformer/internal/apiservertest"
	"github.com/boltinformer/boltinformer/internal/fanout"
)

// populate makes sure Pods 0..n-1 exist, creating the missing ones with
// workers concurrent requests. A create drops the fixture's status, so the
// Pods are as a scheduler leaves them (spec.nodeName set, phase Pending):
// about 4.5 KB of JSON, plus the managedFields the apiserver adds. Setting
// status too would double the requests (and the time to populate 100k).
func populate(ctx context.Context, cl *cluster, shape podShape, n, workers int, log io.Writer) error {
	cs, err := cl.clientset()
	if err != nil {
		return err
	}
	for i := range podNamespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespaceOf(i)}}
		if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", ns.Name, err)
		}
	}
	have, err := existingPods(ctx, cl, shape)
	if err != nil {
		return err
	}
	var todo []int
	for i := range n {
		if !have[namespaceOf(i)+"/"+shape.podName(i)] {
			todo = append(todo, i)
		}
	}
	if len(todo) == 0 {
		fmt.Fprintf(log, "populate: %d Pods already there\n", n)
		return nil
	}
	fmt.Fprintf(log, "populate: creating %d %s Pods (%d exist) with %d workers…\n", len(todo), shape, n-len(todo), workers)
	start := time.Now()
	var done atomic.Int64
	stopProgress := progress(log, start, &done, len(todo))
	defer stopProgress()
	return fanout.Each(ctx, len(todo), workers, func(ctx context.Context, k int) error {
		err := createPod(ctx, cs, shape, todo[k])
		done.Add(1)
		return err
	})
}

// createPod creates Pod i; one that exists already is left as it is.
func createPod(ctx context.Context, cs kubernetes.Interface, shape podShape, i int) error {
	p := shape.pod(i)
	_, err := cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}

// existingPods returns namespace/name of the bench's Pods, listing only
// their metadata.
func existingPods(ctx context.Context, cl *cluster, shape podShape) (map[string]bool, error) {
	mc, err := metadata.NewForConfig(cl.cfg)
	if err != nil {
		return nil, err
	}
	pods := mc.Resource(corev1.SchemeGroupVersion.WithResource("pods"))
	have := map[string]bool{}
	opts := metav1.ListOptions{LabelSelector: shape.selector(), Limit: 10000}
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

// progress prints done/total every 5 seconds until the returned func is
// called, which prints the final line.
func progress(log io.Writer, start time.Time, done *atomic.Int64, total int) func() {
	stop := make(chan struct{})
	finished := make(chan struct{})
	line := func() {
		d := done.Load()
		el := time.Since(start)
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
			case <-stop:
				line()
				return
			}
		}
	}()
	return func() { close(stop); <-finished }
}

// readyPods makes the cluster ready for a measurement: Pods 0..n-1 of
// shape exist (populate), their mean protobuf size is taken (podBytes),
// and the heartbeat runs, a live cluster's background writes
// (apiservertest.Heartbeat), which stop ends.
func readyPods(ctx context.Context, cl *cluster, cs kubernetes.Interface, shape podShape, n, workers int, log io.Writer) (podBytes float64, stop func() (renewed, failed int64), err error) {
	if err := populate(ctx, cl, shape, n, workers, log); err != nil {
		return 0, nil, err
	}
	if podBytes, err = meanPodBytes(ctx, cs, shape); err != nil {
		return 0, nil, err
	}
	stop, err = apiservertest.Heartbeat(ctx, cs, heartbeatLease)
	if err != nil {
		return 0, nil, err
	}
	return podBytes, stop, nil
}

// meanPodBytes is the mean protobuf size of up to 500 of shape's Pods as the
// apiserver serves them (managedFields included).
func meanPodBytes(ctx context.Context, cs kubernetes.Interface, shape podShape) (float64, error) {
	list, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: shape.selector(), Limit: 500})
	if err != nil {
		return 0, fmt.Errorf("listing pods to size them: %w", err)
	}
	if len(list.Items) == 0 {
		return 0, nil
	}
	var total int
	for i := range list.Items {
		total += list.Items[i].Size()
	}
	return float64(total) / float64(len(list.Items)), nil
}
