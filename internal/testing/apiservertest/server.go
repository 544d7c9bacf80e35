package apiservertest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// logTailLines is how much of each log a failed test or launch prints.
const logTailLines = 60

// Server is a running etcd + kube-apiserver pair, owned by one test (Start)
// or one program (Launch).
type Server struct {
	dir     string
	ownsDir bool // Launch made dir, so Stop removes it
	bins    binaries
	opts    Options
	creds   *credentials
	port    int    // kube-apiserver secure port; kept across restarts
	etcdURL string // etcd client URL

	etcd, apiserver *process

	stopOnce sync.Once
}

// Start runs etcd and kube-apiserver on free loopback ports and returns once
// /readyz is OK. Both are stopped when t's cleanup runs.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	// TempDir registers its removal first, so it runs after s.cleanup
	// (cleanups are LIFO): logs are still readable and no process is still
	// writing to the directory when it is removed.
	dir := t.TempDir()
	start := time.Now()
	s, err := launch(context.Background(), dir, opts)
	if s != nil {
		t.Cleanup(func() { s.cleanup(t) })
	}
	if err != nil {
		t.Fatalf("apiservertest: %v", err)
	}
	t.Logf("apiservertest: etcd %s and kube-apiserver %s ready in %v (logs in %s)",
		s.etcdURL, s.host(), time.Since(start).Round(time.Millisecond), dir)
	return s
}

// Launch is Start for programs that are not tests (benchmarks, demos): it
// runs etcd and kube-apiserver in a new temporary directory and returns once
// /readyz is OK, or an error that includes the failing process's log tail.
// ctx bounds only the start. The caller must call Stop, which also removes
// the directory.
func Launch(ctx context.Context, opts Options) (*Server, error) {
	dir, err := os.MkdirTemp("", "apiservertest-")
	if err != nil {
		return nil, fmt.Errorf("apiservertest: %w", err)
	}
	s, err := launch(ctx, dir, opts)
	if s == nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("apiservertest: %w", err)
	}
	s.ownsDir = true
	if err != nil {
		s.Stop()
		return nil, fmt.Errorf("apiservertest: %w", err)
	}
	return s, nil
}

// launch starts both processes with their state in dir. A non-nil Server is
// returned as soon as something may need stopping, even with an error.
func launch(ctx context.Context, dir string, opts Options) (*Server, error) {
	bins, err := findBinaries()
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, fmt.Errorf("free ports: %w", err)
	}
	creds, err := writeCredentials(dir)
	if err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	s := &Server{
		dir:     dir,
		bins:    bins,
		opts:    opts,
		creds:   creds,
		port:    ports[0],
		etcdURL: "http://127.0.0.1:" + strconv.Itoa(ports[1]),
	}
	s.etcd, err = startProcess("etcd", bins.etcd, etcdArgs(dir, ports[1], ports[2], opts), filepath.Join(dir, "etcd.log"))
	if err != nil {
		return s, err
	}
	if err := waitReady(ctx, s.etcd, http.DefaultClient, s.etcdURL+"/health", "", 30*time.Second); err != nil {
		return s, fmt.Errorf("%v\n--- etcd log tail:\n%s", err, s.etcd.tail(logTailLines))
	}
	return s, s.startAPIServer(ctx)
}

// startAPIServer starts kube-apiserver and waits for /readyz.
func (s *Server) startAPIServer(ctx context.Context) error {
	var err error
	s.apiserver, err = startProcess("kube-apiserver", s.bins.apiserver, s.apiserverArgs(), filepath.Join(s.dir, "kube-apiserver.log"))
	if err != nil {
		return err
	}
	if err := waitReady(ctx, s.apiserver, s.httpClient(), s.host()+"/readyz", s.creds.adminToken, s.opts.readyTimeout()); err != nil {
		return fmt.Errorf("%v\n--- kube-apiserver log tail:\n%s", err, s.apiserver.tail(logTailLines))
	}
	return nil
}

// RestartAPIServer stops kube-apiserver and starts it again on the same port
// with the same flags, keeping etcd and its data. Every watch cache is rebuilt,
// so resource versions from before the restart are no longer in any cache.
func (s *Server) RestartAPIServer(t testing.TB) {
	t.Helper()
	start := time.Now()
	if err := s.Restart(context.Background()); err != nil {
		t.Fatalf("apiservertest: %v", err)
	}
	t.Logf("apiservertest: kube-apiserver restarted in %v", time.Since(start).Round(time.Millisecond))
}

