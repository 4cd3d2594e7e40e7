// The kube-apiserver of the pinned k8s.io/kubernetes release, built from its Go module for the
// integration tests (a real apiserver, no kubelet, no controllers).
package main

import (
	"os"
	_ "time/tzdata" // CronJob time zones, as the release binary embeds them

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics on /metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // the version metric
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
