// Package controllermanager is kube-controller-manager v1.37.2 with its
// informer factories kept in a boltinformer cache file: upstream's command
// (command.go follows cmd/kube-controller-manager/app/controllermanager.go)
// with a --boltinformer-cache-file flag, and a controller context
// (context.go) whose typed, dynamic and metadata factories are
// boltinformer's on that file. Every controller, its options and its
// leader election are upstream's, called through their exported API; the
// service account token controller is built here, first (satoken.go),
// because it is not among app.NewControllerDescriptors and a
// ControllerDescriptor cannot be built outside upstream's package.
// cmd/kube-controller-manager is its main.
package controllermanager
