package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/boltinformer/boltinformer/internal/bench/benchkit"
)

// patchPods changes count Pods (round-robin over Pods 0..n-1) by setting
// their tick annotation to "<tag>-<seq>", with workers requests in flight.
// It returns the highest resourceVersion written.
func patchPods(ctx context.Context, cs kubernetes.Interface, shape podShape, n, count, workers int, tag string) (lastRV string, err error) {
	var maxRV atomic.Int64
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	// The first failure cancels ctx, and no call starts after it.
	started := 0
	for seq := 0; seq < count && ctx.Err() == nil; seq++ {
		started++
		g.Go(func() error {
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
	}
	err = benchkit.WaitStarted(g, ctx, started, count)
	return strconv.FormatInt(maxRV.Load(), 10), err
}

// newTag returns a tag no earlier run used, so a handler counts only the
// updates made for it.
func newTag(what string) string {
	return what + "." + strconv.FormatInt(time.Now().UnixNano(), 36)
}

// rvNumber reads an etcd-backed resourceVersion; 0 if it is not a number.
func rvNumber(rv string) int64 {
	n, _ := strconv.ParseInt(rv, 10, 64)
	return n
}

// percentile of xs (p in [0,1], nearest rank); 0 for none.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[int(p*float64(len(s)-1)+0.5)]
}
