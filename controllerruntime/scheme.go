package controllerruntime

import (
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// CodecScheme returns a new scheme for a cache file's codec. It holds every
// type of s under the same GroupVersionKinds. It adds metav1's
// PartialObjectMetadata, which metadata-only informers store and
// client-go's scheme lacks. s itself is not changed.
func CodecScheme(s *runtime.Scheme) *runtime.Scheme {
	out := runtime.NewScheme()
	for gvk, t := range s.AllKnownTypes() {
		out.AddKnownTypeWithName(gvk, reflect.New(t).Interface().(runtime.Object))
	}
	_ = metav1.AddMetaToScheme(out) // never fails
	return out
}
