package controllerruntime_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"sync"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	boltcr "github.com/boltinformer/boltinformer/controllerruntime"
	"github.com/boltinformer/boltinformer/controllerruntime/internal/crtest"
	"github.com/boltinformer/boltinformer/internal/testing/apiservertest"
	"github.com/boltinformer/boltinformer/persist"
)

// configMapRules let a ServiceAccount read the ConfigMaps of its namespace.
var configMapRules = []rbacv1.PolicyRule{{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"configmaps"}}}

// TestNamespacedServiceAccount runs a cache limited to one namespace
// (DefaultNamespaces) as a ServiceAccount whose only grant is a RoleBinding
// there, so it may not read kube-system, next to controller-runtime's
// default cache with the same credentials, on one file:
//
//  1. cold: it syncs, reads as the default cache does, LISTs once per
//     informer (typed, unstructured, metadata) and every collection records
//     the ServiceAccount's UID as the cluster (before, the apiserver's URL);
//  2. warm, after changes while stopped: 0 LISTs, reads as the default cache;
//  3. the same cache as the admin, who may read kube-system: cold, and the
//     collections record "kube-system/<uid>", byte for byte as before;
//  4. as the ServiceAccount again: cold, back to its kind.
//
// Step 2's 0 LISTs count full lists: crtest.Requests must not count the
// limit=1 read a caught-up start makes.
func TestNamespacedServiceAccount(t *testing.T) {
	ctx := context.Background()
	cs := clientset(t)
	ns := namespaces(t, cs, 1)[0]
	saCfg, sa, err := srv.ServiceAccountConfig(ctx, ns, "ctrl", configMapRules)
	if err != nil {
		t.Fatal(err)
	}
	requireForbiddenKubeSystem(t, saCfg)
	for i := range 6 {
		createConfigMap(t, cs, ns, fmt.Sprintf("cm-%d", i), []string{"x", "y"}[i%2], fmt.Sprintf("o%d", i%2+1))
	}
	kubeSystem, err := cs.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	saIdentity := fmt.Sprintf("serviceaccount/%s/%s/%s", ns, sa.Name, sa.UID)
	path := filepath.Join(t.TempDir(), "cache.db")
	cacheOpts := cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}}

	run := func(what string, cfg *rest.Config, wantLists int, wantCluster string) {
		t.Helper()
		counted, reqs := countedConfig(cfg)
		c := startCache(t, func() (cache.Cache, error) {
			return boltcr.New(counted, cacheOpts, boltcr.Options{Path: path, File: persist.Options{NoSync: true}})
		})
		ref := startCache(t, func() (cache.Cache, error) { return cache.New(cfg, cacheOpts) })
		sameViews(t, what, c, ref, []string{ns})
		c.stop()
		ref.stop()
		if n := reqs.List("configmaps"); n != wantLists {
			t.Errorf("%s: %d LISTs of configmaps, want %d", what, n, wantLists)
		}
		requireRecordedCluster(t, what, path, wantCluster, 3)
	}

	run("cold, as the ServiceAccount", saCfg, 3, saIdentity)
	createConfigMap(t, cs, ns, "while-down", "x", "o1")
	if err := cs.CoreV1().ConfigMaps(ns).Delete(ctx, "cm-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	run("warm, as the ServiceAccount", saCfg, 0, saIdentity)
	run("as the admin, after the ServiceAccount", srv.Config(), 3, "kube-system/"+string(kubeSystem.UID))
	run("as the ServiceAccount, after the admin", saCfg, 3, saIdentity)
}

