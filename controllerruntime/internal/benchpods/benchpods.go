// Package benchpods names the Pods of the controller-runtime benches:
// benchkit.FixturePods creates them, and the benches address them by index.
package benchpods

import (
	"fmt"

	"github.com/boltinformer/boltinformer/internal/testing/fixture"
)

// Namespaces is how many namespaces the Pods are spread over.
const Namespaces = 10

// Namespace returns the namespace of Pod i.
func Namespace(i int) string { return fmt.Sprintf("bench-%02d", i%Namespaces) }

// Name returns the name of Pod i (fixture.Pod's).
func Name(i int) string { return fixture.Pod(i).Name }
