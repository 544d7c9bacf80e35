package e2e

import (
	"context"
	"flag"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/boltinformer/boltinformer/factory"
	"github.com/boltinformer/boltinformer/internal/testing/apiservertest"
)

var (
	flagMeasureFetch = flag.Int("e2e.measure-fetch", 0,
		"if set, TestRecoveryFetchCost creates this many realistic objects and logs what a full list, a metadata list, a namespace list and one-object fetches cost (how the recovery's thresholds were chosen)")
	flagMeasureResource = flag.String("e2e.measure-resource", "pods", "the resource TestRecoveryFetchCost measures: pods or configmaps")
)

// TestRecoveryFetchCost measures, against the real apiserver, what the
// requests of a recovery cost: a full list, a metadata list, a namespace
// list and one-object fetches (sequential and four at a time). It runs only
// with -e2e.measure-fetch=N.
func TestRecoveryFetchCost(t *testing.T) {
	n := *flagMeasureFetch
	if n == 0 {
		t.Skip("set -e2e.measure-fetch=N to measure")
	}
	const test = "fetchcost"
	srv := apiservertest.Start(t, apiservertest.Options{})
	admin := newClientset(t, srv.Config(), nil)
	namespaces := []string{"cost-0", "cost-1", "cost-2", "cost-3"}
	createNamespaces(t, admin, namespaces...)
	resource := *flagMeasureResource
	var objs state
	if resource == "pods" {
		objs = populateRealisticPods(t, admin, test, namespaces, n)
	} else {
		objs = populateRealisticConfigMaps(t, admin, test, namespaces, n)
	}
	selector := e2eLabel + "=" + test
	counter := newByteCounter(resource)
	cfg := srv.Config()
	cfg.QPS, cfg.Burst = 10000, 10000
	cfg.Wrap(counter.wrap)
	var wire atomic.Int64
	dialer := &net.Dialer{}
	cfg.Dial = func(ctx context.Context, network, address string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, address)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: c, n: &wire}, nil
	}
	cs := newClientset(t, cfg, nil)
	lister := factory.NewMetadataLister(cs.CoreV1().RESTClient(), resource, "", metav1.ListOptions{LabelSelector: selector})
	ctx := context.Background()
	notOlder := func(rv string) metav1.ListOptions {
		return metav1.ListOptions{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}
	}
	measure := func(what string, reps int, fn func() error) (time.Duration, int64) {
		b0, _ := counter.snapshot()
		w0 := wire.Load()
		start := time.Now()
		for range reps {
			if err := fn(); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		}
		d := time.Since(start) / time.Duration(reps)
		b1, _ := counter.snapshot()
		var bytes int64
		for k := range b1 {
			bytes += b1[k] - b0[k]
		}
		bytes /= int64(reps)
		t.Logf("%-40s %10v %10d bytes read, %10d on the wire", what, d.Round(10*time.Microsecond), bytes, (wire.Load()-w0)/int64(reps))
		return d, bytes
	}
	first, err := lister.ListMetadata(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	rv := first.ResourceVersion
	measure(fmt.Sprintf("full list (%d %s, pages of 500)", n, resource), 3, func() error {
		opts := notOlder(rv)
		opts.Limit = 500
		for {
			l, err := lister.ListObjects(ctx, "", "", opts)
			if err != nil {
				return err
			}
			m, _ := meta.ListAccessor(l)
			if m.GetContinue() == "" {
				return nil
			}
			opts = metav1.ListOptions{Limit: 500, Continue: m.GetContinue()}
		}
	})
	// A recovery's full list, as its fallback and fetches make it: at a
	// resourceVersion in one response, only the changed items decoded.
	measure(fmt.Sprintf("full list undecoded (%d %s, one response)", n, resource), 3, func() error {
		_, _, err := lister.ListObjectsWire(ctx, "", notOlder(rv))
		return err
	})
	measure("metadata list (pages of 500)", 3, func() error {
		opts := notOlder(rv)
		opts.Limit = 500
		for {
			l, err := lister.ListMetadata(ctx, opts)
			if err != nil || l.Continue == "" {
				return err
			}
			opts = metav1.ListOptions{Limit: 500, Continue: l.Continue}
		}
	})
	measure(fmt.Sprintf("namespace list undecoded (%d objects)", n/len(namespaces)), 3, func() error {
		_, _, err := lister.ListObjectsWire(ctx, namespaces[0], notOlder(rv))
		return err
	})
	measure(fmt.Sprintf("namespace list (%d objects)", n/len(namespaces)), 3, func() error {
		_, err := lister.ListObjects(ctx, namespaces[0], "", notOlder(rv))
		return err
	})
	keys := sortedKeys(objs)
	const fetches = 200
	i := 0
	seq, _ := measure("one-object fetch, sequential", fetches, func() error {
		ns, name := splitKey(keys[i%len(keys)])
		i++
		_, err := lister.ListObjects(ctx, ns, name, notOlder(rv))
		return err
	})
	for _, workers := range []int{4, 8} {
		start := time.Now()
		var wg sync.WaitGroup
		next := make(chan string)
		for range workers {
			wg.Go(func() {
				for key := range next {
					ns, name := splitKey(key)
					if _, err := lister.ListObjects(ctx, ns, name, notOlder(rv)); err != nil {
						t.Error(err)
					}
				}
			})
		}
		for j := range fetches {
			next <- keys[(j*7)%len(keys)]
		}
		close(next)
		wg.Wait()
		t.Logf("%-40s %10v per object (%d workers)", "one-object fetch, concurrent", (time.Since(start) / fetches).Round(10*time.Microsecond), workers)
	}
	_ = seq
	t.Logf("content types: %v", counter.types)
}

// countingConn counts the bytes read from a connection.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}