// Restart is RestartAPIServer for programs: it restarts kube-apiserver (not
// etcd) and returns once /readyz is OK again. ctx bounds the wait.
func (s *Server) Restart(ctx context.Context) error {
	s.apiserver.stop()
	return s.startAPIServer(ctx)
}

// StopAPIServer stops kube-apiserver, keeping etcd and its data, so a test
// can see what clients do while the apiserver is unreachable. It is safe to
// call more than once.
func (s *Server) StopAPIServer() { s.apiserver.stop() }

// StartAPIServer starts kube-apiserver again after StopAPIServer, on the
// same port with the same flags, and waits for /readyz. As after
// RestartAPIServer, resource versions from before are in no watch cache.
func (s *Server) StartAPIServer(t testing.TB) {
	t.Helper()
	start := time.Now()
	if err := s.startAPIServer(context.Background()); err != nil {
		t.Fatalf("apiservertest: %v", err)
	}
	t.Logf("apiservertest: kube-apiserver started again in %v", time.Since(start).Round(time.Millisecond))
}

// CompactEtcd compacts etcd's history up to its current revision and returns
// that revision. Reads and watches at older revisions that miss the
// apiserver's watch cache then fail with 410 Gone.
func (s *Server) CompactEtcd(t testing.TB) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rev, err := s.Compact(ctx)
	if err != nil {
		t.Fatalf("apiservertest: %v", err)
	}
	return rev
}

// Compact is CompactEtcd for programs.
func (s *Server) Compact(ctx context.Context) (int64, error) {
	rev, err := etcdRevision(ctx, s.etcdURL)
	if err == nil {
		err = etcdCompact(ctx, s.etcdURL, rev)
	}
	if err != nil {
		return 0, fmt.Errorf("compact etcd: %w", err)
	}
	return rev, nil
}

// EtcdEndpoint is etcd's client URL, e.g. "http://127.0.0.1:40123".
func (s *Server) EtcdEndpoint() string { return s.etcdURL }

// Dir is the directory holding etcd's data, credentials and both logs
// (etcd.log, kube-apiserver.log).
func (s *Server) Dir() string { return s.dir }

// Config returns a new client config for an admin (system:masters) that
// verifies the server's certificate. Callers may modify it freely.
func (s *Server) Config() *rest.Config {
	return &rest.Config{
		Host:        s.host(),
		BearerToken: s.creds.adminToken,
		TLSClientConfig: rest.TLSClientConfig{
			CAData: append([]byte(nil), s.creds.caPEM...),
		},
		// Far above client-go's 5/10 defaults, so client-side throttling
		// does not distort tests and benchmarks.
		QPS:   1000,
		Burst: 2000,
	}
}

// PIDs returns the process IDs of kube-apiserver and etcd, so that a
// benchmark can read what they cost (/proc/<pid>/stat). The apiserver's ID
// changes with every Restart.
func (s *Server) PIDs() (apiserver, etcd int) {
	return s.apiserver.cmd.Process.Pid, s.etcd.cmd.Process.Pid
}

func (s *Server) host() string { return fmt.Sprintf("https://127.0.0.1:%d", s.port) }

// Stop stops kube-apiserver, then etcd, and removes the directory if Launch
// created it. It is safe to call more than once.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		s.stopProcesses()
		if s.ownsDir {
			_ = os.RemoveAll(s.dir)
		}
	})
}

// stopProcesses stops apiserver first, so it never sees etcd vanish.
func (s *Server) stopProcesses() {
	for _, p := range []*process{s.apiserver, s.etcd} {
		if p != nil {
			p.stop()
		}
	}
}

// cleanup stops both processes and prints the log tails if the test failed.
func (s *Server) cleanup(t testing.TB) {
	s.stopProcesses()
	if !t.Failed() {
		return
	}
	for _, p := range []*process{s.apiserver, s.etcd} {
		if p != nil {
			t.Logf("apiservertest: --- %s log tail (%s):\n%s", p.name, p.logPath, p.tail(logTailLines))
		}
	}
}
