// Package apiservertest runs a real kube-apiserver backed by a real etcd on
// 127.0.0.1 for end-to-end tests and benchmarks.
//
// The binaries are not built here: run `make test-binaries` (which runs
// hack/build-test-binaries.sh) once; it puts etcd and kube-apiserver into
// <repo root>/_output/bin. BOLTINFORMER_TEST_BIN_DIR overrides that directory.
// Start fails the test, with that instruction, when they are missing; Launch
// returns it as an error.
//
// Contract:
//   - Start owns two child processes (etcd, kube-apiserver), their free
//     loopback ports, and a directory from t.TempDir holding etcd's data,
//     generated keys/certificates, the token file and both logs.
//   - The server is ready when Start returns: /readyz answered 200.
//   - Every process is stopped in a t.Cleanup (SIGTERM, SIGKILL after a grace
//     period) before the temp dir is removed. On Linux the children also get
//     SIGKILL if the test binary dies (Pdeathsig), so they never outlive it.
//     Each child runs in its own process group.
//   - If the test failed, the tails of both logs are written to the test log.
//   - Launch is the same for programs that are not tests (benchmarks, the
//     demo): the directory comes from os.MkdirTemp, and the caller's Stop
//     stops both processes and removes it. Restart and Compact are
//     RestartAPIServer and CompactEtcd returning errors instead of failing a
//     test.
//   - Clients authenticate with a static bearer token in group system:masters,
//     and verify the server against its generated self-signed certificate.
//     ServiceAccountConfig gives a client with namespaced RBAC instead.
//
// The package is Unix-only (process groups, signals).
//
// A Server is not safe for concurrent use by RestartAPIServer (or Restart),
// Stop and other methods; Config, Dir and EtcdEndpoint may be called from
// any goroutine.
package apiservertest
