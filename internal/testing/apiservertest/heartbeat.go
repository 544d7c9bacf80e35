package apiservertest

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// A cluster heartbeat stands in for a live cluster's background writes:
// one Lease renewed every HeartbeatInterval, as kubelets renew their node
// Leases (every 10 s each, in kube-node-lease: 5 writes a second is a
// 50-node cluster, before any leader-election Lease, Event or status
// update). A warm boltinformer start is synced once its watch has caught up
// with a consistent read, and the apiserver's bookmark carries it there
// only if etcd has moved since the watch opened (reflector.CatchUp); a test
// apiserver is otherwise silent but for its own identity Lease, every 10 s.
// The Lease is in kube-node-lease, which no test or benchmark watches.
const (
	// HeartbeatInterval is how often Heartbeat renews its Lease.
	HeartbeatInterval = 200 * time.Millisecond
	// HeartbeatNamespace holds Heartbeat's Leases.
	HeartbeatNamespace = corev1.NamespaceNodeLease
)

// Heartbeat renews the Lease HeartbeatNamespace/name every
// HeartbeatInterval until the returned stop is called, which waits for its
// goroutine and reports how many renewals succeeded and failed (they fail
// while the apiserver is down; the next one that succeeds resumes).
func Heartbeat(ctx context.Context, cs kubernetes.Interface, name string) (stop func() (renewed, failed int64), err error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: HeartbeatNamespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("heartbeat: creating namespace %s: %w", HeartbeatNamespace, err)
	}
	leases := cs.CoordinationV1().Leases(HeartbeatNamespace)
	lease, err := leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		lease, err = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("heartbeat: lease %s/%s: %w", HeartbeatNamespace, name, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var renewed, failed atomic.Int64
	go func() {
		defer close(done)
		tick := time.NewTicker(HeartbeatInterval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				renew := metav1.NewMicroTime(now)
				lease.Spec.RenewTime = &renew
				l, err := leases.Update(ctx, lease, metav1.UpdateOptions{})
				if err == nil {
					lease = l
					renewed.Add(1)
					continue
				}
				if ctx.Err() != nil {
					return
				}
				failed.Add(1)
				// A conflict (an update that landed but whose answer was
				// lost) or a restarted apiserver: read the Lease again.
				if l, err := leases.Get(ctx, name, metav1.GetOptions{}); err == nil {
					lease = l
				}
			}
		}
	}()
	return func() (int64, int64) {
		cancel()
		<-done
		return renewed.Load(), failed.Load()
	}, nil
}
