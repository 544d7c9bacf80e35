package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/boltinformer/boltinformer/internal/bench/benchkit"
)

// revLabel is the label the recover subcommand's updates change: a label,
// not an annotation, as the controllers that relabel Pods do (and a change
// every selector-aware consumer must see).
const revLabel = "bench.boltinformer.io/rev"

// applyChanges makes a changePlan with workers requests in flight: label
// updates (merge patches of revLabel to tag-<seq>), deletes (grace period
// 0, so the Pod is gone at once), recreates (a delete, then a create under
// the same name, which gets a new UID) and creates.
func applyChanges(ctx context.Context, cs kubernetes.Interface, shape podShape, p changePlan, workers int, tag string) error {
	type op struct {
		kind changeKind
		pod  int
	}
	var ops []op
	for k, pods := range [numChangeKinds][]int{changeUpdate: p.update, changeDelete: p.delete, changeRecreate: p.recreate, changeCreate: p.create} {
		for _, i := range pods {
			ops = append(ops, op{changeKind(k), i})
		}
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	// The first failure cancels ctx, and no call starts after it.
	started := 0
	for seq := 0; seq < len(ops) && ctx.Err() == nil; seq++ {
		started++
		g.Go(func() error {
			o := ops[seq]
			switch o.kind {
			case changeUpdate:
				body := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, revLabel, tag+"-"+strconv.Itoa(seq))
				_, err := cs.CoreV1().Pods(namespaceOf(o.pod)).Patch(ctx, shape.podName(o.pod), types.MergePatchType, []byte(body), metav1.PatchOptions{})
				return wrapChange(err, "updating", shape, o.pod)
			case changeDelete:
				return deletePod(ctx, cs, shape, o.pod)
			case changeRecreate:
				if err := deletePod(ctx, cs, shape, o.pod); err != nil {
					return err
				}
				return recreatePod(ctx, cs, shape, o.pod)
			default:
				return createPod(ctx, cs, shape, o.pod)
			}
		})
	}
	return benchkit.WaitStarted(g, ctx, started, len(ops))
}

// deletePod deletes Pod i at once (grace period 0: no kubelet is to stop
// it).
func deletePod(ctx context.Context, cs kubernetes.Interface, shape podShape, i int) error {
	immediately := int64(0)
	err := cs.CoreV1().Pods(namespaceOf(i)).Delete(ctx, shape.podName(i), metav1.DeleteOptions{GracePeriodSeconds: &immediately})
	return wrapChange(err, "deleting", shape, i)
}

// recreatePod creates Pod i again after its delete. A delete with grace
// period 0 removes the Pod before it returns, so the name is free; a create
// that still finds it is retried for a few seconds.
func recreatePod(ctx context.Context, cs kubernetes.Interface, shape podShape, i int) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		p := shape.pod(i)
		_, err := cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) || time.Now().After(deadline) {
			return wrapChange(err, "recreating", shape, i)
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func wrapChange(err error, what string, shape podShape, i int) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s pod %s/%s: %w", what, namespaceOf(i), shape.podName(i), err)
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
