package apiservertest

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// logTailLines is how much of each log a failed test prints.
const logTailLines = 60

// Server is a running etcd + kube-apiserver pair owned by one test.
type Server struct {
	dir     string
	bins    binaries
	opts    Options
	creds   *credentials
	port    int    // kube-apiserver secure port; kept across restarts
	etcdURL string // etcd client URL

	etcd, apiserver *process
}

// Start runs etcd and kube-apiserver on free loopback ports and returns once
// /readyz is OK. Both are stopped when t's cleanup runs.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	bins, err := findBinaries()
	if err != nil {
		t.Fatalf("apiservertest: %v", err)
	}
	// TempDir registers its removal first, so it runs after s.cleanup
	// (cleanups are LIFO): logs are still readable and no process is still
	// writing to the directory when it is removed.
	dir := t.TempDir()
	ports, err := freePorts(3)
	if err != nil {
		t.Fatalf("apiservertest: free ports: %v", err)
	}
	creds, err := writeCredentials(dir)
	if err != nil {
		t.Fatalf("apiservertest: credentials: %v", err)
	}
	s := &Server{
		dir:     dir,
		bins:    bins,
		opts:    opts,
		creds:   creds,
		port:    ports[0],
		etcdURL: "http://127.0.0.1:" + strconv.Itoa(ports[1]),
	}
	t.Cleanup(func() { s.cleanup(t) })

	start := time.Now()
	s.etcd, err = startProcess("etcd", bins.etcd, etcdArgs(dir, ports[1], ports[2], opts.etcdProgressNotifyInterval()), filepath.Join(dir, "etcd.log"))
	if err != nil {
		t.Fatalf("apiservertest: %v", err)
	}
	if err := waitReady(s.etcd, http.DefaultClient, s.etcdURL+"/health", "", 30*time.Second); err != nil {
		t.Fatalf("apiservertest: %v\n--- etcd log tail:\n%s", err, s.etcd.tail(logTailLines))
	}
	s.startAPIServer(t)
	t.Logf("apiservertest: etcd %s and kube-apiserver %s ready in %v (logs in %s)",
		s.etcdURL, s.host(), time.Since(start).Round(time.Millisecond), dir)
	return s
}

// startAPIServer starts kube-apiserver and waits for /readyz.
func (s *Server) startAPIServer(t testing.TB) {
	t.Helper()
	var err error
	s.apiserver, err = startProcess("kube-apiserver", s.bins.apiserver, s.apiserverArgs(), filepath.Join(s.dir, "kube-apiserver.log"))
	if err != nil {
		t.Fatalf("apiservertest: %v", err)
	}
	if err := waitReady(s.apiserver, s.httpClient(), s.host()+"/readyz", s.creds.adminToken, s.opts.readyTimeout()); err != nil {
		t.Fatalf("apiservertest: %v\n--- kube-apiserver log tail:\n%s", err, s.apiserver.tail(logTailLines))
	}
}

// RestartAPIServer stops kube-apiserver and starts it again on the same port
// with the same flags, keeping etcd and its data. Every watch cache is rebuilt,
// so resource versions from before the restart are no longer in any cache.
func (s *Server) RestartAPIServer(t testing.TB) {
	t.Helper()
	start := time.Now()
	s.apiserver.stop()
	stopped := time.Now()
	s.startAPIServer(t)
	t.Logf("apiservertest: kube-apiserver restarted: stopped in %v, ready in %v",
		stopped.Sub(start).Round(time.Millisecond), time.Since(stopped).Round(time.Millisecond))
}

// CompactEtcd compacts etcd's history up to its current revision and returns
// that revision. Reads and watches at older revisions that miss the
// apiserver's watch cache then fail with 410 Gone.
func (s *Server) CompactEtcd(t testing.TB) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rev, err := etcdRevision(ctx, s.etcdURL)
	if err == nil {
		err = etcdCompact(ctx, s.etcdURL, rev)
	}
	if err != nil {
		t.Fatalf("apiservertest: compact etcd: %v", err)
	}
	return rev
}

// EtcdEndpoint is etcd's client URL, e.g. "http://127.0.0.1:40123".
func (s *Server) EtcdEndpoint() string { return s.etcdURL }

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

func (s *Server) host() string { return fmt.Sprintf("https://127.0.0.1:%d", s.port) }

// cleanup stops both processes, apiserver first so it never sees etcd vanish,
// and prints the log tails if the test failed.
func (s *Server) cleanup(t testing.TB) {
	for _, p := range []*process{s.apiserver, s.etcd} {
		if p == nil {
			continue
		}
		p.stop()
		if t.Failed() {
			t.Logf("apiservertest: --- %s log tail (%s):\n%s", p.name, p.logPath, p.tail(logTailLines))
		}
	}
}
