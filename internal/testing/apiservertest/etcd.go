package apiservertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
)

// etcdArgs configures a single-member etcd listening only on loopback.
// fsync is off: the data dir is thrown away with the test, and fsync
// dominates write latency when tests create many objects.
func etcdArgs(dir string, clientPort, peerPort int, opts Options) []string {
	client := fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	peer := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	args := []string{
		"--name=test",
		"--data-dir=" + filepath.Join(dir, "etcd-data"),
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=test=" + peer,
		"--watch-progress-notify-interval=" + opts.etcdProgressNotifyInterval().String(),
		"--unsafe-no-fsync",
		"--log-level=warn",
	}
	if q := opts.EtcdQuotaBackendBytes; q > 0 {
		args = append(args, "--quota-backend-bytes="+strconv.FormatInt(q, 10))
	}
	return args
}

// etcdPost calls etcd's gRPC-gateway JSON API (POST /v3/...). Int64 fields
// are JSON strings in that API.
func etcdPost(ctx context.Context, endpoint, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd %s: %s: %s", path, resp.Status, bytes.TrimSpace(data))
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(data, out)
}

// etcdRevision returns the store's current revision.
func etcdRevision(ctx context.Context, endpoint string) (int64, error) {
	var resp struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	// A count-only range over a key that never exists still carries the
	// header with the current revision. Keys are base64 in this API.
	in := map[string]any{"key": "AA==", "count_only": true}
	if err := etcdPost(ctx, endpoint, "/v3/kv/range", in, &resp); err != nil {
		return 0, err
	}
	return strconv.ParseInt(resp.Header.Revision, 10, 64)
}

// etcdCompact compacts etcd's history up to rev, waiting until it is applied.
func etcdCompact(ctx context.Context, endpoint string, rev int64) error {
	in := map[string]any{"revision": strconv.FormatInt(rev, 10), "physical": true}
	return etcdPost(ctx, endpoint, "/v3/kv/compaction", in, nil)
}
