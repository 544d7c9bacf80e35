package apiservertest

import "time"

// Options tune the kube-apiserver started by Start or Launch. The zero value gives the
// server's defaults.
type Options struct {
	// EtcdCompactionInterval sets --etcd-compaction-interval, how often the
	// apiserver compacts etcd. 0 keeps the server default (5m); to disable
	// compaction pass ExtraArgs: []string{"--etcd-compaction-interval=0"}.
	EtcdCompactionInterval time.Duration
	// WatchCacheSizes sets --watch-cache-sizes, entries "resource[.group]#size";
	// size 0 disables the watch cache for that resource.
	WatchCacheSizes []string
	// ExtraArgs are appended to kube-apiserver's flags. For a scalar flag
	// given twice, the later (this) value wins; list flags accumulate.
	ExtraArgs []string
	// ReadyTimeout bounds each wait for /readyz. 0 means 60s.
	ReadyTimeout time.Duration
	// EtcdProgressNotifyInterval sets etcd's --watch-progress-notify-interval.
	// 0 means 5s, as in Kubernetes' own test clusters; etcd's default is 10m.
	// The watch cache learns the current RV of an idle resource only from
	// these notifications, and it sends a watcher a BOOKMARK only once that
	// RV is newer than the watch's start RV, so with 10m an idle resource
	// gets no bookmarks for up to 10 minutes.
	EtcdProgressNotifyInterval time.Duration
	// EtcdQuotaBackendBytes sets etcd's --quota-backend-bytes. 0 keeps etcd's
	// default (2 GiB), which 100k Pods plus their update history can exceed
	// between two compactions.
	EtcdQuotaBackendBytes int64
}

func (o Options) readyTimeout() time.Duration {
	if o.ReadyTimeout > 0 {
		return o.ReadyTimeout
	}
	return 60 * time.Second
}

func (o Options) etcdProgressNotifyInterval() time.Duration {
	if o.EtcdProgressNotifyInterval > 0 {
		return o.EtcdProgressNotifyInterval
	}
	return 5 * time.Second
}
