package widgets_test

import (
	"testing"

	"github.com/boltinformer/boltinformer/controllerruntime/internal/crtest"
	"github.com/boltinformer/boltinformer/internal/testing/apiservertest"
)

// srv is one kube-apiserver (with etcd) for the package; tests keep apart by
// namespace. TestOperatorConvergesAfterExpiry restarts it.
var srv *apiservertest.Server

func TestMain(m *testing.M) { crtest.Main(m, &srv) }
