package benchkit

import (
	"context"
	"fmt"
	"io"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/boltinformer/boltinformer/internal/testing/apiservertest"
)

// watchCacheTimeout bounds the wait for a restarted apiserver's watch cache.
const watchCacheTimeout = 5 * time.Minute

// RestartAPIServer restarts kube-apiserver with etcd kept, which expires
// every older resourceVersion, and waits until its Pod watch cache serves.
// Readyz does not wait for watch caches, and the next start must not pay
// for the cache's initialization.
func RestartAPIServer(ctx context.Context, srv *apiservertest.Server, cs kubernetes.Interface) error {
	ctx, cancel := context.WithTimeout(ctx, watchCacheTimeout)
	defer cancel()
	if err := srv.Restart(ctx); err != nil {
		return err
	}
	return WaitWatchCache(ctx, cs)
}

// WaitWatchCache waits until a Pod watch from resourceVersion 0 opens. Such
// a watch is served from the watch cache only, which refuses it (429) while
// it initializes; the selector matches nothing, so it sends nothing.
func WaitWatchCache(ctx context.Context, cs kubernetes.Interface) error {
	opts := metav1.ListOptions{ResourceVersion: "0", LabelSelector: "bench.boltinformer.io/none=none"}
	for {
		w, err := cs.CoreV1().Pods("").Watch(ctx, opts)
		if err == nil {
			w.Stop()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pod watch cache not ready: %w", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ProtobufContentType is the apiserver's protobuf wire format.
const ProtobufContentType = "application/vnd.kubernetes.protobuf"

// Protobuf returns a copy of cfg that talks protobuf, with client-side
// throttling far above client-go's defaults so that it never distorts a
// measurement.
func Protobuf(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 5000, 10000
	cfg.ContentType = ProtobufContentType
	cfg.AcceptContentTypes = ProtobufContentType + ",application/json"
	return cfg
}

// Launch starts etcd and kube-apiserver on loopback with a large etcd
// quota: 100k Pods and a bench's update history outgrow etcd's default
// 2 GiB between two compactions.
func Launch(ctx context.Context, log io.Writer) (*apiservertest.Server, error) {
	logf(log, "starting etcd and kube-apiserver on 127.0.0.1…\n")
	start := time.Now()
	srv, err := apiservertest.Launch(ctx, apiservertest.Options{EtcdQuotaBackendBytes: 8 << 30, ReadyTimeout: 5 * time.Minute})
	if err != nil {
		return nil, err
	}
	logf(log, "apiserver ready in %v (state and logs in %s)\n", time.Since(start).Round(time.Millisecond), srv.Dir())
	return srv, nil
}
