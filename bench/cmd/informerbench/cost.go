package main

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
)

// What an informer start costs the control plane, measured from the child:
// the bytes it read from the apiserver and the CPU time kube-apiserver and
// etcd spent meanwhile. A fleet of controllers restarting at once pays this
// once per informer.

// wireCounter counts the bytes a client reads from its connections to the
// apiserver: TLS records as they arrive, compressed where the apiserver
// compressed (it gzips large LIST responses when asked, and client-go's
// transport asks by default; watch streams are not compressed).
type wireCounter struct {
	read atomic.Int64
}

// dial is a rest.Config.Dial that counts what the connection reads.
func (w *wireCounter) dial(ctx context.Context, network, address string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, n: &w.read}, nil
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// startCost is what one informer start cost the control plane.
type startCost struct {
	WireBytes     int64   `json:"wireBytes"`     // read from the apiserver's connections (TLS, possibly gzip)
	BodyBytes     int64   `json:"bodyBytes"`     // Pod response bodies as encoded by the apiserver
	APIServerCPUs float64 `json:"apiserverCpuS"` // kube-apiserver CPU seconds meanwhile; -1 if unknown
	EtcdCPUs      float64 `json:"etcdCpuS"`      // etcd CPU seconds meanwhile; -1 if unknown
	// Lists is the LIST requests made meanwhile (childResult.Lists counts
	// the whole child).
	Lists int64 `json:"lists"`
	// Probes is the limit=1 consistent reads made meanwhile (not in Lists).
	Probes int64 `json:"limit1Reads"`
	// MetaLists and Fetches are a recovery's requests made meanwhile (not
	// in Lists): pages of its metadata list, and its lists of one object
	// or one namespace. A recovery that lists the whole collection counts
	// that list in Lists.
	MetaLists int64 `json:"metadataLists,omitempty"`
	Fetches   int64 `json:"fetches,omitempty"`
	// MetaBodyBytes and FetchBodyBytes are the parts of BodyBytes that
	// the metadata list and the fetches read.
	MetaBodyBytes  int64 `json:"metadataBodyBytes,omitempty"`
	FetchBodyBytes int64 `json:"fetchBodyBytes,omitempty"`
	// ClientCPUs is the CPU seconds the informer's own process used
	// meanwhile (user + system, every goroutine); -1 if unknown. Results
	// from before it was measured have 0.
	ClientCPUs float64 `json:"clientCpuS,omitempty"`
}

func (c startCost) String() string {
	s := fmt.Sprintf("%.1f MiB in (%.1f MiB encoded), apiserver %.2f CPU-s, etcd %.2f CPU-s, client %.2f CPU-s",
		mib(c.WireBytes), mib(c.BodyBytes), c.APIServerCPUs, c.EtcdCPUs, c.ClientCPUs)
	if c.MetaLists > 0 || c.Fetches > 0 {
		s += fmt.Sprintf(", %d metadata-list pages (%.1f MiB), %d fetches (%.1f MiB)", c.MetaLists, mib(c.MetaBodyBytes), c.Fetches, mib(c.FetchBodyBytes))
	}
	return s
}
