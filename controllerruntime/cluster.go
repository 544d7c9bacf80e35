package controllerruntime

import (
	"fmt"
	"net/http"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/internal/clusterid"
)

// defaultCluster is the cluster identity of a cache without
// Options.Cluster. It is learned once per cache through the cache's own
// credentials, as the factories learn theirs. It is the kube-system
// namespace's UID, recorded as "kube-system/<uid>". Only if reading that is
// Forbidden, it is the UID of the ServiceAccount the cache authenticates
// as, recorded as "serviceaccount/<ns>/<name>/<uid>". Any other error is
// not remembered, so the informer retries and resumes nothing until the
// identity is known (see internal/clusterid).
func defaultCluster(config *rest.Config, httpClient *http.Client) (bcache.ClusterIdentity, error) {
	client, err := kubernetes.NewForConfigAndClient(config, httpClient)
	if err != nil {
		return nil, fmt.Errorf("client for the cluster identity: %w", err)
	}
	return clusterid.New(clusterid.Typed(client), clusterid.Options{
		Component:        "boltinformer cache",
		Declare:          "boltcr.Options.Cluster",
		KubeSystemPrefix: "kube-system/",
	}).Get, nil
}