// TestSameAddressOtherCluster: two clusters reached at one address (a
// proxy moved from one to the other — the same loopback port reused by a
// new test cluster, a DNS name moved from blue to green) are two clusters.
// A namespaced cache whose file was written through the address while it
// led to the first cluster starts cold when it leads to the second, and
// then reads as controller-runtime's default cache on the second. With the
// apiserver's URL as the identity (before), it resumed the first
// cluster's objects.
func TestSameAddressOtherCluster(t *testing.T) {
	ctx := context.Background()
	other := apiservertest.Start(t, apiservertest.Options{})
	proxy := newSwitchProxy(t)

	csA := clientset(t)
	ns := namespaces(t, csA, 1)[0]
	csB, err := kubernetes.NewForConfig(other.Config())
	if err != nil {
		t.Fatal(err)
	}
	configs := map[string]*rest.Config{}
	for name, s := range map[string]*apiservertest.Server{"first": srv, "second": other} {
		cfg, _, err := s.ServiceAccountConfig(ctx, ns, "ctrl", configMapRules)
		if err != nil {
			t.Fatal(err)
		}
		configs[name] = cfg
	}
	for i := range 4 {
		createConfigMap(t, csA, ns, fmt.Sprintf("cm-%d", i), "x", "first")
		createConfigMap(t, csB, ns, fmt.Sprintf("cm-%d", i+1), "y", "second")
	}
	path := filepath.Join(t.TempDir(), "cache.db")
	cacheOpts := cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}}

	for _, name := range []string{"first", "second"} {
		direct := configs[name]
		proxy.route(t, direct.Host)
		viaProxy := rest.CopyConfig(direct)
		viaProxy.Host = proxy.url()
		counted, reqs := countedConfig(viaProxy)
		c := startCache(t, func() (cache.Cache, error) {
			return boltcr.New(counted, cacheOpts, boltcr.Options{Path: path, File: persist.Options{NoSync: true}})
		})
		ref := startCache(t, func() (cache.Cache, error) { return cache.New(direct, cacheOpts) })
		sameViews(t, "through the address, to the "+name+" cluster", c, ref, []string{ns})
		c.stop()
		ref.stop()
		if n := reqs.List("configmaps"); n != 3 {
			t.Errorf("%s cluster: %d LISTs of configmaps, want 3 (a cold start of each informer)", name, n)
		}
	}
}

// countedConfig returns a copy of cfg whose LIST requests are counted.
func countedConfig(cfg *rest.Config) (*rest.Config, *crtest.Requests) {
	r := &crtest.Requests{}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(r.Wrap)
	return cfg, r
}

// requireForbiddenKubeSystem checks the premise: cfg may not read the
// kube-system namespace.
func requireForbiddenKubeSystem(t *testing.T, cfg *rest.Config) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Get(context.Background(), metav1.NamespaceSystem, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("reading namespace kube-system: %v, want Forbidden", err)
	}
}

// requireRecordedCluster opens the file read-only and checks that it holds
// n collections, each recording cluster as its cluster.
func requireRecordedCluster(t *testing.T, what, path, cluster string, n int) {
	t.Helper()
	db, err := persist.Open(path, persist.Options{ReadOnly: true, Scheme: boltcr.CodecScheme(scheme.Scheme)})
	if err != nil {
		t.Fatalf("%s: open %s read-only: %v", what, path, err)
	}
	defer db.Close()
	infos, err := db.Collections()
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != n {
		t.Errorf("%s: %d collections, want %d", what, len(infos), n)
	}
	for _, info := range infos {
		coll, err := db.Collection(info.Name, persist.CollectionOptions{})
		if err != nil {
			t.Fatalf("%s: collection %q: %v", what, info.Name, err)
		}
		if got := coll.Provenance()["cluster"]; got != cluster {
			t.Errorf("%s: collection %q records cluster %q, want %q", what, info.Name, got, cluster)
		}
	}
}

// switchProxy forwards TCP connections on one loopback address to a
// backend that route changes, closing the connections to the previous
// one: one address, several clusters over time.
type switchProxy struct {
	ln net.Listener
	wg sync.WaitGroup

	mu      sync.Mutex
	backend string              // host:port; guarded by mu
	conns   map[net.Conn]string // open connections (both ends) → backend; guarded by mu
}

func newSwitchProxy(t *testing.T) *switchProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &switchProxy{ln: ln, conns: map[net.Conn]string{}}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		ln.Close()
		p.closeConns("")
		p.wg.Wait()
	})
	return p
}

func (p *switchProxy) url() string { return "https://" + p.ln.Addr().String() }

// route sends new connections to the server at rawURL and closes those to
// any other.
func (p *switchProxy) route(t *testing.T, rawURL string) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.backend = u.Host
	p.mu.Unlock()
	p.closeConns(u.Host)
}

// closeConns closes every connection not to keep ("" closes all).
func (p *switchProxy) closeConns(keep string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c, backend := range p.conns {
		if keep == "" || backend != keep {
			c.Close()
			delete(p.conns, c)
		}
	}
}

func (p *switchProxy) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.mu.Lock()
		backend := p.backend
		p.mu.Unlock()
		out, err := net.Dial("tcp", backend)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns[in], p.conns[out] = backend, backend
		p.mu.Unlock()
		p.wg.Go(func() { pipe(out, in) })
		p.wg.Go(func() { pipe(in, out) })
	}
}

// pipe copies src to dst until either ends, then closes both.
func pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src) // ends when either side is closed
	dst.Close()
	src.Close()
}
