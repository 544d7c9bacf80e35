package main

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/boltinformer/boltinformer/internal/fanout"
)

// patchPods changes count Pods (round-robin over Pods 0..n-1) by setting
// their tick annotation to "<tag>-<seq>", with workers requests in flight.
// It returns the achieved patches per second and the highest
// resourceVersion written. A merge patch needs no read first, so the rate
// is what the apiserver and etcd accept.
func patchPods(ctx context.Context, cs kubernetes.Interface, shape podShape, n, count, workers int, tag string) (rate float64, lastRV string, err error) {
	var maxRV atomic.Int64
	start := time.Now()
	err = fanout.Each(ctx, count, workers, func(ctx context.Context, seq int) error {
		i := seq % n
		body := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, tickAnnot, tag+"-"+strconv.Itoa(seq))
		p, err := cs.CoreV1().Pods(namespaceOf(i)).Patch(ctx, shape.podName(i), types.MergePatchType, []byte(body), metav1.PatchOptions{})
		if err != nil {
			return err
		}
		rv := rvNumber(p.ResourceVersion)
		for old := maxRV.Load(); rv > old && !maxRV.CompareAndSwap(old, rv); old = maxRV.Load() {
		}
		return nil
	})
	return float64(count) / time.Since(start).Seconds(), strconv.FormatInt(maxRV.Load(), 10), err
}

// newTag returns a tag no earlier run used, so a handler counts only the
// updates made for it.
func newTag(what string) string {
	return what + "." + strconv.FormatInt(time.Now().UnixNano(), 36)
}
