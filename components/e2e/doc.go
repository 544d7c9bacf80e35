// Package e2e runs the control-plane components of this module —
// kube-scheduler and kube-controller-manager v1.37.2 on boltinformer's
// factories — as the processes a cluster runs, against a real
// kube-apiserver and etcd on loopback (internal/testing/apiservertest),
// with Node objects standing in for kubelets. Requests are counted at the apiserver,
// from its audit log, and each component is compared with the stock
// binary built from the same Kubernetes module in the same run.
//
// The tests build the binaries (go build) once per run, into
// <repository>/_output/components-e2e: the Go build cache makes that a
// link step after the first time, and a binary already up to date there
// is not linked again.
package e2e
