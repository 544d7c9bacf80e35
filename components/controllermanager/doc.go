// Package controllermanager is kube-controller-manager v1.37.2 with its
// informer factories kept in a boltinformer cache file: upstream's command
// (command.go follows cmd/kube-controller-manager/app/controllermanager.go)
// with a --boltinformer-cache-file flag, and a controller context
// (context.go) whose typed, dynamic and metadata factories are
// boltinformer's on that file. Every controller, its options and its
// leader election are upstream's, called through their exported API; the
// service account token controller is built here (satoken.go) because
// upstream builds it before the others from an unexported function.
// cmd/kube-controller-manager is its main.
package controllermanager
