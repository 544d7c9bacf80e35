// Command kube-scheduler is the Kubernetes scheduler v1.37.2 with every
// informer kept in a boltinformer cache file (--boltinformer-cache-file), so
// that a restart or failover resumes the watches instead of listing the
// cluster again. Every other flag is upstream's.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register" // for JSON log format registration
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version" // for version metric registration

	"github.com/boltinformer/boltinformer/components/scheduler"
)

func main() {
	command := scheduler.NewSchedulerCommand()
	code := cli.Run(command)
	os.Exit(code)
}
