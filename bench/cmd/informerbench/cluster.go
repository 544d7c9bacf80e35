package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/boltinformer/boltinformer/internal/apiservertest"
)

const protobufContentType = "application/vnd.kubernetes.protobuf"

// cluster is the apiserver under test: a local one this process started, or
// the one a kubeconfig names.
type cluster struct {
	kubeconfig string                // what children connect with
	server     *apiservertest.Server // nil with --kubeconfig
	cfg        *rest.Config
}

// connect starts a local apiserver, or loads kubeconfig if given. The local
// one gets a large etcd quota: 100k Pods with status and the bench's update
// history outgrow etcd's default 2 GiB between two compactions.
func connect(ctx context.Context, kubeconfig, workDir string, log io.Writer) (*cluster, error) {
	if kubeconfig != "" {
		cfg, err := loadConfig(kubeconfig)
		if err != nil {
			return nil, err
		}
		return &cluster{kubeconfig: kubeconfig, cfg: cfg}, nil
	}
	fmt.Fprintln(log, "starting etcd and kube-apiserver on 127.0.0.1…")
	start := time.Now()
	srv, err := apiservertest.Launch(ctx, apiservertest.Options{EtcdQuotaBackendBytes: 8 << 30, ReadyTimeout: 5 * time.Minute})
	if err != nil {
		return nil, err
	}
	c := &cluster{kubeconfig: filepath.Join(workDir, "kubeconfig"), server: srv, cfg: srv.Config()}
	if err := srv.WriteKubeconfig(c.kubeconfig); err != nil {
		srv.Stop()
		return nil, err
	}
	fmt.Fprintf(log, "apiserver ready in %v (state and logs in %s)\n", time.Since(start).Round(time.Millisecond), srv.Dir())
	return c, nil
}

// loadConfig reads a kubeconfig with client-side throttling far above
// client-go's defaults, so that it never distorts the measurements.
func loadConfig(path string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	cfg.QPS, cfg.Burst = 5000, 10000
	return cfg, nil
}

// clientset returns a protobuf clientset for the parent's own requests.
func (c *cluster) clientset() (kubernetes.Interface, error) {
	cfg := rest.CopyConfig(c.cfg)
	cfg.QPS, cfg.Burst = 5000, 10000
	cfg.ContentType = protobufContentType
	cfg.AcceptContentTypes = protobufContentType + ",application/json"
	return kubernetes.NewForConfig(cfg)
}

// pids returns the process IDs of a local kube-apiserver and etcd; zeros
// with --kubeconfig, where their cost cannot be measured from here.
func (c *cluster) pids() (apiserver, etcd int) {
	if c.server == nil {
		return 0, 0
	}
	return c.server.PIDs()
}

// canExpire reports whether expire can force 410s.
func (c *cluster) canExpire() bool { return c.server != nil }

// expire restarts kube-apiserver, which expires every older resourceVersion,
// and waits until its Pod watch cache is rebuilt, so that the relist the
// restart forces is compared with client-go cold starts on a ready server.
func (c *cluster) expire(ctx context.Context) error {
	if c.server == nil {
		return errors.New("cannot restart an apiserver given by --kubeconfig")
	}
	if err := c.server.Restart(ctx); err != nil {
		return err
	}
	cs, err := c.clientset()
	if err != nil {
		return err
	}
	// readyz does not wait for watch caches, and while one initializes, the
	// apiserver sends lists to etcd but refuses watches (429). A watch that
	// matches nothing is accepted once the cache is ready.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		w, err := cs.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{ResourceVersion: "0", LabelSelector: "bench.boltinformer.io/none=none"})
		if err == nil {
			w.Stop()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pod watch cache not ready %v after the restart: %w", 3*time.Minute, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (c *cluster) close() {
	if c.server != nil {
		c.server.Stop()
	}
}

// session is what a measuring subcommand sets up before it measures: a
// work directory (cache files, the kubeconfig, logs unless --log-dir), the
// cluster, a clientset and the machine's description.
type session struct {
	work string
	cl   *cluster
	cs   kubernetes.Interface
	mach machine
}

// openSession makes the work directory, defaults *logDir to its logs
// subdirectory, creates *logDir and every non-empty dir, and connects to the
// cluster (starting one unless kubeconfig is given). close undoes it.
func openSession(ctx context.Context, kubeconfig string, logDir *string, dirs []string, out io.Writer) (_ *session, err error) {
	work, err := mkWorkDir()
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
		if dir == "" {
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	cl, err := connect(ctx, kubeconfig, work, out)
	if err != nil {
		return nil, err
	}
	cs, err := cl.clientset()
	if err != nil {
		cl.close()
		return nil, err
	}
	return &session{work: work, cl: cl, cs: cs, mach: describeMachine(cs)}, nil
}

// close stops the cluster (if this process started it) and removes the
// work directory.
func (s *session) close() {
	s.cl.close()
	os.RemoveAll(s.work)
}

// mkWorkDir makes a temporary directory for cache files and the kubeconfig.
func mkWorkDir() (string, error) { return os.MkdirTemp("", "informerbench-") }
