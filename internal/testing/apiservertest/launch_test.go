package apiservertest_test

import (
	"context"
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/boltinformer/boltinformer/internal/testing/apiservertest"
)

// TestLaunch checks the program-facing lifecycle: Launch, a request, Restart
// on the same port, Compact, and Stop removing the directory.
func TestLaunch(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s, err := apiservertest.Launch(ctx, apiservertest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	cs := kubernetes.NewForConfigOrDie(s.Config())
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("after Restart: %v", err)
	}
	if rev, err := s.Compact(ctx); err != nil || rev <= 0 {
		t.Fatalf("Compact() = %d, %v", rev, err)
	}
	s.Stop()
	s.Stop() // idempotent
	if _, err := os.Stat(s.Dir()); !os.IsNotExist(err) {
		t.Errorf("Stop left %s behind (stat: %v)", s.Dir(), err)
	}
}
