// Package benchpods fills a bench's cluster with Pods: the controller-runtime
// benches share it so they measure over the same objects.
package benchpods

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/boltinformer/boltinformer/internal/apiservertest"
	"github.com/boltinformer/boltinformer/internal/fixture"
)

// Namespaces is how many namespaces the Pods are spread over.
const Namespaces = 10

// Namespace returns the namespace of Pod i.
func Namespace(i int) string { return fmt.Sprintf("bench-%02d", i%Namespaces) }

// Name returns the name of Pod i (fixture.Pod's).
func Name(i int) string { return fixture.Pod(i).Name }

// Start launches a kube-apiserver and etcd on loopback
// (internal/apiservertest), creates n Pods with Populate, and returns the
// server (Stop it) and a protobuf client config for it.
func Start(ctx context.Context, n, workers int) (*apiservertest.Server, *rest.Config, error) {
	launchCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	srv, err := apiservertest.Launch(launchCtx, apiservertest.Options{EtcdQuotaBackendBytes: 8 << 30})
	cancel()
	if err != nil {
		return nil, nil, err
	}
	cfg := srv.Config()
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	start := time.Now()
	if err := Populate(ctx, cfg, n, workers); err != nil {
		srv.Stop()
		return nil, nil, err
	}
	fmt.Printf("populated %d Pods in %v\n", n, time.Since(start).Round(time.Millisecond))
	return srv, cfg, nil
}

// Populate creates n Pods (fixture.Pod, status cleared) over Namespaces
// namespaces with workers concurrent creates; Pods that exist are kept.
func Populate(ctx context.Context, cfg *rest.Config, n, workers int) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for i := range Namespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace(i)}}
		if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	next := atomic.Int64{}
	errs := make(chan error, workers)
	for range workers {
		go func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					errs <- nil
					return
				}
				p := fixture.Pod(i)
				p.Status = corev1.PodStatus{}
				p.Namespace = Namespace(i)
				p.UID, p.ResourceVersion, p.CreationTimestamp = "", "", metav1.Time{}
				if _, err := cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
					errs <- err
					return
				}
			}
		}()
	}
	var first error
	for range workers {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}
