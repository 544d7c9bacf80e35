package main

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/boltinformer/boltinformer/internal/fixture"
)

// The bench's Pods: fixture.Pod spread over 50 namespaces and 500 node
// names, labelled so that informers (and a --kubeconfig cluster's other
// Pods) can be told apart with a selector.
const (
	setLabel      = "bench.boltinformer.io/set"
	setValue      = "informerbench"
	podSelector   = setLabel + "=" + setValue
	tickAnnot     = "bench.boltinformer.io/tick"
	podNamespaces = 50
	podNodes      = 500
)

func namespaceOf(i int) string { return fmt.Sprintf("bench-%02d", i%podNamespaces) }

// nodeOf cycles through the node names slower than namespaces do, so every
// namespace sees every node.
func nodeOf(i int) string {
	n := (i / podNamespaces) % podNodes
	return fmt.Sprintf("ip-10-0-%d-%d.eu-west-1.compute.internal", n/250, n%250)
}

// podName is the name benchPod(i) gets.
func podName(i int) string { return fixture.Pod(i).Name }

// benchPod is Pod i as created: server-owned metadata and status cleared.
func benchPod(i int) *corev1.Pod {
	p := fixture.Pod(i)
	p.Status = corev1.PodStatus{}
	p.Namespace = namespaceOf(i)
	p.Spec.NodeName = nodeOf(i)
	p.UID, p.ResourceVersion = "", ""
	p.CreationTimestamp = metav1.Time{}
	p.Labels[setLabel] = setValue
	return p
}
