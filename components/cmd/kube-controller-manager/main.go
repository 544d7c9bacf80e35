// Command kube-controller-manager is the Kubernetes controller manager
// v1.37.2 with every informer (typed and metadata) kept in a boltinformer
// cache file (--boltinformer-cache-file), so that a restart or failover
// resumes the watches instead of listing the cluster again. Every other flag
// is upstream's.
package main

import (
	"os"
	_ "time/tzdata" // for CronJob Time Zone support

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // for JSON log format registration
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // load all the prometheus client-go plugin
	_ "k8s.io/component-base/metrics/prometheus/version"  // for version metric registration

	"github.com/boltinformer/boltinformer/components/controllermanager"
)

func main() {
	command := controllermanager.NewControllerManagerCommand()
	code := cli.Run(command)
	os.Exit(code)
}
