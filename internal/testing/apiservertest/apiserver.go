package apiservertest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// apiserverArgs are the kube-apiserver flags for s.
//
// --advertise-address is pinned to loopback because the default derives it
// from the host's default-route interface, which a sandbox may not have.
// Since v1.37 the endpoint reconciler refuses a loopback address (it would
// publish it as the kubernetes Service's endpoint); no test needs that
// endpoint, so there is no reconciler (--endpoint-reconciler-type=none).
// The ServiceAccount admission plugin is disabled because no controller
// manager runs to create the default service accounts it requires.
func (s *Server) apiserverArgs() []string {
	c := s.creds
	args := []string{
		"--etcd-servers=" + s.etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--endpoint-reconciler-type=none",
		"--secure-port=" + strconv.Itoa(s.port),
		"--tls-cert-file=" + c.certFile,
		"--tls-private-key-file=" + c.keyFile,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + c.saKeyFile,
		"--service-account-signing-key-file=" + c.saKeyFile,
		"--token-auth-file=" + c.tokenFile,
		"--authorization-mode=RBAC",
		"--disable-admission-plugins=ServiceAccount",
	}
	if d := s.opts.EtcdCompactionInterval; d != 0 {
		args = append(args, "--etcd-compaction-interval="+d.String())
	}
	if len(s.opts.WatchCacheSizes) > 0 {
		args = append(args, "--watch-cache-sizes="+strings.Join(s.opts.WatchCacheSizes, ","))
	}
	return append(args, s.opts.ExtraArgs...)
}

// httpClient trusts only the server's generated certificate.
func (s *Server) httpClient() *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.creds.caPEM)
	return &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}
}

// waitReady polls url until it answers 200, p exits, ctx ends, or timeout
// passes. bearer, if set, is sent as the Authorization token.
func waitReady(ctx context.Context, p *process, client *http.Client, url, bearer string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	lastErr := "no response"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			lastErr = resp.Status
		} else {
			lastErr = err.Error()
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before %s was ready: %v", p.name, url, p.err)
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %v (last: %s)", url, timeout, lastErr)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
