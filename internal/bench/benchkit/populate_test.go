package benchkit

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// A context that ends before every create started is reported: Populate
// must not claim Pods it never created. g.Wait alone is nil when no
// started call failed. The context ends before the call, so no request is
// made.
func TestPopulateReportsAnEndedContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := Populate(ctx, &rest.Config{Host: "http://127.0.0.1:1"}, PodSet{
		N:       3,
		Workers: 2,
		Pod: func(i int) *corev1.Pod {
			return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("p%d", i)}}
		},
	})
	if err == nil {
		t.Fatal("Populate with an ended context created none of 3 Pods and returned nil")
	}
}
