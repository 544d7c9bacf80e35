// Package scheduler is kube-scheduler v1.37.2 with its informers kept in a
// boltinformer cache file: upstream's command (command.go follows
// cmd/kube-scheduler/app/server.go) with a --boltinformer-cache-file flag,
// and in Setup the typed and dynamic informer factories replaced by
// boltinformer's on that file (informers.go) before the scheduler is built.
// The scheduler, its plugins and options are upstream's, called through
// their exported API. cmd/kube-scheduler is its main.
package scheduler
