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
// Options.Cluster, learned through the cache's own credentials once per
// cache, as the factories learn theirs: the kube-system namespace's UID
// (recorded as "kube-system/<uid>"), or, only if reading it is Forbidden,
// the UID of the ServiceAccount the cache authenticates as (recorded as
// "serviceaccount/<ns>/<name>/<uid>"). Any other error is not remembered:
// the informer retries and resumes nothing until it is known. See
// internal/clusterid.
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
