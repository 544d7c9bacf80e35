package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/boltinformer/boltinformer/internal/bench/benchkit"
	"github.com/boltinformer/boltinformer/internal/testing/apiservertest"
)

const protobufContentType = benchkit.ProtobufContentType

// heartbeatLease renews through every measurement, for every variant
// alike, standing for the Leases every live cluster writes: a warm start
// synced when caught up needs etcd to move after its watch opens.
const heartbeatLease = "informerbench-heartbeat"

// cluster is the local apiserver under test.
type cluster struct {
	kubeconfig string // what children connect with
	server     *apiservertest.Server
	cfg        *rest.Config
}

// connect starts a local apiserver.
func connect(ctx context.Context, workDir string, log io.Writer) (*cluster, error) {
	srv, err := benchkit.Launch(ctx, log)
	if err != nil {
		return nil, err
	}
	c := &cluster{kubeconfig: filepath.Join(workDir, "kubeconfig"), server: srv, cfg: srv.Config()}
	if err := srv.WriteKubeconfig(c.kubeconfig); err != nil {
		srv.Stop()
		return nil, err
	}
	return c, nil
}

// loadConfig reads a child's kubeconfig: protobuf (JSON accepted for
// types without it) and no client-side throttling to speak of.
func loadConfig(path string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	cfg.QPS, cfg.Burst = 5000, 10000
	cfg.ContentType, cfg.AcceptContentTypes = protobufContentType, protobufContentType+",application/json"
	return cfg, nil
}

// clientset returns a protobuf clientset for the parent's own requests.
func (c *cluster) clientset() (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(benchkit.Protobuf(c.cfg))
}

func (c *cluster) pids() (apiserver, etcd int) { return c.server.PIDs() }

// expire restarts kube-apiserver, which expires every older resourceVersion.
func (c *cluster) expire(ctx context.Context) error {
	cs, err := c.clientset()
	if err != nil {
		return err
	}
	return benchkit.RestartAPIServer(ctx, c.server, cs)
}

// session is what a measuring subcommand sets up: a work directory (cache
// files, the kubeconfig, logs), the cluster, a clientset
// and the machine's description. close undoes it.
type session struct {
	work string
	cl   *cluster
	cs   kubernetes.Interface
	mach benchkit.Machine
}

func openSession(ctx context.Context, logDir *string, dirs []string, out io.Writer) (_ *session, err error) {
	work, err := os.MkdirTemp("", "informerbench-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(work)
		}
	}()
	if *logDir == "" {
		*logDir = filepath.Join(work, "logs")
	}
	for _, dir := range append([]string{*logDir}, dirs...) {
		if err := os.MkdirAll(dir, 0o755); dir != "" && err != nil {
			return nil, err
		}
	}
	cl, err := connect(ctx, work, out)
	if err != nil {
		return nil, err
	}
	cs, err := cl.clientset()
	if err != nil {
		cl.close()
		return nil, err
	}
	server := ""
	if v, err := cs.Discovery().ServerVersion(); err == nil {
		server = "kube-apiserver " + v.GitVersion
	}
	return &session{work: work, cl: cl, cs: cs, mach: benchkit.DescribeMachine(server)}, nil
}

func (c *cluster) close() { c.server.Stop() }

func (s *session) close() {
	s.cl.close()
	os.RemoveAll(s.work)
}

// populate makes sure Pods 0..n-1 of shape exist.
func populate(ctx context.Context, cl *cluster, shape podShape, n, workers int, log io.Writer) error {
	return benchkit.Populate(ctx, benchkit.Protobuf(cl.cfg), shape.podSet(n, workers, log))
}

// readyPods makes the cluster ready for a measurement: Pods 0..n-1 of
// shape exist, their mean protobuf size is taken, and the heartbeat runs
// until stop.
func readyPods(ctx context.Context, cl *cluster, cs kubernetes.Interface, shape podShape, n, workers int, log io.Writer) (podBytes float64, stop func() (renewed, failed int64), err error) {
	if err := populate(ctx, cl, shape, n, workers, log); err != nil {
		return 0, nil, err
	}
	if podBytes, err = meanPodBytes(ctx, cs, shape); err != nil {
		return 0, nil, err
	}
	stop, err = apiservertest.Heartbeat(ctx, cs, heartbeatLease)
	return podBytes, stop, err
}

// meanPodBytes is the mean protobuf size of up to 500 of shape's Pods as the
// apiserver serves them (managedFields included).
func meanPodBytes(ctx context.Context, cs kubernetes.Interface, shape podShape) (float64, error) {
	list, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: shape.selector(), Limit: 500})
	if err != nil || len(list.Items) == 0 {
		return 0, err
	}
	var total int
	for i := range list.Items {
		total += list.Items[i].Size()
	}
	return float64(total) / float64(len(list.Items)), nil
}

// idleCPU is the CPU seconds per second kube-apiserver and etcd use with no
// informer running, over d: the background every start's cost includes.
// -1 where a process cannot be read.
func idleCPU(ctx context.Context, cl *cluster, d time.Duration) (apiserver, etcd float64) {
	m := benchkit.StartCPUMeter(cl.pids())
	select {
	case <-time.After(d):
	case <-ctx.Done():
		return -1, -1
	}
	used := m.Used()
	rate := func(x float64) float64 {
		if x < 0 {
			return -1
		}
		return x / d.Seconds()
	}
	return rate(used[0]), rate(used[1])
}
