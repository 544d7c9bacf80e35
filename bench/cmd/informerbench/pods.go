package main

import (
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/boltinformer/boltinformer/internal/bench/benchkit"
	"github.com/boltinformer/boltinformer/internal/testing/fixture"
)

// The bench's Pods: fixture.Pod spread over 50 namespaces and 500 node
// names, labelled so that informers (and a cluster's other
// Pods) can be told apart with a selector.
const (
	setLabel      = "bench.boltinformer.io/set"
	tickAnnot     = "bench.boltinformer.io/tick"
	podNamespaces = 50
	podNodes      = 500
)

// podShape is which Pods the bench creates. The two shapes carry different
// names and label values, so both can live on one cluster.
type podShape string

const (
	// shapeRealistic: fixture.Pod as a scheduler leaves it (two containers,
	// probes, env, projected token volume): about 6 KB of protobuf as the
	// apiserver serves it (defaults and managedFields included).
	shapeRealistic podShape = "realistic"
	// shapeSmall: one container with an image, a port and resources, plus
	// the token volume every Pod gets: about 2.7 KB of protobuf as served,
	// the size of many batch and sidecar-free Pods.
	shapeSmall podShape = "small"
)

func (s *podShape) Set(v string) error {
	switch podShape(v) {
	case shapeRealistic, shapeSmall:
		*s = podShape(v)
		return nil
	}
	return fmt.Errorf("pod size %q: want %s or %s", v, shapeRealistic, shapeSmall)
}

func (s *podShape) String() string { return string(*s) }

// selector selects this shape's Pods and no others.
func (s podShape) selector() string { return setLabel + "=" + s.setValue() }

func (s podShape) setValue() string {
	if s == shapeSmall {
		return "informerbench-small"
	}
	return "informerbench"
}

// label is a suffix for file names: empty for the realistic default.
func (s podShape) label() string {
	if s == shapeSmall {
		return "-small"
	}
	return ""
}

func namespaceOf(i int) string { return fmt.Sprintf("bench-%02d", i%podNamespaces) }

// nodeOf cycles through the node names slower than namespaces do, so every
// namespace sees every node.
func nodeOf(i int) string {
	n := (i / podNamespaces) % podNodes
	return fmt.Sprintf("ip-10-0-%d-%d.eu-west-1.compute.internal", n/250, n%250)
}

// podName is the name s.pod(i) gets.
func (s podShape) podName(i int) string {
	if s == shapeSmall {
		return "small-" + fixture.Pod(i).Name
	}
	return fixture.Pod(i).Name
}

// pod is Pod i as created.
func (s podShape) pod(i int) *corev1.Pod {
	p := benchkit.FixturePod(i, namespaceOf(i))
	if s == shapeSmall {
		p = smallPod(p)
		p.Namespace = namespaceOf(i)
	}
	p.Name, p.Spec.NodeName = s.podName(i), nodeOf(i)
	p.Labels[setLabel] = s.setValue()
	return p
}

// podSet is Pods 0..n-1 of s.
func (s podShape) podSet(n, workers int, log io.Writer) benchkit.PodSet {
	ns := make([]string, podNamespaces)
	for i := range ns {
		ns[i] = namespaceOf(i)
	}
	return benchkit.PodSet{N: n, Workers: workers, Namespaces: ns, Pod: s.pod, Selector: s.selector(), Log: log}
}

// smallPod keeps of a realistic Pod its metadata (labels, owner), its first
// container's image, first port and resources, and the service-account
// token volume.
func smallPod(full *corev1.Pod) *corev1.Pod {
	c := full.Spec.Containers[0]
	token := full.Spec.Volumes[1]
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    full.GenerateName,
			Labels:          full.Labels,
			OwnerReferences: full.OwnerReferences,
		},
		Spec: corev1.PodSpec{
			Volumes: []corev1.Volume{token},
			Containers: []corev1.Container{{
				Name: c.Name, Image: c.Image, Ports: c.Ports[:1], Resources: c.Resources,
				VolumeMounts: []corev1.VolumeMount{{Name: token.Name, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}},
			}},
			ServiceAccountName: full.Spec.ServiceAccountName,
		},
	}
}
